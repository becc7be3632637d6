-- icl.readout: hidden states read through the model's own final norm and LM head, restricted to a few tokens
-- (label words, say). RMSNorm models only (llama, qwen2, gemma3), whose final norm is rms_norm(x) * w with
-- rms(x) = sqrt(mean(x^2) + eps):
--   lens(h)     = U (w * h / rms(h))   the logit lens of a residual row h: of the last layer's output, the model's
--                                      own logits of those tokens (up to rounding)
--   direct(c, x) = U (w * c) / rms(x)  the direct logit attribution of a component c that was added to the
--                                      residual stream whose final row is x: its linear share of the final logits,
--                                      the norm's scale held at x's
-- where U holds the unembedding rows of the tokens. docs/lua-library.md.
local M = {}
local RMS = {llama = true, qwen2 = true, gemma3 = true}

-- The reader of m's LM head for token ids `ids`: {U = [#ids, d] rows scaled by the final norm's weight, eps}.
function M.head(m, ids)
  if not RMS[m.arch] then
    error(("icl.readout.head: a %s model (RMSNorm architectures only: llama, qwen2, gemma3)"):format(m.arch), 2)
  end
  local U = m:weight("output.weight", {ids = ids})
  local w = m:weight("output_norm.weight")
  return {Uw = U * w:reshape(1, -1), eps = m.norm_eps, n = #ids}
end

-- 1 / rms of each row of x ([n, d] -> [n, 1]; a row [d] -> a number)
local function inv_rms(x, eps)
  if #x:shape() == 1 then return 1 / math.sqrt((x * x):mean() + eps) end
  return 1 / ((x * x):mean(2, true) + eps):sqrt()
end

-- lens(head, h): the tokens' logits of residual rows h ([n, d] -> [n, #ids]; [d] -> [#ids]).
function M.lens(head, h)
  local s = inv_rms(h, head.eps)
  if #h:shape() == 1 then return head.Uw:matmul(h) * s end
  return (h * s):matmul(head.Uw:transpose())
end

-- direct(head, c, x): the tokens' direct logit attribution of components c against final residual rows x
-- (same shapes as lens; c and x row for row).
function M.direct(head, c, x)
  local s = inv_rms(x, head.eps)
  if #c:shape() == 1 then return head.Uw:matmul(c) * s end
  return (c * s):matmul(head.Uw:transpose())
end

return M
