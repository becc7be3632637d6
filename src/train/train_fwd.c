/* The trainer's forward pass, top to bottom (docs/gguf.md, icl-attn): the backend's own ops
 * (src/core/ops.c on the CPU backend: matmul, norms, causal attention with its pattern, gelu, add)
 * on the trainer's buffers, plus the contract's training entries where inference has none (embed, smear, xent).
 * Every activation the backward needs stays in its own buffer (train_internal.h).
 *
 * Every op up to the logits is row-local by sequence (each output row's bits do not depend on the rows computed with
 * it: EXACT precision, backend.h), so on a backend with run_split the sequences are cut into one slice per thread and
 * each slice runs the whole way from the embedding to its logits on its own sub-backend, with no hand-off between
 * ops; the loss (an ordered sum over every row) then runs on all rows at once. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "train_internal.h"

/* Width of the forward's scratch tr->tmp per row (as train_model.c carves it): slice rows at tmp + n0 * width. */
static int64_t tmp_width(const icl_trainer *tr) {
  int64_t d = tr->cfg.d_model, w = tr->qd > d ? tr->qd : d;
  return tr->cfg.d_ff > w ? tr->cfg.d_ff : w;
}

/* y[R, N] = x[K, N] . W^T (+ bias). */
static int fwd_linear(const tr_slice *s, int w, int b, const float *x, int64_t K, int64_t R, float *y, icl_error *err) {
  icl_trainer *tr = s->tr;
  icl_dt vw = tr_view(tr, tr_w(tr, w), K, R), vx = tr_view(tr, x, K, s->N), vy = tr_view(tr, y, R, s->N);
  int rc = icl_op_matmul(s->be, &vw, &vx, &vy, err);
  if (rc || b < 0) return rc;
  icl_dt vb = tr_view(tr, tr_w(tr, b), R, 1);
  return icl_op_add(s->be, &vy, &vb, &vy, err);
}

/* q, k, v = h . W^T (+ bias) as one matmul group: the backend prepares h once for the three, each product
 * bit-identical to its own matmul. */
static int fwd_qkv(const tr_slice *s, const tr_layer *L, const tr_acts *a, icl_error *err) {
  icl_trainer *tr = s->tr;
  int64_t d = tr->cfg.d_model, qd = tr->qd;
  const int w[3] = {L->wq, L->wk, L->wv}, b[3] = {L->bq, L->bk, L->bv};
  float *y[3] = {a->q, a->k, a->v};
  icl_dt vw[3], vy[3], vx = tr_view(tr, a->h, d, s->N);
  for (int i = 0; i < 3; i++) vw[i] = tr_view(tr, tr_w(tr, w[i]), d, qd), vy[i] = tr_view(tr, y[i], qd, s->N);
  int rc = icl_op_matmul_group(s->be, 3, vw, &vx, vy, err);
  for (int i = 0; !rc && i < 3 && b[i] >= 0; i++) {
    icl_dt vb = tr_view(tr, tr_w(tr, b[i]), qd, 1);
    rc = icl_op_add(s->be, &vy[i], &vb, &vy[i], err);
  }
  return rc;
}

/* y = norm(x) per the model's norm kind (a copy for none), x's statistics kept in the norm's slot of tr->stats
 * for the backward (tr_stats). */
static int fwd_norm(const tr_slice *s, int w, int b, int slot, const float *x, float *y, icl_error *err) {
  icl_trainer *tr = s->tr;
  int64_t d = tr->cfg.d_model;
  icl_dt vx = tr_view(tr, x, d, s->N), vy = tr_view(tr, y, d, s->N);
  tr_views v = {.tr = tr}; /* absent weight or bias: NULL */
  const icl_dt *vw = tr_v(&v, tr_w(tr, w), d, 1), *vb = tr_v(&v, tr_w(tr, b), d, 1);
  if (tr->cfg.norm != ICL_NORM_NONE)
    return icl_op_norm_fwd(s->be, tr->cfg.norm == ICL_NORM_RMS, &vx, vw, vb, tr->cfg.norm_eps, &vy,
                           tr_v(&v, tr_stats(tr, slot) + 2 * s->n0, 2, s->N), err);
  memcpy(y, x, (size_t)(d * s->N) * sizeof(float));
  return ICL_OK;
}

/* y = a + b over [d, N]. */
static int fwd_add(const tr_slice *s, const float *a, const float *b, float *y, int64_t d, icl_error *err) {
  icl_dt va = tr_view(s->tr, a, d, s->N), vb = tr_view(s->tr, b, d, s->N), vy = tr_view(s->tr, y, d, s->N);
  return icl_op_add(s->be, &va, &vb, &vy, err);
}

