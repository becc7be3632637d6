/* The trainer's backward pass: the forward of train_fwd.c in reverse, one explicit backward op per forward op,
 * each an entry of the backend contract (backend.h, "training", through ops_train.c). Every parameter gradient is
 * overwritten by this pass (the matmul weights' written by their product, the others zeroed first and accumulated).
 *
 * Two kinds of work. The dx chain (from dlogits down to d(x0)) is row-local by sequence, so like the forward it runs
 * as one slice of sequences per thread on the backend's run_split, each slice's ops on its own sub-backend, writing
 * its rows of every gradient the parameter sums read (per layer, tr->G). The parameter gradients are sums over all
 * rows whose order fixes their bits (dW = dy^T x, bias, norm weight and bias, smear, position and embedding sums),
 * so they run after a join on the backend itself, on all rows, in the order of the unsliced pass: the same bits for
 * any slices. The chain runs part by part (head, then blocks from the top), each part's sums right after its join,
 * while the gradients its slices wrote are still in cache (one join for the whole chain left them to L3: 4-6% of a
 * 2-thread meta step). */
#include <string.h>

#include "train_internal.h"

/* The slice's rows of a [w, tr->N] buffer. */
static float *rows(const tr_slice *s, const float *p, int64_t w) { return (float *)p + s->n0 * w; }

/* dx [K] WRITTEN = dy [R] . W for y = x W^T (x only shapes the call). */
static int dx_linear(const tr_slice *s, int w, const float *x, int64_t K, int64_t R, const float *dy, float *dx,
                     icl_error *err) {
  tr_views v = {.tr = s->tr};
  return icl_op_matmul_bwd(s->be, tr_v(&v, tr_w(s->tr, w), K, R), tr_v(&v, rows(s, x, K), K, s->N),
                           tr_v(&v, rows(s, dy, R), R, s->N), NULL, tr_v(&v, rows(s, dx, K), K, s->N),
                           ICL_BWD_WRITE_DX, err);
}

/* dx += d(norm(x)) from dy, no parameter sums (a plain add for no norm), with the statistics the forward left in
 * the norm's slot of tr->stats. */
static int dx_norm(const tr_slice *s, int w, int slot, const float *x, const float *dy, float *dx, icl_error *err) {
  icl_trainer *tr = s->tr;
  int64_t d = tr->cfg.d_model, N = s->N;
  tr_views v = {.tr = tr};
  if (tr->cfg.norm == ICL_NORM_NONE)
    return icl_op_sum_rows(s->be, tr_v(&v, rows(s, dy, d), d, N), tr_v(&v, rows(s, dx, d), d, N), err);
  return icl_op_norm_bwd(s->be, tr->cfg.norm == ICL_NORM_RMS, tr_v(&v, rows(s, x, d), d, N),
                         tr_v(&v, tr_w(tr, w), d, 1), tr->cfg.norm_eps, tr_v(&v, rows(s, dy, d), d, N),
                         tr_v(&v, rows(s, dx, d), d, N), NULL, NULL, tr_v(&v, rows(s, tr_stats(tr, slot), 2), 2, N), 1,
                         err);
}

/* dst = src over the slice's rows of a [d, N] buffer. */
static void copy_rows(const tr_slice *s, float *dst, const float *src, int64_t d) {
  memcpy(rows(s, dst, d), rows(s, src, d), (size_t)(d * s->N) * sizeof(float));
}

/* The residual gradient entering layer l's top from above (tr->dres below the first layer). */
static float *r_top(const icl_trainer *tr, int l) {
  if (l < 0) return tr->dres;
  return tr->cfg.d_ff ? tr->G[l].r_mlp : tr->G[l].r_attn;
}

/* Output layer, classifier and final norm: dlogits -> the top layer's residual gradient. */
static int dx_head(const tr_slice *s, icl_error *err) {
  icl_trainer *tr = s->tr;
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  int nh = c->output == ICL_OUT_CLASSIFIER ? c->cls_hidden : 0;
  float *g = nh ? tr->dcls[nh - 1] : tr->dhf;
  int rc = dx_linear(s, tr->out_w, nh ? tr->ch[nh - 1] : tr->hf, d, tr_n_out(c), tr->dlogits, g, err);
  for (int i = nh - 1; !rc && i >= 0; i--) {
    tr_views v = {.tr = tr};
    const icl_dt *vg = tr_v(&v, rows(s, g, d), d, s->N);
    if ((rc = icl_op_relu_bwd(s->be, tr_v(&v, rows(s, tr->ch[i], d), d, s->N), vg, vg, err))) break;
    float *next = i > 0 ? tr->dcls[i - 1] : tr->dhf;
    rc = dx_linear(s, tr->cls_w[i], i > 0 ? tr->ch[i - 1] : tr->hf, d, d, g, next, err);
    g = next;
  }
  float *r = r_top(tr, c->n_layer - 1);
  if (!rc) memset(rows(s, r, d), 0, (size_t)(d * s->N) * sizeof(float));
  return rc ? rc : dx_norm(s, tr->onorm_w, 2 * c->n_layer, tr->res + c->n_layer * d * tr->N, tr->dhf, r, err);
}

