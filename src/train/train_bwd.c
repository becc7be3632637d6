/* The trainer's backward pass: the forward of train_fwd.c in reverse, one explicit backward op
 * per forward op (train_ops.h). The residual gradient dres is one buffer updated in place from
 * the top block down; every parameter gradient is overwritten by this pass. */
#include <string.h>

#include "train_internal.h"

/* Gradient of y[R, N] = x[K, N] . W^T + b: dW, db and (when dx) dx += dy W. */
static int bwd_linear(icl_trainer *tr, int w, int b, const float *x, int64_t K, int64_t R, const float *dy,
                      float *dx, icl_error *err) {
  if (b >= 0) tr_sum_rows(tr->cb, dy, R, 1, tr->N, tr_g(tr, b));
  return tr_matmul_bwd(tr->cb, &tr->ws, tr_w(tr, w), K, R, x, tr->N, dy, tr_g(tr, w), dx, err);
}

/* dx += gradient of y = norm(x) with weight w, bias b. */
static void bwd_norm(icl_trainer *tr, int w, int b, const float *x, const float *dy, float *dx) {
  int64_t d = tr->cfg.d_model;
  float eps = tr->cfg.norm_eps;
  if (tr->cfg.norm == ICL_NORM_LAYER)
    tr_layer_norm_bwd(tr->cb, x, tr_w(tr, w), d, tr->N, eps, dy, dx, tr_g(tr, w), tr_g(tr, b), tr->stats);
  else if (tr->cfg.norm == ICL_NORM_RMS)
    tr_rms_norm_bwd(tr->cb, x, tr_w(tr, w), d, tr->N, eps, dy, dx, tr_g(tr, w), tr->stats);
  else tr_sum_rows(tr->cb, dy, d, tr->N, 1, dx);
}

static void zero(float *p, int64_t n) { memset(p, 0, (size_t)n * sizeof(float)); }

/* Output layer and classifier: dlogits -> gradient of the final norm output in *dhf. */
static int bwd_head(icl_trainer *tr, float **dhf, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  int nh = c->output == ICL_OUT_CLASSIFIER ? c->cls_hidden : 0;
  float *g = tr->dc0, *g2 = tr->dc1;
  zero(g, d * N);
  int rc = bwd_linear(tr, tr->out_w, tr->out_b, nh ? tr->ch[nh - 1] : tr->hf, d, tr_n_out(c), tr->dlogits, g, err);
  for (int i = nh - 1; !rc && i >= 0; i--) {
    tr_relu_bwd(tr->cb, tr->ch[i], g, d * N, g);
    zero(g2, d * N);
    rc = bwd_linear(tr, tr->cls_w[i], tr->cls_b[i], i > 0 ? tr->ch[i - 1] : tr->hf, d, d, g, g2, err);
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
  zero(tr->du, ff * N);
  int rc = bwd_linear(tr, L->down, L->down_b, a->a, ff, d, tr->dres, tr->du, err);
  if (rc) return rc;
  tr_gelu_bwd(tr->cb, a->u, tr->du, ff * N, tr->du);
  zero(tr->dh, d * N);
  if ((rc = bwd_linear(tr, L->up, L->up_b, a->h2, d, ff, tr->du, tr->dh, err))) return rc;
  bwd_norm(tr, L->ffn_norm_w, L->ffn_norm_b, a->mid, tr->dh, tr->dres);
  return ICL_OK;
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
    zero(tr->dz, qd * N);
    if ((rc = bwd_linear(tr, L->wo, L->bo, a->z, qd, d, tr->dres, tr->dz, err))) return rc;
    dz = tr->dz;
  }
  rc = tr_attention_bwd(tr->cb, a->q, a->ks, a->v, a->P, dz, tr->hd, c->n_head, tr->T, tr->B, tr_attn_scale(tr),
                        tr->dq, tr->dks, tr->dv, err);
  if (rc) return rc;
  const float *dk = tr->dks;
  if (L->smear >= 0) {
    tr_smear_bwd(tr->cb, a->k, tr_w(tr, L->smear), tr->hd, c->n_head, tr->T, tr->B, tr->dks, tr->dk, tr_g(tr, L->smear));
    dk = tr->dk;
  }
  if (c->position == ICL_POS_ROPE) { /* back through the rotation of q and k */
    float *dkw = L->smear >= 0 ? tr->dk : tr->dks;
    tr_rope_bwd(tr->cb, tr->dq, tr->hd, c->n_head, N, tr->pos_ids, tr->hd, c->rope_base);
    tr_rope_bwd(tr->cb, dkw, tr->hd, c->n_head, N, tr->pos_ids, tr->hd, c->rope_base);
  }
  zero(tr->dh, d * N);
  if (!rc) rc = bwd_linear(tr, L->wq, L->bq, a->h, d, qd, tr->dq, tr->dh, err);
  if (!rc) rc = bwd_linear(tr, L->wk, L->bk, a->h, d, qd, dk, tr->dh, err);
  if (!rc) rc = bwd_linear(tr, L->wv, L->bv, a->h, d, qd, tr->dv, tr->dh, err);
  if (!rc) bwd_norm(tr, L->norm_w, L->norm_b, xin, tr->dh, tr->dres);
  return rc;
}

/* Embedding, input projection and positions from d(x0) = dres. */
static int bwd_embed(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  if (tr->tok >= 0) tr_embed_bwd(tr->cb, tr->tokens, tr->dres, d, tr->N, tr_g(tr, tr->tok));
  if (tr->pos >= 0) tr_sum_rows(tr->cb, tr->dres, d, tr->T, tr->B, tr_g(tr, tr->pos));
  if (tr->inp_w >= 0) return bwd_linear(tr, tr->inp_w, tr->inp_b, tr->inputs, c->input_len, d, tr->dres, NULL, err);
  return ICL_OK;
}

int tr_backward(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, N = tr->N;
  zero(tr->g, tr->n_floats);
  float *dhf;
  int rc = bwd_head(tr, &dhf, err);
  if (rc) return rc;
  zero(tr->dres, d * N);
  bwd_norm(tr, tr->onorm_w, tr->onorm_b, tr->res + c->n_layer * d * N, dhf, tr->dres);
  for (int l = c->n_layer - 1; !rc && l >= 0; l--) {
    if (c->d_ff) rc = bwd_mlp(tr, l, err);
    if (!rc) rc = bwd_attention(tr, l, tr->res + l * d * N, err);
  }
  return rc ? rc : bwd_embed(tr, err);
}