float tr_attn_scale(const icl_trainer *tr) { return tr->cfg.no_scale ? 1.0f : 1.0f / sqrtf((float)tr->hd); }

/* z = softmax(scale q.ks^T + causal) v per sequence, pattern saved: every sequence of the slice in one call. */
static int fwd_attention(const tr_slice *s, const tr_acts *a, icl_error *err) {
  const icl_trainer *tr = s->tr;
  int64_t T = tr->T, nh = tr->cfg.n_head, hd = tr->hd, B = s->B;
  icl_attn_params p = {.scale = tr_attn_scale(tr)};
  tr_views v = {.tr = tr};
  return icl_op_attention_seqs(s->be, tr_v4(&v, a->q, hd, nh, T, B), tr_v4(&v, a->ks, hd, nh, T, B),
                               tr_v4(&v, a->v, hd, nh, T, B), &p, tr_v4(&v, a->z, hd, nh, T, B),
                               tr_v4(&v, a->P, T, T, nh, B), err);
}

/* RoPE in place on x [hd, nh, N] (NEOX pairing over all of d_head) with the backend's op. */
static int fwd_rope(const tr_slice *s, float *x, icl_error *err) {
  const icl_trainer *tr = s->tr;
  icl_dt vx = tr_view(tr, x, tr->hd, tr->cfg.n_head * s->N);
  icl_dt vp = tr_view(tr, (const float *)(tr->pos_ids + s->n0), s->N, 1);
  vx.ne[1] = tr->cfg.n_head, vx.ne[2] = s->N;
  vp.type = ICL_TYPE_I32;
  return icl_op_rope(s->be, &vx, &vp, tr->hd, tr->cfg.rope_base, ICL_ROPE_NEOX, err);
}

/* x0 = token embedding + input projection (or the inputs) + learned positions. */
static int fwd_embed(const tr_slice *s, float *x, icl_error *err) {
  icl_trainer *tr = s->tr;
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = s->N;
  tr_views v = {.tr = tr};
  int rc = ICL_OK;
  if (tr->tok >= 0)
    rc = icl_op_embed(s->be, tr_v(&v, tr_w(tr, tr->tok), d, c->vocab), tr_vi(&v, tr->tokens + s->n0, N),
                      tr_v(&v, x, d, N), err);
  else memset(x, 0, (size_t)(d * N) * sizeof(float));
  if (rc) return rc;
  const float *in = tr->inputs + s->n0 * c->input_len;
  float *tmp = tr->tmp + s->n0 * tmp_width(tr);
  if (c->input_len > 0 && tr->inp_w >= 0) {
    if (!(rc = fwd_linear(s, tr->inp_w, tr->inp_b, in, c->input_len, d, tmp, err))) rc = fwd_add(s, x, tmp, x, d, err);
  } else if (c->input_len > 0) rc = fwd_add(s, x, in, x, d, err);
  if (!rc && tr->pos >= 0) { /* one add for every sequence: x as B rows of d*T, the table one row broadcast */
    icl_dt vx = tr_view(tr, x, d * tr->T, s->B), vp = tr_view(tr, tr_w(tr, tr->pos), d * tr->T, 1);
    rc = icl_op_add(s->be, &vx, &vp, &vx, err);
  }
  return rc;
}

/* The slice's rows of block l's activations. */
static tr_acts slice_acts(const tr_slice *s, int l) {
  const icl_trainer *tr = s->tr;
  const tr_acts *a = &tr->A[l];
  int64_t d = tr->cfg.d_model, qd = tr->qd, ff = tr->cfg.d_ff, n0 = s->n0;
  return (tr_acts){.h = a->h + n0 * d, .q = a->q + n0 * qd, .k = a->k + n0 * qd, .ks = a->ks + n0 * qd,
                   .v = a->v + n0 * qd, .z = a->z + n0 * qd, .P = a->P + s->b0 * tr->T * tr->T * tr->cfg.n_head,
                   .mid = a->mid ? a->mid + n0 * d : NULL, .h2 = a->h2 ? a->h2 + n0 * d : NULL,
                   .u = a->u ? a->u + n0 * ff : NULL, .a = a->a ? a->a + n0 * ff : NULL};
}

