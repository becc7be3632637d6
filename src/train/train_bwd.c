/* The trainer's backward pass: the forward of train_fwd.c in reverse, one explicit backward op per forward op,
 * each an entry of the backend contract (backend.h, "training", through ops_train.c). The residual gradient
 * dres is one buffer updated in place from the top block down; every parameter gradient is overwritten by this
 * pass (the matmul weights' written by their product, the others zeroed first and accumulated). */
#include <string.h>

#include "train_internal.h"

/* Gradient of y[R, N] = x[K, N] . W^T + b: dW and db, and (when dx) dx = dy W (first, the buffer's first
 * contribution, stored without reading it) or dx += dy W. dW is written: each weight has one product. */
static int bwd_linear(icl_trainer *tr, int w, int b, const float *x, int64_t K, int64_t R, const float *dy,
                      float *dx, int first, icl_error *err) {
  tr_views v = {.tr = tr};
  int rc = b >= 0 ? icl_op_sum_rows(tr->be, tr_v4(&v, dy, R, 1, tr->N, 1), tr_v(&v, tr_g(tr, b), R, 1), err) : ICL_OK;
  if (rc) return rc;
  return icl_op_matmul_bwd(tr->be, tr_v(&v, tr_w(tr, w), K, R), tr_v(&v, x, K, tr->N), tr_v(&v, dy, R, tr->N),
                           tr_v(&v, tr_g(tr, w), K, R), tr_v(&v, dx, K, tr->N),
                           ICL_BWD_WRITE_DW | (first ? ICL_BWD_WRITE_DX : 0), err);
}

/* q, k, v's backward as one matmul_bwd_group on their shared input h (the backend packs h once for the three dW):
 * the biases' sums, dW of each, dh = dq Wq + dk Wk + dv Wv in that order (written). */
static int bwd_qkv(icl_trainer *tr, const tr_layer *L, const float *h, const float *dk, icl_error *err) {
  int64_t d = tr->cfg.d_model, qd = tr->qd, N = tr->N;
  const int w[3] = {L->wq, L->wk, L->wv}, b[3] = {L->bq, L->bk, L->bv};
  const float *dy[3] = {tr->dq, dk, tr->dv};
  icl_dt vw[3], vdy[3], vdw[3];
  int rc = ICL_OK;
  for (int i = 0; i < 3; i++) {
    tr_views v = {.tr = tr};
    if (!rc && b[i] >= 0)
      rc = icl_op_sum_rows(tr->be, tr_v4(&v, dy[i], qd, 1, N, 1), tr_v(&v, tr_g(tr, b[i]), qd, 1), err);
    vw[i] = tr_view(tr, tr_w(tr, w[i]), d, qd), vdw[i] = tr_view(tr, tr_g(tr, w[i]), d, qd);
    vdy[i] = tr_view(tr, dy[i], qd, N);
  }
  icl_dt vx = tr_view(tr, h, d, N), vdx = tr_view(tr, tr->dh, d, N);
  int write = ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX;
  return rc ? rc : icl_op_matmul_bwd_group(tr->be, 3, vw, &vx, vdy, vdw, &vdx, write, err);
}

/* dx += gradient of y = norm(x) with weight w, bias b. */
static int bwd_norm(icl_trainer *tr, int w, int b, const float *x, const float *dy, float *dx, icl_error *err) {
  int64_t d = tr->cfg.d_model, N = tr->N;
  tr_views v = {.tr = tr};
  if (tr->cfg.norm == ICL_NORM_NONE) return icl_op_sum_rows(tr->be, tr_v(&v, dy, d, N), tr_v(&v, dx, d, N), err);
  int rms = tr->cfg.norm == ICL_NORM_RMS;
  return icl_op_norm_bwd(tr->be, rms, tr_v(&v, x, d, N), tr_v(&v, tr_w(tr, w), d, 1), tr->cfg.norm_eps,
                         tr_v(&v, dy, d, N), tr_v(&v, dx, d, N), tr_v(&v, tr_g(tr, w), d, 1),
                         rms ? NULL : tr_v(&v, tr_g(tr, b), d, 1), tr_v(&v, tr->stats, 2, N), err);
}