/* MLP of block l: r_mlp becomes r_attn. */
static int dx_mlp(const tr_slice *s, int l, icl_error *err) {
  icl_trainer *tr = s->tr;
  const tr_layer *L = &tr->L[l];
  const tr_acts *a = &tr->A[l];
  const tr_grads *g = &tr->G[l];
  int64_t d = tr->cfg.d_model, ff = tr->cfg.d_ff;
  int rc = dx_linear(s, L->down, a->a, ff, d, g->r_mlp, g->du, err);
  tr_views v = {.tr = tr};
  const icl_dt *vdu = tr_v(&v, rows(s, g->du, ff), ff, s->N);
  if (!rc) rc = icl_op_gelu_bwd(s->be, tr_v(&v, rows(s, a->u, ff), ff, s->N), vdu, vdu, err);
  if (!rc) rc = dx_linear(s, L->up, a->h2, d, ff, g->du, g->dh2, err);
  if (rc) return rc;
  copy_rows(s, g->r_attn, g->r_mlp, d);
  return dx_norm(s, L->ffn_norm_w, 2 * l + 1, a->mid, g->dh2, g->r_attn, err);
}

/* Attention of block l: r_attn becomes the residual gradient entering the block (r_top of the layer below). */
static int dx_attention(const tr_slice *s, int l, icl_error *err) {
  icl_trainer *tr = s->tr;
  const icl_attn_config *c = &tr->cfg;
  const tr_layer *L = &tr->L[l];
  const tr_acts *a = &tr->A[l];
  const tr_grads *g = &tr->G[l];
  int64_t d = c->d_model, qd = tr->qd, hd = tr->hd, nh = c->n_head, T = tr->T, B = s->B;
  const float *dz = g->r_attn;
  int rc = ICL_OK;
  if (L->wo >= 0) {
    if ((rc = dx_linear(s, L->wo, a->z, qd, d, g->r_attn, tr->dz, err))) return rc;
    dz = tr->dz;
  }
  tr_views v = {.tr = tr};
  rc = icl_op_attention_bwd(s->be, tr_v4(&v, rows(s, a->q, qd), hd, nh, T, B),
                            tr_v4(&v, rows(s, a->ks, qd), hd, nh, T, B), tr_v4(&v, rows(s, a->v, qd), hd, nh, T, B),
                            tr_v4(&v, a->P + s->b0 * T * T * nh, T, T, nh, B), tr_v4(&v, rows(s, dz, qd), hd, nh, T, B),
                            tr_attn_scale(tr), tr_v4(&v, rows(s, g->dq, qd), hd, nh, T, B),
                            tr_v4(&v, rows(s, g->dks, qd), hd, nh, T, B), tr_v4(&v, rows(s, g->dv, qd), hd, nh, T, B),
                            err);
  if (!rc && L->smear >= 0) {
    tr_views m = {.tr = tr};
    rc = icl_op_smear_bwd(s->be, tr_v4(&m, rows(s, a->k, qd), hd, nh, T, B), tr_v(&m, tr_w(tr, L->smear), nh, 1),
                          tr_v4(&m, rows(s, g->dks, qd), hd, nh, T, B), tr_v4(&m, rows(s, g->dk, qd), hd, nh, T, B),
                          NULL, err);
  }
  for (int i = 0; !rc && c->position == ICL_POS_ROPE && i < 2; i++) { /* back through the rotation of q and k */
    tr_views r = {.tr = tr};
    rc = icl_op_rope_bwd(s->be, tr_v4(&r, rows(s, i ? g->dk : g->dq, qd), hd, nh, s->N, 1),
                         tr_vi(&r, tr->pos_ids + s->n0, s->N), (int)hd, c->rope_base, err);
  }
  if (rc) return rc;
  const int w[3] = {L->wq, L->wk, L->wv};
  const float *dy[3] = {g->dq, g->dk, g->dv};
  icl_dt vw[3], vdy[3];
  for (int i = 0; i < 3; i++)
    vw[i] = tr_view(tr, tr_w(tr, w[i]), d, qd), vdy[i] = tr_view(tr, rows(s, dy[i], qd), qd, s->N);
  icl_dt vx = tr_view(tr, rows(s, a->h, d), d, s->N), vdx = tr_view(tr, rows(s, g->dh, d), d, s->N);
  if ((rc = icl_op_matmul_bwd_group(s->be, 3, vw, &vx, vdy, NULL, &vdx, ICL_BWD_WRITE_DX, err))) return rc;
  float *r = r_top(tr, l - 1);
  copy_rows(s, r, g->r_attn, d);
  return dx_norm(s, L->norm_w, 2 * l, tr->res + l * d * tr->N, g->dh, r, err);
}

