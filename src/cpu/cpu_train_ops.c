/* Elementwise, norm, embedding and loss ops of the trainer on the CPU backend (train_ops.h).
 * Row-parallel where rows are independent; reductions over tokens (weight gradients) are
 * column-parallel and walk the tokens in order, so sums do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "cpu_train_ops.h"

/* Columns per range of the column-parallel reductions (a cache line or more). */
#define COL_GRAIN 16

/* Operands of the simple ops: inputs a, b, output y. */
typedef struct op_ctx {
  const float *a, *b;
  float *y;
  const int32_t *ids;
  int64_t d, n, T, B;
} op_ctx;

/* ---- embedding ------------------------------------------------------------------------------ */

static void embed_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const op_ctx *c = arg;
  for (int64_t i = lo; i < hi; i++) {
    if (c->ids[i] >= 0) memcpy(c->y + i * c->d, c->a + c->ids[i] * c->d, (size_t)c->d * sizeof(float));
    else memset(c->y + i * c->d, 0, (size_t)c->d * sizeof(float));
  }
}

void cpu_tr_embed_fwd(cpu_backend *cb, const float *E, int64_t d, const int32_t *ids, int64_t n, float *x) {
  op_ctx c = {.a = E, .y = x, .ids = ids, .d = d};
  cpu_pool_range(cb->pool, n, 256, embed_range, &c);
}

static void embed_bwd_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const op_ctx *c = arg;
  for (int64_t i = 0; i < c->n; i++) {
    if (c->ids[i] < 0) continue;
    float *dst = c->y + c->ids[i] * c->d;
    const float *src = c->a + i * c->d;
    for (int64_t j = lo; j < hi; j++) dst[j] += src[j];
  }
}

void cpu_tr_embed_bwd(cpu_backend *cb, const int32_t *ids, const float *dx, int64_t d, int64_t n, float *dE) {
  op_ctx c = {.a = dx, .y = dE, .ids = ids, .d = d, .n = n};
  cpu_pool_range(cb->pool, d, COL_GRAIN, embed_bwd_range, &c);
}

/* Columns [lo, hi) of the flattened [d*T] destination; sums over b in order. */
static void sum_rows_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const op_ctx *c = arg;
  int64_t w = c->d * c->T;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t j = lo; j < hi; j++) c->y[j] += c->a[b * w + j];
}

void cpu_tr_sum_rows(cpu_backend *cb, const float *src, int64_t d, int64_t T, int64_t B, float *dst) {
  op_ctx c = {.a = src, .y = dst, .d = d, .T = T, .B = B};
  cpu_pool_range(cb->pool, d * T, COL_GRAIN, sum_rows_range, &c);
}

/* ---- norms ------------------------------------------------------------------------------------ */

typedef struct norm_ctx {
  const cpu_kernels *k;
  const float *x, *w, *dy;
  float *dx, *dw, *db, *stats; /* stats [2, n]: mean (0 for rms), rstd */
  int64_t d, n;
  float eps;
  int rms, stats_in; /* stats_in: stats hold x's statistics already (read, not computed) */
} norm_ctx;

/* Pass 1's sums for NT rows x, g (NT a constant per call, so the loops unroll): m, r (mean, 0 for RMSNorm, and
 * 1/sqrt(var + eps), in double) and sg = sum g*w, sgx = sum g*w*xhat. Each row's sums run in element order, as one
 * row alone would; the NT rows' chains interleave so the double adds overlap instead of waiting on each other. */
static inline __attribute__((always_inline)) void norm_bwd_sums(const norm_ctx *c, const float *const *x,
                                                                const float *const *g, const int NT, float *m,
                                                                float *r, double *sg, double *sgx) {
  const int64_t d = c->d;
  double mean[4], v[4];
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) mean[i] = v[i] = sg[i] = sgx[i] = 0.0;
  if (!c->stats_in) { /* else m and r are given */
    if (!c->rms) {
      for (int64_t j = 0; j < d; j++)
        #pragma GCC unroll 4
        for (int i = 0; i < NT; i++) mean[i] += x[i][j];
      #pragma GCC unroll 4
      for (int i = 0; i < NT; i++) mean[i] /= (double)d;
    }
    for (int64_t j = 0; j < d; j++)
      #pragma GCC unroll 4
      for (int i = 0; i < NT; i++) v[i] += (x[i][j] - mean[i]) * (x[i][j] - mean[i]);
    #pragma GCC unroll 4
    for (int i = 0; i < NT; i++) m[i] = (float)mean[i], r[i] = (float)(1.0 / sqrt(v[i] / (double)d + c->eps));
  }
  if (!c->dx) return;
  for (int64_t j = 0; j < d; j++) {
    float w = c->w ? c->w[j] : 1.0f;
    #pragma GCC unroll 4
    for (int i = 0; i < NT; i++) {
      float gh = g[i][j] * w;
      sg[i] += gh;
      sgx[i] += gh * (x[i][j] - m[i]) * r[i];
    }
  }
}

