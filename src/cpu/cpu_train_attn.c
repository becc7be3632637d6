/* Attention and smeared-key ops of the trainer (train_ops.h). The attention forward is the
 * backend's own causal attention with its pattern output; the backward below starts from that
 * saved pattern, one item per (sequence, head), its products on the backend's strided gemm. */
#include <math.h>
#include <string.h>

#include "cpu_train_ops.h"

typedef struct attb_ctx {
  cpu_backend *cb;
  const float *q, *k, *v, *P, *dz;
  float *dq, *dk, *dv;
  int64_t hd, nh, T, B;
  float scale;
} attb_ctx;

/* Rows of token t of item (b, h) in a [hd, nh, T, B] tensor. */
static int64_t row_of(const attb_ctx *c, int64_t b, int64_t h, int64_t t) { return ((b * c->T + t) * c->nh + h) * c->hd; }

/* Scratch floats per thread: dS [T][T] and the gemm's work space. */
static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }
static int64_t attb_scratch(const cpu_kernels *k, int64_t hd, int64_t T) {
  return up16(T * T) + cpu_gemm_ws(k, T > hd ? T : hd, T > hd ? T : hd);
}

/* y[t*ldy + j] = sum over c < K of A(j, c) B(t, c) on the calling thread (cpu_gemm_serial). */
static void gemm(const cpu_kernels *k, cpu_mat a, cpu_mat b, int64_t R, int64_t n, int64_t K, float *y, int64_t ldy,
                 float *ws, int causal) {
  cpu_gemm_args g = {.a = a, .b = b, .R = R, .n = n, .K = K, .y = y, .ldy = ldy, .causal = causal};
  cpu_gemm_serial(k, &g, ws);
}

/* pdp[r] = sum over j <= i0 + r of P[i0+r][j] dP[i0+r][j] in double, j in order, for the nr <= 4 rows from i0: the
 * rows' chains interleave over their common keys (j <= i0), then each row finishes its own, so every sum is the
 * one a row alone gives but the adds overlap (one row at a time waited on each add). */
static void row_dots(const float *P, const float *dP, int64_t T, int64_t i0, int nr, double *pdp) {
  const float *p[4], *d[4];
  for (int r = 0; r < 4; r++) {
    int rr = r < nr ? r : 0;
    p[r] = P + (i0 + rr) * T, d[r] = dP + (i0 + rr) * T, pdp[r] = 0.0;
  }
  for (int64_t j = 0; j <= i0; j++) {
    pdp[0] += (double)p[0][j] * d[0][j];
    pdp[1] += (double)p[1][j] * d[1][j];
    pdp[2] += (double)p[2][j] * d[2][j];
    pdp[3] += (double)p[3][j] * d[3][j];
  }
  for (int r = 1; r < nr; r++)
    for (int64_t j = i0 + 1; j <= i0 + r; j++) pdp[r] += (double)p[r][j] * d[r][j];
}

/* Item (b, h) as four small matrix products on the gemm kernel, operands read in place (the causal zeros of P
 * make the full products exact): dP = dz v^T; dS = P (dP - rowsum(P dP)) scale; dq = dS k; dk = dS^T q;
 * dv = P^T dz. Each item writes only its own rows of dq, dk, dv. */
