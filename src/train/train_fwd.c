/* The trainer's forward pass, top to bottom (docs/gguf.md, icl-attn): the backend's own ops
 * (src/ops.c on the CPU backend: matmul, norms, causal attention with its pattern, gelu, add)
 * on the trainer's buffers, plus the training ops of train_ops.h where inference has none.
 * Every activation the backward needs stays in its own buffer (train_internal.h). */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "train_internal.h"

/* y[R, N] = x[K, N] . W^T (+ bias). */
static int fwd_linear(icl_trainer *tr, int w, int b, const float *x, int64_t K, int64_t R, float *y, icl_error *err) {
  struct icl_buf bw, bx, by, bb;
  icl_dt vw = tr_view(&bw, tr_w(tr, w), K, R), vx = tr_view(&bx, x, K, tr->N), vy = tr_view(&by, y, R, tr->N);
  int rc = icl_op_matmul(tr->be, &vw, &vx, &vy, err);
  if (rc || b < 0) return rc;
  icl_dt vb = tr_view(&bb, tr_w(tr, b), R, 1);
  return icl_op_add(tr->be, &vy, &vb, &vy, err);
}

/* y = norm(x) per the model's norm kind (a copy for none). */
static int fwd_norm(icl_trainer *tr, int w, int b, const float *x, float *y, icl_error *err) {
  int64_t d = tr->cfg.d_model;
  struct icl_buf bx, by, bw, bb;
  icl_dt vx = tr_view(&bx, x, d, tr->N), vy = tr_view(&by, y, d, tr->N);
  icl_dt vw = tr_view(&bw, tr_w(tr, w), d, 1), vb = tr_view(&bb, tr_w(tr, b), d, 1);
  if (tr->cfg.norm == ICL_NORM_LAYER) return icl_op_layer_norm(tr->be, &vx, &vw, &vb, tr->cfg.norm_eps, &vy, err);
  if (tr->cfg.norm == ICL_NORM_RMS) return icl_op_rms_norm(tr->be, &vx, &vw, tr->cfg.norm_eps, &vy, err);
  memcpy(y, x, (size_t)(d * tr->N) * sizeof(float));
  return ICL_OK;
}

/* y = a + b over [d, N]. */
static int fwd_add(icl_trainer *tr, const float *a, const float *b, float *y, int64_t d, int64_t rows, icl_error *err) {
  struct icl_buf ba, bb, by;
  icl_dt va = tr_view(&ba, a, d, tr->N), vb = tr_view(&bb, b, d, rows), vy = tr_view(&by, y, d, tr->N);
  return icl_op_add(tr->be, &va, &vb, &vy, err);
}

float tr_attn_scale(const icl_trainer *tr) { return tr->cfg.no_scale ? 1.0f : 1.0f / sqrtf((float)tr->hd); }

/* z = softmax(scale q.ks^T + causal) v per sequence, pattern saved. */
static int fwd_attention(icl_trainer *tr, tr_acts *a, icl_error *err) {
  int64_t T = tr->T, nh = tr->cfg.n_head, hd = tr->hd, per = hd * nh * T;
  icl_attn_params p = {.scale = tr_attn_scale(tr)};
  for (int64_t b = 0; b < tr->B; b++) {
    struct icl_buf bq, bk, bv, bz, bp;
    icl_dt vq = tr_view(&bq, a->q + b * per, hd, nh * T), vk = tr_view(&bk, a->ks + b * per, hd, nh * T);
    icl_dt vv = tr_view(&bv, a->v + b * per, hd, nh * T), vz = tr_view(&bz, a->z + b * per, hd, nh * T);
    icl_dt vp = tr_view(&bp, a->P + b * nh * T * T, T, T * nh);
    vq.ne[1] = vk.ne[1] = vv.ne[1] = vz.ne[1] = nh, vq.ne[2] = vk.ne[2] = vv.ne[2] = vz.ne[2] = T;
    vp.ne[1] = T, vp.ne[2] = nh;
    int rc = icl_op_attention(tr->be, &vq, &vk, &vv, &p, NULL, &vz, &vp, err);
    if (rc) return rc;
  }
  return ICL_OK;
}

/* RoPE in place on x [hd, nh, N] (NEOX pairing over all of d_head) with the backend's op. */
static int fwd_rope(icl_trainer *tr, float *x, icl_error *err) {
  struct icl_buf bx, bp;
  icl_dt vx = tr_view(&bx, x, tr->hd, tr->cfg.n_head * tr->N), vp = tr_view(&bp, (const float *)tr->pos_ids, tr->N, 1);
  vx.ne[1] = tr->cfg.n_head, vx.ne[2] = tr->N;
  vp.type = ICL_TYPE_I32;
  return icl_op_rope(tr->be, &vx, &vp, tr->hd, tr->cfg.rope_base, ICL_ROPE_NEOX, err);
}

/* x0 = token embedding + input projection (or the inputs) + learned positions. */
static int fwd_embed(icl_trainer *tr, float *x, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  if (tr->tok >= 0) tr_embed_fwd(tr->cb, tr_w(tr, tr->tok), d, tr->tokens, N, x);
  else memset(x, 0, (size_t)(d * N) * sizeof(float));
  int rc = ICL_OK;
  if (c->input_len > 0 && tr->inp_w >= 0) {
    if (!(rc = fwd_linear(tr, tr->inp_w, tr->inp_b, tr->inputs, c->input_len, d, tr->tmp, err)))
      rc = fwd_add(tr, x, tr->tmp, x, d, N, err);
  } else if (c->input_len > 0) rc = fwd_add(tr, x, tr->inputs, x, d, N, err);
  for (int64_t b = 0; !rc && tr->pos >= 0 && b < tr->B; b++) {
    struct icl_buf bx, bp;
    icl_dt vx = tr_view(&bx, x + b * tr->T * d, d, tr->T), vp = tr_view(&bp, tr_w(tr, tr->pos), d, tr->T);
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
  if (!rc) rc = fwd_linear(tr, L->wq, L->bq, a->h, d, qd, a->q, err);
  if (!rc) rc = fwd_linear(tr, L->wk, L->bk, a->h, d, qd, a->k, err);
  if (!rc) rc = fwd_linear(tr, L->wv, L->bv, a->h, d, qd, a->v, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(tr, a->q, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(tr, a->k, err);
  if (!rc && L->smear >= 0) tr_smear_fwd(tr->cb, a->k, tr_w(tr, L->smear), tr->hd, c->n_head, tr->T, tr->B, a->ks);
  if (!rc) rc = fwd_attention(tr, a, err);
  if (!rc && L->wo >= 0) rc = fwd_linear(tr, L->wo, L->bo, a->z, qd, d, tr->tmp, err);
  if (!rc) rc = fwd_add(tr, xin, L->wo >= 0 ? tr->tmp : a->z, mid, d, tr->N, err);
  if (rc || !c->d_ff) return rc;
  rc = fwd_norm(tr, L->ffn_norm_w, L->ffn_norm_b, mid, a->h2, err);
  if (!rc) rc = fwd_linear(tr, L->up, L->up_b, a->h2, d, c->d_ff, a->u, err);
  struct icl_buf bu, ba;
  icl_dt vu = tr_view(&bu, a->u, c->d_ff, tr->N), va = tr_view(&ba, a->a, c->d_ff, tr->N);
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
    struct icl_buf bc;
    icl_dt vc = tr_view(&bc, tr->ch[i], d, tr->N);
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
  if (!rc) tr->loss = tr_xent(tr->cb, tr->logits, tr_n_out(&tr->cfg), N, tr->targets, tr->mask, tr->probs, tr->dlogits);
  return rc;
}