/* One block: attention (and the MLP) from res_in to res_out. */
static int fwd_block(const tr_slice *s, int l, const float *xin, float *xout, icl_error *err) {
  icl_trainer *tr = s->tr;
  const icl_attn_config *c = &tr->cfg;
  const tr_layer *L = &tr->L[l];
  tr_acts a = slice_acts(s, l);
  int64_t d = c->d_model, qd = tr->qd;
  float *mid = c->d_ff ? a.mid : xout, *tmp = tr->tmp + s->n0 * tmp_width(tr);
  int rc = fwd_norm(s, L->norm_w, L->norm_b, 2 * l, xin, a.h, err);
  if (!rc) rc = fwd_qkv(s, L, &a, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(s, a.q, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = fwd_rope(s, a.k, err);
  if (!rc && L->smear >= 0) {
    tr_views v = {.tr = tr};
    rc = icl_op_smear(s->be, tr_v4(&v, a.k, tr->hd, c->n_head, tr->T, s->B), tr_v(&v, tr_w(tr, L->smear), c->n_head, 1),
                      tr_v4(&v, a.ks, tr->hd, c->n_head, tr->T, s->B), err);
  }
  if (!rc) rc = fwd_attention(s, &a, err);
  if (!rc && L->wo >= 0) rc = fwd_linear(s, L->wo, L->bo, a.z, qd, d, tmp, err);
  if (!rc) rc = fwd_add(s, xin, L->wo >= 0 ? tmp : a.z, mid, d, err);
  if (rc || !c->d_ff) return rc;
  rc = fwd_norm(s, L->ffn_norm_w, L->ffn_norm_b, 2 * l + 1, mid, a.h2, err);
  if (!rc) rc = fwd_linear(s, L->up, L->up_b, a.h2, d, c->d_ff, a.u, err);
  icl_dt vu = tr_view(tr, a.u, c->d_ff, s->N), va = tr_view(tr, a.a, c->d_ff, s->N);
  if (!rc) rc = icl_op_gelu(s->be, &vu, &va, err);
  if (!rc) rc = fwd_linear(s, L->down, L->down_b, a.a, c->d_ff, d, tmp, err);
  if (!rc) rc = fwd_add(s, mid, tmp, xout, d, err);
  return rc;
}

/* Final norm, classifier layers, logits. */
static int fwd_head(const tr_slice *s, const float *x, icl_error *err) {
  icl_trainer *tr = s->tr;
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  float *hf = tr->hf + s->n0 * d;
  int rc = fwd_norm(s, tr->onorm_w, tr->onorm_b, 2 * c->n_layer, x, hf, err);
  const float *h = hf;
  for (int i = 0; !rc && c->output == ICL_OUT_CLASSIFIER && i < c->cls_hidden; i++) {
    float *ch = tr->ch[i] + s->n0 * d;
    icl_dt vc = tr_view(tr, ch, d, s->N);
    rc = fwd_linear(s, tr->cls_w[i], tr->cls_b[i], h, d, d, ch, err);
    if (!rc) rc = icl_op_relu(s->be, &vc, &vc, err);
    h = ch;
  }
  if (!rc) rc = fwd_linear(s, tr->out_w, tr->out_b, h, d, tr_n_out(c), tr->logits + s->n0 * tr_n_out(c), err);
  return rc;
}

/* Embedding to logits for the slice's rows. */
static int fwd_slice(const tr_slice *s, icl_error *err) {
  icl_trainer *tr = s->tr;
  int64_t d = tr->cfg.d_model, N = tr->N;
  float *res = tr->res + s->n0 * d;
  int rc = fwd_embed(s, res, err);
  for (int l = 0; !rc && l < tr->cfg.n_layer; l++) rc = fwd_block(s, l, res + l * d * N, res + (l + 1) * d * N, err);
  if (!rc) rc = fwd_head(s, res + tr->cfg.n_layer * d * N, err);
  return rc;
}

int tr_forward_slices(icl_trainer *tr, int n, const int64_t *b, icl_error *err) {
  int rc = tr_run_slices(tr, "forward", 0, n, b, fwd_slice, err);
  int64_t nv = tr_n_out(&tr->cfg), N = tr->N;
  tr_views v = {.tr = tr};
  if (!rc)
    rc = icl_op_xent(tr->be, tr_v(&v, tr->logits, nv, N), tr_vi(&v, tr->targets, N), tr_v(&v, tr->mask, N, 1),
                     tr_v(&v, tr->probs, nv * N + N, 1), tr_v(&v, tr->dlogits, nv, N), &tr->loss, err);
  return rc;
}

int tr_forward(icl_trainer *tr, icl_error *err) {
  int64_t b[TR_MAX_SLICES + 1];
  return tr_forward_slices(tr, tr_default_slices(tr, b), b, err);
}