static void zero(float *p, int64_t n) { memset(p, 0, (size_t)n * sizeof(float)); }

/* Parameter tensors zero_accumulated keeps a table for (a model has at most 8 + 2 per classifier layer + 17 per
 * block; more falls back to zeroing every gradient). */
#define TR_ZERO_TABLE (8 + 2 * TR_MAX_CLS + 17 * TR_MAX_LAYERS)

/* Output layer and classifier: dlogits -> gradient of the final norm output in *dhf. */
static int bwd_head(icl_trainer *tr, float **dhf, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  int nh = c->output == ICL_OUT_CLASSIFIER ? c->cls_hidden : 0;
  float *g = tr->dc0, *g2 = tr->dc1;
  int rc = bwd_linear(tr, tr->out_w, tr->out_b, nh ? tr->ch[nh - 1] : tr->hf, d, tr_n_out(c), tr->dlogits, g, 1, err);
  for (int i = nh - 1; !rc && i >= 0; i--) {
    tr_views v = {.tr = tr};
    if ((rc = icl_op_relu_bwd(tr->be, tr_v(&v, tr->ch[i], d, N), tr_v(&v, g, d, N), tr_v(&v, g, d, N), err))) break;
    rc = bwd_linear(tr, tr->cls_w[i], tr->cls_b[i], i > 0 ? tr->ch[i - 1] : tr->hf, d, d, g, g2, 1, err);
    float *t = g;
    g = g2, g2 = t;
  }
  *dhf = g;
  return rc;
}

/* MLP of block l: dres = d(block output) becomes d(mid). */
static int bwd_mlp(icl_trainer *tr, int l, icl_error *err) {
  const tr_layer *L = &tr->L[l];
  const tr_acts *a = &tr->A[l];
  int64_t d = tr->cfg.d_model, ff = tr->cfg.d_ff, N = tr->N;
  int rc = bwd_linear(tr, L->down, L->down_b, a->a, ff, d, tr->dres, tr->du, 1, err);
  if (rc) return rc;
  tr_views v = {.tr = tr};
  rc = icl_op_gelu_bwd(tr->be, tr_v(&v, a->u, ff, N), tr_v(&v, tr->du, ff, N), tr_v(&v, tr->du, ff, N), err);
  if (!rc) rc = bwd_linear(tr, L->up, L->up_b, a->h2, d, ff, tr->du, tr->dh, 1, err);
  return rc ? rc : bwd_norm(tr, L->ffn_norm_w, L->ffn_norm_b, a->mid, tr->dh, tr->dres, err);
}

/* Attention of block l: dres = d(mid) becomes d(block input). */
static int bwd_attention(icl_trainer *tr, int l, const float *xin, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  const tr_layer *L = &tr->L[l];
  const tr_acts *a = &tr->A[l];
  int64_t d = c->d_model, qd = tr->qd, N = tr->N;
  const float *dz = tr->dres;
  int rc = ICL_OK;
  if (L->wo >= 0) {
    if ((rc = bwd_linear(tr, L->wo, L->bo, a->z, qd, d, tr->dres, tr->dz, 1, err))) return rc;
    dz = tr->dz;
  }
  int64_t hd = tr->hd, nh = c->n_head, T = tr->T, B = tr->B;
  tr_views v = {.tr = tr};
  rc = icl_op_attention_bwd(tr->be, tr_v4(&v, a->q, hd, nh, T, B), tr_v4(&v, a->ks, hd, nh, T, B),
                            tr_v4(&v, a->v, hd, nh, T, B), tr_v4(&v, a->P, T, T, nh, B), tr_v4(&v, dz, hd, nh, T, B),
                            tr_attn_scale(tr), tr_v4(&v, tr->dq, hd, nh, T, B), tr_v4(&v, tr->dks, hd, nh, T, B),
                            tr_v4(&v, tr->dv, hd, nh, T, B), err);
  if (rc) return rc;
  float *dk = tr->dks;
  if (L->smear >= 0) {
    tr_views s = {.tr = tr};
    rc = icl_op_smear_bwd(tr->be, tr_v4(&s, a->k, hd, nh, T, B), tr_v(&s, tr_w(tr, L->smear), nh, 1),
                          tr_v4(&s, tr->dks, hd, nh, T, B), tr_v4(&s, tr->dk, hd, nh, T, B),
                          tr_v(&s, tr_g(tr, L->smear), nh, 1), err);
    dk = tr->dk;
  }
  for (int i = 0; !rc && c->position == ICL_POS_ROPE && i < 2; i++) { /* back through the rotation of q and k */
    tr_views r = {.tr = tr};
    rc = icl_op_rope_bwd(tr->be, tr_v4(&r, i ? dk : tr->dq, hd, nh, N, 1), tr_vi(&r, tr->pos_ids, N), (int)hd,
                         c->rope_base, err);
  }
  if (!rc) rc = bwd_qkv(tr, L, a->h, dk, err);
  return rc ? rc : bwd_norm(tr, L->norm_w, L->norm_b, xin, tr->dh, tr->dres, err);
}