/* Part s->part of the dx chain on the slice's rows: n_layer the head, l < n_layer block l (MLP, then attention). */
static int dx_part(const tr_slice *s, icl_error *err) {
  int l = s->part, rc = ICL_OK;
  if (l == s->tr->cfg.n_layer) return dx_head(s, err);
  if (s->tr->cfg.d_ff) rc = dx_mlp(s, l, err);
  return rc ? rc : dx_attention(s, l, err);
}

/* ---- parameter sums, all rows, after the join ---------------------------------------------------------------- */

/* db += the rows of dy [R]; dW WRITTEN = dy^T x for y = x W^T + b. */
static int sums_linear(icl_trainer *tr, int w, int b, const float *x, int64_t K, int64_t R, const float *dy,
                       icl_error *err) {
  tr_views v = {.tr = tr};
  int rc = b >= 0 ? icl_op_sum_rows(tr->be, tr_v4(&v, dy, R, 1, tr->N, 1), tr_v(&v, tr_g(tr, b), R, 1), err) : ICL_OK;
  if (rc) return rc;
  return icl_op_matmul_bwd(tr->be, tr_v(&v, tr_w(tr, w), K, R), tr_v(&v, x, K, tr->N), tr_v(&v, dy, R, tr->N),
                           tr_v(&v, tr_g(tr, w), K, R), NULL, ICL_BWD_WRITE_DW, err);
}

/* dw, db += a norm's parameter sums from its input x and output gradient dy (nothing for no norm), with the
 * statistics the forward left in its slot. */
static int sums_norm(icl_trainer *tr, int w, int b, int slot, const float *x, const float *dy, icl_error *err) {
  int64_t d = tr->cfg.d_model, N = tr->N;
  if (tr->cfg.norm == ICL_NORM_NONE) return ICL_OK;
  int rms = tr->cfg.norm == ICL_NORM_RMS;
  tr_views v = {.tr = tr};
  return icl_op_norm_bwd(tr->be, rms, tr_v(&v, x, d, N), tr_v(&v, tr_w(tr, w), d, 1), tr->cfg.norm_eps,
                         tr_v(&v, dy, d, N), NULL, tr_v(&v, tr_g(tr, w), d, 1),
                         rms ? NULL : tr_v(&v, tr_g(tr, b), d, 1), tr_v(&v, tr_stats(tr, slot), 2, N), 1, err);
}

/* Block l's parameter sums, in the unsliced pass's order (MLP, then attention). */
static int sums_block(icl_trainer *tr, int l, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  const tr_layer *L = &tr->L[l];
  const tr_acts *a = &tr->A[l];
  const tr_grads *g = &tr->G[l];
  int64_t d = c->d_model, ff = c->d_ff, qd = tr->qd, N = tr->N;
  int rc = ICL_OK;
  if (ff) {
    rc = sums_linear(tr, L->down, L->down_b, a->a, ff, d, g->r_mlp, err);
    if (!rc) rc = sums_linear(tr, L->up, L->up_b, a->h2, d, ff, g->du, err);
    if (!rc) rc = sums_norm(tr, L->ffn_norm_w, L->ffn_norm_b, 2 * l + 1, a->mid, g->dh2, err);
  }
  if (!rc && L->wo >= 0) rc = sums_linear(tr, L->wo, L->bo, a->z, qd, d, g->r_attn, err);
  int64_t hd = tr->hd, nh = c->n_head, T = tr->T, B = tr->B;
  if (!rc && L->smear >= 0) {
    tr_views s = {.tr = tr};
    rc = icl_op_smear_bwd(tr->be, tr_v4(&s, a->k, hd, nh, T, B), tr_v(&s, tr_w(tr, L->smear), nh, 1),
                          tr_v4(&s, g->dks, hd, nh, T, B), NULL, tr_v(&s, tr_g(tr, L->smear), nh, 1), err);
  }
  const int w[3] = {L->wq, L->wk, L->wv}, b[3] = {L->bq, L->bk, L->bv};
  const float *dy[3] = {g->dq, g->dk, g->dv};
  icl_dt vw[3], vdy[3], vdw[3];
  for (int i = 0; i < 3; i++) {
    tr_views v = {.tr = tr};
    if (!rc && b[i] >= 0)
      rc = icl_op_sum_rows(tr->be, tr_v4(&v, dy[i], qd, 1, N, 1), tr_v(&v, tr_g(tr, b[i]), qd, 1), err);
    vw[i] = tr_view(tr, tr_w(tr, w[i]), d, qd), vdw[i] = tr_view(tr, tr_g(tr, w[i]), d, qd);
    vdy[i] = tr_view(tr, dy[i], qd, N);
  }
  icl_dt vx = tr_view(tr, a->h, d, N);
  if (!rc) rc = icl_op_matmul_bwd_group(tr->be, 3, vw, &vx, vdy, vdw, NULL, ICL_BWD_WRITE_DW, err);
  return rc ? rc : sums_norm(tr, L->norm_w, L->norm_b, 2 * l, tr->res + l * d * N, g->dh, err);
}