/* Pass 1 for NT rows from t0: the stats and dx += r * (g*w - a - xhat * b), where a = mean(g*w) for LayerNorm (0
 * for RMSNorm) and b = mean(g*w*xhat). */
static inline __attribute__((always_inline)) void norm_bwd_tile(const norm_ctx *c, int64_t t0, const int NT) {
  const int64_t d = c->d;
  const float *x[4], *g[4];
  double sg[4], sgx[4];
  float m[4], r[4];
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) x[i] = c->x + (t0 + i) * d, g[i] = c->dy + (t0 + i) * d;
  for (int i = 0; c->stats_in && i < NT; i++) m[i] = c->stats[2 * (t0 + i)], r[i] = c->stats[2 * (t0 + i) + 1];
  norm_bwd_sums(c, x, g, NT, m, r, sg, sgx);
  for (int i = 0; !c->stats_in && i < NT; i++) c->stats[2 * (t0 + i)] = m[i], c->stats[2 * (t0 + i) + 1] = r[i];
  if (!c->dx) return;
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) {
    float a = c->rms ? 0.0f : (float)(sg[i] / (double)d), b = (float)(sgx[i] / (double)d);
    float *dx = c->dx + (t0 + i) * d;
    for (int64_t j = 0; j < d; j++) dx[j] += r[i] * (g[i][j] * (c->w ? c->w[j] : 1.0f) - a - (x[i][j] - m[i]) * r[i] * b);
  }
}

/* Pass 1, rows [lo, hi): sixteen at a time on the level's kernel (the same bits), then four at a time. */
static void norm_bwd_rows(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const norm_ctx *c = arg;
  int64_t t = lo;
  if (c->k->norm_bwd16 && c->d < ((int64_t)1 << 27))
    for (; t + 16 <= hi; t += 16)
      c->k->norm_bwd16(c->x + t * c->d, c->dy + t * c->d, c->d, c->w, c->d, c->rms, c->eps, c->stats + 2 * t,
                       c->stats_in, c->dx ? c->dx + t * c->d : NULL);
  for (; t + 4 <= hi; t += 4) norm_bwd_tile(c, t, 4);
  for (; t < hi; t++) norm_bwd_tile(c, t, 1);
}

/* Pass 2, columns [lo, hi): dw += sum_t dy * xhat, db += sum_t dy, tokens in order (each column's own sum, so
 * the column loop vectorizes with the same bits). */
static void norm_bwd_cols(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const norm_ctx *c = arg;
  float *restrict dw = c->dw, *restrict db = c->db;
  if (c->k->norm_cols) {
    c->k->norm_cols(c->x, c->dy, c->stats, c->n, c->d, lo, hi, dw, db);
    return;
  }
  for (int64_t t = 0; t < c->n; t++) {
    const float *restrict x = c->x + t * c->d, *restrict g = c->dy + t * c->d;
    float m = c->stats[2 * t], r = c->stats[2 * t + 1];
    if (dw)
      for (int64_t j = lo; j < hi; j++) dw[j] += g[j] * (x[j] - m) * r;
    if (db)
      for (int64_t j = lo; j < hi; j++) db[j] += g[j];
  }
}

static void norm_bwd(cpu_backend *cb, norm_ctx *c) {
  if (c->dx || !c->stats_in) cpu_pool_range(cb->pool, c->n, 16, norm_bwd_rows, c); /* else nothing to do per row */
  if (c->dw || c->db) cpu_pool_range(cb->pool, c->d, COL_GRAIN, norm_bwd_cols, c);
}

void cpu_tr_layer_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                           const float *dy, float *dx, float *dw, float *db, float *stats, int stats_in) {
  norm_ctx c = {.k = &cb->k, .x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = db, .stats = stats, .d = d, .n = n,
                .eps = eps, .stats_in = stats_in};
  norm_bwd(cb, &c);
}

void cpu_tr_rms_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                         const float *dy, float *dx, float *dw, float *stats, int stats_in) {
  norm_ctx c = {.k = &cb->k, .x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .stats = stats, .d = d, .n = n,
                .eps = eps, .rms = 1, .stats_in = stats_in};
  norm_bwd(cb, &c);
}

/* ---- activations ------------------------------------------------------------------------------ */

static void gelu_bwd_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const op_ctx *c = arg;
  const float K = 0.7978845608028654f; /* sqrt(2/pi) */
  for (int64_t i = lo; i < hi; i++) {
    float x = c->a[i], th = tanhf(K * (x + 0.044715f * x * x * x));
    float du = K * (1.0f + 3.0f * 0.044715f * x * x);
    c->y[i] = c->b[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
  }
}