static void attb_item(void *arg, int64_t it, int ith) {
  const attb_ctx *c = arg;
  const cpu_kernels *K = &c->cb->k;
  int64_t b = it / c->nh, h = it % c->nh, T = c->T, hd = c->hd, ld = c->nh * hd, o = row_of(c, b, h, 0);
  const float *P = c->P + (b * c->nh + h) * T * T;
  float *dS = c->cb->scratch[ith].p, *ws = dS + up16(T * T); /* 64-byte aligned parts */
  /* few keys (the meta-learning model's 9): the level's kernels, the same chains without the gemm's 32-row tiles,
   * packing and per-call set-up around products of 9 x 9 */
  int small = K->attb_dp16 && K->attb_grads16 && cpu_few_keys(T, hd);
  if (small && b + 1 < c->B) /* the next sequence's rows, whose first reads otherwise wait on L3 row by row */
    for (int64_t t = 0; t < T; t++)
      for (int64_t e = 0; e < hd; e += 16) {
        int64_t r = row_of(c, b + 1, h, t) + e;
        __builtin_prefetch(c->q + r), __builtin_prefetch(c->k + r), __builtin_prefetch(c->v + r);
        __builtin_prefetch(c->dz + r);
      }
  /* the causal zeros of P and dS are left out of the products (cpu_gemm_args.causal: the same bits), and dP past
   * the diagonal, which nothing reads, is not computed */
  if (small) K->attb_dp16(c->v + o, c->dz + o, ld, hd, T, dS);
  else gemm(K, (cpu_mat){c->v + o, ld, 1}, (cpu_mat){c->dz + o, ld, 1}, T, T, hd, dS, T, ws, CPU_GEMM_Y_LOWER); /* dP */
  const int64_t step = K->row_dots8 ? 8 : 4; /* rows whose sums run together */
  for (int64_t i0 = 0; i0 < T; i0 += step) {
    double pdp[8];
    int nr = T - i0 < step ? (int)(T - i0) : (int)step;
    if (K->row_dots8) K->row_dots8(P, dS, T, i0, nr, pdp);
    else row_dots(P, dS, T, i0, nr, pdp);
    for (int64_t i = i0; i < i0 + step && i < T; i++) { /* dS = P (dP - rowsum) scale, zero past the diagonal */
      float *restrict row = dS + i * T;
      const float *restrict p = P + i * T;
      const float sum = (float)pdp[i - i0], scale = c->scale;
      for (int64_t j = 0; j <= i; j++) row[j] = p[j] * (row[j] - sum) * scale;
      memset(row + i + 1, 0, (size_t)(T - i - 1) * sizeof(float));
    }
  }
  /* dq_i = sum_j dS_ij k_j, dk_j = sum_i dS_ij q_i, dv_j = sum_i P_ij dz_i */
  if (small) {
    K->attb_grads16(c->q + o, c->k + o, c->dz + o, P, dS, ld, hd, T, K->gemm_nt, c->dq + o, c->dk + o, c->dv + o);
    return;
  }
  gemm(K, (cpu_mat){c->k + o, 1, ld}, (cpu_mat){dS, T, 1}, hd, T, T, c->dq + o, ld, ws, CPU_GEMM_B_LOWER);
  gemm(K, (cpu_mat){c->q + o, 1, ld}, (cpu_mat){dS, 1, T}, hd, T, T, c->dk + o, ld, ws, CPU_GEMM_B_UPPER);
  gemm(K, (cpu_mat){c->dz + o, 1, ld}, (cpu_mat){P, 1, T}, hd, T, T, c->dv + o, ld, ws, CPU_GEMM_B_UPPER);
}

int cpu_tr_attention_bwd(cpu_backend *cb, const float *q, const float *k, const float *v, const float *P,
                     const float *dz, int64_t hd, int64_t nh, int64_t T, int64_t B, float scale, float *dq,
                     float *dk, float *dv, icl_error *err) {
  size_t need = (size_t)attb_scratch(&cb->k, hd, T) * sizeof(float);
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], need))
      return icl_error_set(err, ICL_ENOMEM, "train: attention backward: no %zu bytes of scratch for %lld keys", need,
                           (long long)T);
  attb_ctx c = {cb, q, k, v, P, dz, dq, dk, dv, hd, nh, T, B, scale};
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

void cpu_tr_smear_fwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
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

void cpu_tr_smear_bwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, const float *dks, float *dk, float *dalpha) {
  smear_ctx c = {.k = k, .alpha = alpha, .dks = dks, .dk = dk, .dalpha = dalpha, .hd = hd, .nh = nh, .T = T, .B = B};
  if (dk) cpu_pool_for(cb->pool, B, smear_bwd_item, &c);
  if (dalpha) cpu_pool_for(cb->pool, nh, smear_alpha_item, &c);
}

/* ---- rope ------------------------------------------------------------------------------------------- */

typedef struct rope_ctx {
  float *x;
  const int32_t *pos;
  int64_t hd, nh;
  int n_rot;
  float base;
} rope_ctx;

/* Tokens [lo, hi): each NEOX pair rotated by -angle (angles in double, as the reference forward). */
static void rope_bwd_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const rope_ctx *c = arg;
  int half = c->n_rot / 2;
  for (int64_t t = lo; t < hi; t++)
    for (int i = 0; i < half; i++) {
      double th = -(double)c->pos[t] * pow((double)c->base, -2.0 * i / (double)c->n_rot);
      float cs = (float)cos(th), sn = (float)sin(th);
      for (int64_t h = 0; h < c->nh; h++) {
        float *v = c->x + (t * c->nh + h) * c->hd, x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs - x1 * sn;
        v[i + half] = x0 * sn + x1 * cs;
      }
    }
}

void cpu_tr_rope_bwd(cpu_backend *cb, float *x, int64_t hd, int64_t nh, int64_t n, const int32_t *pos, int n_rot,
                 float base) {
  rope_ctx c = {x, pos, hd, nh, n_rot, base};
  cpu_pool_range(cb->pool, n, 16, rope_bwd_range, &c);
}
