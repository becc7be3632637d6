/* The trainer's forward pass, top to bottom (docs/gguf.md, icl-attn): the backend's own ops
 * (src/core/ops.c on the CPU backend: matmul, norms, causal attention with its pattern, gelu, add)
 * on the trainer's buffers, plus the contract's training entries where inference has none (embed, smear, xent).
 * Every activation the backward needs stays in its own buffer (train_internal.h). */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "train_internal.h"

/* y[R, N] = x[K, N] . W^T (+ bias). */
static int fwd_linear(icl_trainer *tr, int w, int b, const float *x, int64_t K, int64_t R, float *y, icl_error *err) {
  icl_dt vw = tr_view(tr, tr_w(tr, w), K, R), vx = tr_view(tr, x, K, tr->N), vy = tr_view(tr, y, R, tr->N);
  int rc = icl_op_matmul(tr->be, &vw, &vx, &vy, err);
  if (rc || b < 0) return rc;
  icl_dt vb = tr_view(tr, tr_w(tr, b), R, 1);
  return icl_op_add(tr->be, &vy, &vb, &vy, err);
}

/* q, k, v = h . W^T (+ bias) as one matmul group: the backend prepares h once for the three, each product
 * bit-identical to its own matmul. */
static int fwd_qkv(icl_trainer *tr, const tr_layer *L, tr_acts *a, icl_error *err) {
  int64_t d = tr->cfg.d_model, qd = tr->qd;
  const int w[3] = {L->wq, L->wk, L->wv}, b[3] = {L->bq, L->bk, L->bv};
  float *y[3] = {a->q, a->k, a->v};
  icl_dt vw[3], vy[3], vx = tr_view(tr, a->h, d, tr->N);
  for (int i = 0; i < 3; i++) vw[i] = tr_view(tr, tr_w(tr, w[i]), d, qd), vy[i] = tr_view(tr, y[i], qd, tr->N);
  int rc = icl_op_matmul_group(tr->be, 3, vw, &vx, vy, err);
  for (int i = 0; !rc && i < 3 && b[i] >= 0; i++) {
    icl_dt vb = tr_view(tr, tr_w(tr, b[i]), qd, 1);
    rc = icl_op_add(tr->be, &vy[i], &vb, &vy[i], err);
  }
  return rc;
}

/* y = norm(x) per the model's norm kind (a copy for none). */
static int fwd_norm(icl_trainer *tr, int w, int b, const float *x, float *y, icl_error *err) {
  int64_t d = tr->cfg.d_model;
  icl_dt vx = tr_view(tr, x, d, tr->N), vy = tr_view(tr, y, d, tr->N);
  tr_views v = {.tr = tr}; /* absent weight or bias: NULL */
  const icl_dt *vw = tr_v(&v, tr_w(tr, w), d, 1), *vb = tr_v(&v, tr_w(tr, b), d, 1);
  if (tr->cfg.norm == ICL_NORM_LAYER) return icl_op_layer_norm(tr->be, &vx, vw, vb, tr->cfg.norm_eps, &vy, err);
  if (tr->cfg.norm == ICL_NORM_RMS) return icl_op_rms_norm(tr->be, &vx, vw, tr->cfg.norm_eps, &vy, err);
  memcpy(y, x, (size_t)(d * tr->N) * sizeof(float));
  return ICL_OK;
}

/* y = a + b over [d, N]. */
static int fwd_add(icl_trainer *tr, const float *a, const float *b, float *y, int64_t d, int64_t rows, icl_error *err) {
  icl_dt va = tr_view(tr, a, d, tr->N), vb = tr_view(tr, b, d, rows), vy = tr_view(tr, y, d, tr->N);
  return icl_op_add(tr->be, &va, &vb, &vy, err);
}

float tr_attn_scale(const icl_trainer *tr) { return tr->cfg.no_scale ? 1.0f : 1.0f / sqrtf((float)tr->hd); }

/* z = softmax(scale q.ks^T + causal) v per sequence, pattern saved: every sequence in one call. */
static int fwd_attention(icl_trainer *tr, tr_acts *a, icl_error *err) {
  int64_t T = tr->T, nh = tr->cfg.n_head, hd = tr->hd, B = tr->B;
  icl_attn_params p = {.scale = tr_attn_scale(tr)};
  tr_views v = {.tr = tr};
  return icl_op_attention_seqs(tr->be, tr_v4(&v, a->q, hd, nh, T, B), tr_v4(&v, a->ks, hd, nh, T, B),
                               tr_v4(&v, a->v, hd, nh, T, B), &p, tr_v4(&v, a->z, hd, nh, T, B),
                               tr_v4(&v, a->P, T, T, nh, B), err);
}

/* RoPE in place on x [hd, nh, N] (NEOX pairing over all of d_head) with the backend's op. */
static int fwd_rope(icl_trainer *tr, float *x, icl_error *err) {
  icl_dt vx = tr_view(tr, x, tr->hd, tr->cfg.n_head * tr->N), vp = tr_view(tr, (const float *)tr->pos_ids, tr->N, 1);
  vx.ne[1] = tr->cfg.n_head, vx.ne[2] = tr->N;
  vp.type = ICL_TYPE_I32;
  return icl_op_rope(tr->be, &vx, &vp, tr->hd, tr->cfg.rope_base, ICL_ROPE_NEOX, err);
}