/* Embedding, input projection and positions from d(x0) = dres. */
static int bwd_embed(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  tr_views v = {.tr = tr};
  int rc = ICL_OK;
  if (tr->tok >= 0)
    rc = icl_op_embed_bwd(tr->be, tr_vi(&v, tr->tokens, tr->N), tr_v(&v, tr->dres, d, tr->N),
                          tr_v(&v, tr_g(tr, tr->tok), d, c->vocab), err);
  if (!rc && tr->pos >= 0)
    rc = icl_op_sum_rows(tr->be, tr_v4(&v, tr->dres, d, tr->T, tr->B, 1), tr_v(&v, tr_g(tr, tr->pos), d, tr->T), err);
  if (!rc && tr->inp_w >= 0) rc = bwd_linear(tr, tr->inp_w, tr->inp_b, tr->inputs, c->input_len, d, tr->dres, NULL, 1, err);
  return rc;
}

/* Zeroes the gradients this pass accumulates into: all but the matmul weights', which bwd_linear writes. */
static void zero_accumulated(icl_trainer *tr) {
  const icl_attn_config *c = &tr->cfg;
  unsigned char written[TR_ZERO_TABLE] = {0};
  if (tr->np > TR_ZERO_TABLE) {
    zero(tr->g, tr->n_floats);
    return;
  }
  const int head[2] = {tr->out_w, tr->inp_w};
  for (int i = 0; i < 2; i++)
    if (head[i] >= 0) written[head[i]] = 1;
  for (int i = 0; c->output == ICL_OUT_CLASSIFIER && i < c->cls_hidden; i++) written[tr->cls_w[i]] = 1;
  for (int l = 0; l < c->n_layer; l++) {
    const tr_layer *L = &tr->L[l];
    const int m[6] = {L->wq, L->wk, L->wv, L->wo, L->up, L->down};
    for (int i = 0; i < 6; i++)
      if (m[i] >= 0) written[m[i]] = 1;
  }
  for (int i = 0; i < tr->np; i++)
    if (!written[i]) zero(tr_g(tr, i), tr->p[i].ne[0] * tr->p[i].ne[1]);
}

int tr_backward(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  zero_accumulated(tr);
  float *dhf;
  int rc = bwd_head(tr, &dhf, err);
  if (rc) return rc;
  zero(tr->dres, d * N);
  rc = bwd_norm(tr, tr->onorm_w, tr->onorm_b, tr->res + c->n_layer * d * N, dhf, tr->dres, err);
  for (int l = c->n_layer - 1; !rc && l >= 0; l--) {
    if (c->d_ff) rc = bwd_mlp(tr, l, err);
    if (!rc) rc = bwd_attention(tr, l, tr->res + l * d * N, err);
  }
  return rc ? rc : bwd_embed(tr, err);
}