void cpu_tr_gelu_bwd(cpu_backend *cb, const float *x, const float *dy, int64_t n, float *dx) {
  op_ctx c = {.a = x, .b = dy, .y = dx};
  cpu_pool_range(cb->pool, n, 1 << 13, gelu_bwd_range, &c);
}

static void relu_bwd_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const op_ctx *c = arg;
  for (int64_t i = lo; i < hi; i++) c->y[i] = c->a[i] > 0.0f ? c->b[i] : 0.0f;
}

void cpu_tr_relu_bwd(cpu_backend *cb, const float *y, const float *dy, int64_t n, float *dx) {
  op_ctx c = {.a = y, .b = dy, .y = dx};
  cpu_pool_range(cb->pool, n, 1 << 14, relu_bwd_range, &c);
}

/* ---- softmax cross-entropy ---------------------------------------------------------------------- */

typedef struct xent_ctx {
  const cpu_kernels *k;
  const float *logits, *weights;
  const int32_t *targets;
  float *probs, *lse, *dlogits;
  int64_t nv;
  double wsum;
} xent_ctx;

/* Rows [lo, hi): probabilities with the backend's softmax kernels, log-sum-exp, gradient. */
static void xent_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const xent_ctx *c = arg;
  for (int64_t i = lo; i < hi; i++) {
    float *p = c->probs + i * c->nv;
    memcpy(p, c->logits + i * c->nv, (size_t)c->nv * sizeof(float));
    float mx = c->k->scale_max(p, c->nv, 1.0f);
    double sum = c->k->exp_sum(p, c->nv, mx);
    c->k->scale_max(p, c->nv, (float)(1.0 / sum));
    c->lse[i] = mx + (float)log(sum);
    if (!c->dlogits) continue;
    float *g = c->dlogits + i * c->nv;
    int32_t t = c->targets[i];
    float w = t < 0 ? 0.0f : (float)((c->weights ? c->weights[i] : 1.0f) / c->wsum);
    for (int64_t j = 0; j < c->nv; j++) g[j] = w * (p[j] - (j == t ? 1.0f : 0.0f));
  }
}

double cpu_tr_xent(cpu_backend *cb, const float *logits, int64_t nv, int64_t n, const int32_t *targets,
               const float *weights, float *probs, float *dlogits) {
  xent_ctx c = {.k = &cb->k, .logits = logits, .weights = weights, .targets = targets, .probs = probs,
                .lse = probs + nv * n, .dlogits = dlogits, .nv = nv};
  for (int64_t i = 0; i < n; i++)
    if (targets[i] >= 0) c.wsum += weights ? weights[i] : 1.0f;
  if (c.wsum <= 0.0) c.wsum = 1.0; /* nothing scored: zero loss and gradient */
  cpu_pool_range(cb->pool, n, 8, xent_range, &c);
  double loss = 0.0;
  for (int64_t i = 0; i < n; i++)
    if (targets[i] >= 0)
      loss += (weights ? weights[i] : 1.0f) / c.wsum * ((double)c.lse[i] - logits[i * nv + targets[i]]);
  return loss;
}

/* ---- optimizer ------------------------------------------------------------------------------- */

typedef struct upd_ctx {
  const cpu_kernels *k;
  float *w, *g, *m1, *m2;
  icl_optim_args a;
} upd_ctx;

/* Elements [lo, hi) on the level's kernel, else this loop (IEEE per element, so the same bits), the constants in
 * locals and the pointers restrict so that it may vectorize. */
static void upd_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const upd_ctx *c = arg;
  if (c->k->optim_upd) {
    c->k->optim_upd(c->w, c->g, c->m1, c->m2, lo, hi, &c->a);
    return;
  }
  float *restrict w = c->w, *restrict m1 = c->m1, *restrict m2 = c->m2;
  const float *restrict gr = c->g;
  const float gs = c->a.gscale, b1 = c->a.b1, b2 = c->a.b2, c1 = c->a.c1, c2 = c->a.c2, eps = c->a.eps;
  const float lr = c->a.lr, wd = c->a.wd, mom = c->a.mom;
  if (c->a.adam) {
    for (int64_t i = lo; i < hi; i++) {
      float g = gr[i] * gs;
      m1[i] = b1 * m1[i] + (1.0f - b1) * g;
      m2[i] = b2 * m2[i] + (1.0f - b2) * g * g;
      w[i] -= lr * ((m1[i] / c1) / (sqrtf(m2[i] / c2) + eps) + wd * w[i]);
    }
  } else {
    for (int64_t i = lo; i < hi; i++) {
      m1[i] = mom * m1[i] + gr[i] * gs;
      w[i] -= lr * (m1[i] + wd * w[i]);
    }
  }
}

void cpu_tr_optim_update(cpu_backend *cb, float *w, float *g, float *m1, float *m2, int64_t n, const icl_optim_args *a) {
  upd_ctx c = {&cb->k, w, g, m1, m2, *a};
  cpu_pool_range(cb->pool, n, 1 << 12, upd_range, &c);
}