/* x0 = token embedding + input projection (or the inputs) + learned positions. */
static int fwd_embed(icl_trainer *tr, float *x, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  tr_views v = {.tr = tr};
  int rc = ICL_OK;
  if (tr->tok >= 0)
    rc = icl_op_embed(tr->be, tr_v(&v, tr_w(tr, tr->tok), d, c->vocab), tr_vi(&v, tr->tokens, N), tr_v(&v, x, d, N), err);
  else memset(x, 0, (size_t)(d * N) * sizeof(float));
  if (rc) return rc;
  if (c->input_len > 0 && tr->inp_w >= 0) {
    if (!(rc = fwd_linear(tr, tr->inp_w, tr->inp_b, tr->inputs, c->input_len, d, tr->tmp, err)))
      rc = fwd_add(tr, x, tr->tmp, x, d, N, err);
  } else if (c->input_len > 0) rc = fwd_add(tr, x, tr->inputs, x, d, N, err);
  if (!rc && tr->pos >= 0) { /* one add for every sequence: x as B rows of d*T, the table one row broadcast */
    icl_dt vx = tr_view(tr, x, d * tr->T, tr->B), vp = tr_view(tr, tr_w(tr, tr->pos), d * tr->T, 1);
    rc = icl_op_add(tr->be, &vx, &vp, &vx, err);
  }
  return rc;
}

/* One block: attention (and the MLP) from res_in to res_out. */
static int fwd_block(icl_trainer *tr, int l, const float *xin, float *xout, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  const tr_layer *L = &tr->L[l];
  tr_acts *a = &tr->A[l];
  int64_t d = c->d_model, qd = tr->qd;
  float *mid = c->d_ff ? a->mid : xout;
  int rc = fwd_norm(tr, L->norm_w, L->norm_b, xin, a->h, err);
  if (!rc) rc = fwd_qkv(tr, L, a, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(tr, a->q, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(tr, a->k, err);
  if (!rc && L->smear >= 0) {
    tr_views v = {.tr = tr};
    rc = icl_op_smear(tr->be, tr_v4(&v, a->k, tr->hd, c->n_head, tr->T, tr->B), tr_v(&v, tr_w(tr, L->smear), c->n_head, 1),
                      tr_v4(&v, a->ks, tr->hd, c->n_head, tr->T, tr->B), err);
  }
  if (!rc) rc = fwd_attention(tr, a, err);
  if (!rc && L->wo >= 0) rc = fwd_linear(tr, L->wo, L->bo, a->z, qd, d, tr->tmp, err);
  if (!rc) rc = fwd_add(tr, xin, L->wo >= 0 ? tr->tmp : a->z, mid, d, tr->N, err);
  if (rc || !c->d_ff) return rc;
  rc = fwd_norm(tr, L->ffn_norm_w, L->ffn_norm_b, mid, a->h2, err);
  if (!rc) rc = fwd_linear(tr, L->up, L->up_b, a->h2, d, c->d_ff, a->u, err);
  icl_dt vu = tr_view(tr, a->u, c->d_ff, tr->N), va = tr_view(tr, a->a, c->d_ff, tr->N);
  if (!rc) rc = icl_op_gelu(tr->be, &vu, &va, err);
  if (!rc) rc = fwd_linear(tr, L->down, L->down_b, a->a, c->d_ff, d, tr->tmp, err);
  if (!rc) rc = fwd_add(tr, mid, tr->tmp, xout, d, tr->N, err);
  return rc;
}

/* Final norm, classifier layers, logits. */
static int fwd_head(icl_trainer *tr, const float *x, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  int rc = fwd_norm(tr, tr->onorm_w, tr->onorm_b, x, tr->hf, err);
  const float *h = tr->hf;
  for (int i = 0; !rc && c->output == ICL_OUT_CLASSIFIER && i < c->cls_hidden; i++) {
    icl_dt vc = tr_view(tr, tr->ch[i], d, tr->N);
    rc = fwd_linear(tr, tr->cls_w[i], tr->cls_b[i], h, d, d, tr->ch[i], err);
    if (!rc) rc = icl_op_relu(tr->be, &vc, &vc, err);
    h = tr->ch[i];
  }
  if (!rc) rc = fwd_linear(tr, tr->out_w, tr->out_b, h, d, tr_n_out(c), tr->logits, err);
  return rc;
}

int tr_forward(icl_trainer *tr, icl_error *err) {
  int64_t d = tr->cfg.d_model, N = tr->N;
  int rc = fwd_embed(tr, tr->res, err);
  for (int l = 0; !rc && l < tr->cfg.n_layer; l++) rc = fwd_block(tr, l, tr->res + l * d * N, tr->res + (l + 1) * d * N, err);
  if (!rc) rc = fwd_head(tr, tr->res + tr->cfg.n_layer * d * N, err);
  int64_t nv = tr_n_out(&tr->cfg);
  tr_views v = {.tr = tr};
  if (!rc)
    rc = icl_op_xent(tr->be, tr_v(&v, tr->logits, nv, N), tr_vi(&v, tr->targets, N), tr_v(&v, tr->mask, N, 1),
                     tr_v(&v, tr->probs, nv * N + N, 1), tr_v(&v, tr->dlogits, nv, N), &tr->loss, err);
  return rc;
}