/* The head's parameter sums: output layer, classifier, final norm. */
static int sums_head(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  int nh = c->output == ICL_OUT_CLASSIFIER ? c->cls_hidden : 0;
  int rc = sums_linear(tr, tr->out_w, tr->out_b, nh ? tr->ch[nh - 1] : tr->hf, d, tr_n_out(c), tr->dlogits, err);
  for (int i = nh - 1; !rc && i >= 0; i--)
    rc = sums_linear(tr, tr->cls_w[i], tr->cls_b[i], i > 0 ? tr->ch[i - 1] : tr->hf, d, d, tr->dcls[i], err);
  return rc ? rc : sums_norm(tr, tr->onorm_w, tr->onorm_b, 2 * c->n_layer, tr->res + c->n_layer * d * N, tr->dhf, err);
}

/* The input's parameter sums: token embedding, positions, input projection. */
static int sums_input(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  int rc = ICL_OK;
  tr_views v = {.tr = tr};
  if (tr->tok >= 0)
    rc = icl_op_embed_bwd(tr->be, tr_vi(&v, tr->tokens, N), tr_v(&v, tr->dres, d, N),
                          tr_v(&v, tr_g(tr, tr->tok), d, c->vocab), err);
  if (!rc && tr->pos >= 0)
    rc = icl_op_sum_rows(tr->be, tr_v4(&v, tr->dres, d, tr->T, tr->B, 1), tr_v(&v, tr_g(tr, tr->pos), d, tr->T), err);
  if (!rc && tr->inp_w >= 0) rc = sums_linear(tr, tr->inp_w, tr->inp_b, tr->inputs, c->input_len, d, tr->dres, err);
  return rc;
}

static void zero(float *p, int64_t n) { memset(p, 0, (size_t)n * sizeof(float)); }

/* Parameter tensors zero_accumulated keeps a table for (a model has at most 8 + 2 per classifier layer + 17 per
 * block; more falls back to zeroing every gradient). */
#define TR_ZERO_TABLE (8 + 2 * TR_MAX_CLS + 17 * TR_MAX_LAYERS)

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

/* Part by part from the top (head, then the blocks), the part's dx chain in slices and then, after the join, its
 * parameter sums while the slices' gradients are still in cache: the sums in the unsliced pass's order (head,
 * blocks from the top, input), each reading only what the chain's parts above it wrote. */
int tr_backward_slices(icl_trainer *tr, int n, const int64_t *b, icl_error *err) {
  int top = tr->cfg.n_layer, rc = ICL_OK;
  for (int l = top; !rc && l >= 0; l--) {
    rc = tr_run_slices(tr, "backward", l, n, b, dx_part, err);
    /* zeroed once the slices are known good (refused ones leave every gradient as it was); the dx chain writes no
     * parameter gradient */
    if (!rc && l == top) zero_accumulated(tr);
    if (!rc) rc = l == top ? sums_head(tr, err) : sums_block(tr, l, err);
  }
  return rc ? rc : sums_input(tr, err);
}

int tr_backward(icl_trainer *tr, icl_error *err) {
  int64_t b[TR_MAX_SLICES + 1];
  return tr_backward_slices(tr, tr_default_slices(tr, b), b, err);
}
