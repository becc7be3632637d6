/* Attention and smeared-key ops of the trainer (train_ops.h). The attention forward is the
 * backend's own causal attention with its pattern output; the backward below starts from that
 * saved pattern, one item per (sequence, head), each writing only its own rows of dq, dk, dv. */
#include <math.h>
#include <string.h>

#include "train/train_ops.h"

typedef struct attb_ctx {
  cpu_backend *cb;
  const float *q, *k, *v, *P, *dz;
  float *dq, *dk, *dv;
  int64_t hd, nh, T;
  float scale;
} attb_ctx;

/* Rows of token t of item (b, h) in a [hd, nh, T, B] tensor. */
static int64_t row_of(const attb_ctx *c, int64_t b, int64_t h, int64_t t) { return ((b * c->T + t) * c->nh + h) * c->hd; }

/* Zeroes the item's rows of dq, dk, dv. */
static void attb_zero(const attb_ctx *c, int64_t b, int64_t h) {
  for (int64_t t = 0; t < c->T; t++) {
    int64_t o = row_of(c, b, h, t);
    memset(c->dq + o, 0, (size_t)c->hd * sizeof(float));
    memset(c->dk + o, 0, (size_t)c->hd * sizeof(float));
    memset(c->dv + o, 0, (size_t)c->hd * sizeof(float));
  }
}

/* Item (b, h): for each query i, dp_j = dz_i . v_j, ds_j = p_j (dp_j - sum p dp) * scale, then
 * dq_i += ds_j k_j, dk_j += ds_j q_i, dv_j += p_j dz_i over the visible keys j <= i. */
static void attb_item(void *arg, int64_t it, int ith) {
  const attb_ctx *c = arg;
  const cpu_kernels *K = &c->cb->k;
  int64_t b = it / c->nh, h = it % c->nh;
  float *dp = c->cb->scratch[ith].p;
  attb_zero(c, b, h);
  for (int64_t i = 0; i < c->T; i++) {
    const float *p = c->P + ((b * c->nh + h) * c->T + i) * c->T;
    int64_t oi = row_of(c, b, h, i);
    double pdp = 0.0;
    for (int64_t j = 0; j <= i; j++) {
      dp[j] = K->dot(c->dz + oi, c->v + row_of(c, b, h, j), c->hd);
      pdp += (double)p[j] * dp[j];
    }
    for (int64_t j = 0; j <= i; j++) {
      int64_t oj = row_of(c, b, h, j);
      float ds = p[j] * (dp[j] - (float)pdp) * c->scale;
      if (p[j] != 0.0f) K->axpy(c->dv + oj, p[j], c->dz + oi, c->hd);
      if (ds == 0.0f) continue;
      K->axpy(c->dq + oi, ds, c->k + oj, c->hd);
      K->axpy(c->dk + oj, ds, c->q + oi, c->hd);
    }
  }
}

int tr_attention_bwd(cpu_backend *cb, const float *q, const float *k, const float *v, const float *P,
                     const float *dz, int64_t hd, int64_t nh, int64_t T, int64_t B, float scale, float *dq,
                     float *dk, float *dv, icl_error *err) {
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], (size_t)T * sizeof(float)))
      return icl_error_set(err, ICL_ENOMEM, "train: attention backward: no scratch for %lld keys", (long long)T);
  attb_ctx c = {cb, q, k, v, P, dz, dq, dk, dv, hd, nh, T, scale};
  cpu_pool_for(cb->pool, B * nh, attb_item, &c);
  return ICL_OK;
}

/* ---- smeared key ---------------------------------------------------------------------------------- */

typedef struct smear_ctx {
  const float *k, *alpha, *dks;
  float *ks, *dk, *dalpha;
  int64_t hd, nh, T, B;
} smear_ctx;

static float sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }

/* Item = sequence b: ks_t = s k_t + (1 - s) k_{t-1} per head. */
static void smear_item(void *arg, int64_t b, int ith) {
  (void)ith;
  const smear_ctx *c = arg;
  int64_t w = c->nh * c->hd;
  for (int64_t t = 0; t < c->T; t++)
    for (int64_t h = 0; h < c->nh; h++) {
      int64_t o = (b * c->T + t) * w + h * c->hd;
      float s = sigmoidf(c->alpha[h]);
      for (int64_t e = 0; e < c->hd; e++) c->ks[o + e] = t > 0 ? s * c->k[o + e] + (1.0f - s) * c->k[o - w + e] : c->k[o + e];
    }
}

void tr_smear_fwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, float *ks) {
  smear_ctx c = {.k = k, .alpha = alpha, .ks = ks, .hd = hd, .nh = nh, .T = T};
  cpu_pool_for(cb->pool, B, smear_item, &c);
}

/* dk_t = s_t dks_t + (1 - s_{t+1}) dks_{t+1} (s_0 = 1, nothing past the end). */
static void smear_bwd_item(void *arg, int64_t b, int ith) {
  (void)ith;
  const smear_ctx *c = arg;
  int64_t w = c->nh * c->hd;
  for (int64_t t = 0; t < c->T; t++)
    for (int64_t h = 0; h < c->nh; h++) {
      int64_t o = (b * c->T + t) * w + h * c->hd;
      float s = sigmoidf(c->alpha[h]), s0 = t > 0 ? s : 1.0f;
      for (int64_t e = 0; e < c->hd; e++)
        c->dk[o + e] = s0 * c->dks[o + e] + (t + 1 < c->T ? (1.0f - s) * c->dks[o + w + e] : 0.0f);
    }
}

/* Item = head h: dalpha_h += s (1 - s) sum over b, t >= 1 of dks_t . (k_t - k_{t-1}), in order. */
static void smear_alpha_item(void *arg, int64_t h, int ith) {
  (void)ith;
  const smear_ctx *c = arg;
  int64_t w = c->nh * c->hd;
  double acc = 0.0;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t t = 1; t < c->T; t++) {
      int64_t o = (b * c->T + t) * w + h * c->hd;
      for (int64_t e = 0; e < c->hd; e++) acc += (double)c->dks[o + e] * (c->k[o + e] - c->k[o - w + e]);
    }
  float s = sigmoidf(c->alpha[h]);
  c->dalpha[h] += (float)(s * (1.0f - s) * acc);
}

void tr_smear_bwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, const float *dks, float *dk, float *dalpha) {
  smear_ctx c = {.k = k, .alpha = alpha, .dks = dks, .dk = dk, .dalpha = dalpha, .hd = hd, .nh = nh, .T = T, .B = B};
  if (dk) cpu_pool_for(cb->pool, B, smear_bwd_item, &c);
  if (dalpha) cpu_pool_for(cb->pool, nh, smear_alpha_item, &c);
}
