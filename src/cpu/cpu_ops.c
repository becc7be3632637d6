/* Norms, RoPE and elementwise ops of the CPU backend. Small tensors (decode) run on the calling
 * thread, since waking the pool costs more than the work; large ones split by rows or ranges. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* Elements per parallel work item: below this an op runs on the calling thread alone. */
#define GRAIN_ELEMS 16384

/* Parallel loop over n units of unit_elems elements each, in items of about GRAIN_ELEMS. */
static void run(cpu_backend *cb, int64_t n, int64_t unit_elems, cpu_range_fn fn, void *ctx) {
  int64_t grain = GRAIN_ELEMS / (unit_elems > 0 ? unit_elems : 1);
  cpu_pool_range(cb->pool, n, grain > 0 ? grain : 1, fn, ctx);
}

/* ---- norms -------------------------------------------------------------------------------- */

typedef struct norm_ctx {
  const cpu_kernels *k;
  const float *x, *w, *b;
  float *y;
  int64_t d, rows;
  float eps;
  float *stats; /* LayerNorm: [2, rows] mean and 1/sqrt(var + eps) when not NULL (the trainer's norm_fwd) */
} norm_ctx;

static void rms_norm_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  norm_ctx *c = arg;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = c->x + r * c->d;
    float *y = c->y + r * c->d;
    double ss = c->k->dot(x, x, c->d);
    float inv = (float)(1.0 / sqrt(ss / (double)c->d + (double)c->eps));
    c->k->scale_mul(x, inv, c->w, y, c->d);
  }
}

/* NT rows from r0 (NT a constant per call): each row's double sums in element order, as one row alone would; the
 * rows' chains interleave so the adds overlap (a row at a time waited on each add). */
static inline __attribute__((always_inline)) void layer_norm_tile(const norm_ctx *c, int64_t r0, const int NT) {
  const float *x[4];
  double mean[4], var[4];
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) x[i] = c->x + (r0 + i) * c->d, mean[i] = var[i] = 0.0;
  for (int64_t j = 0; j < c->d; j++)
    #pragma GCC unroll 4
    for (int i = 0; i < NT; i++) mean[i] += x[i][j];
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) mean[i] /= (double)c->d;
  for (int64_t j = 0; j < c->d; j++)
    #pragma GCC unroll 4
    for (int i = 0; i < NT; i++) var[i] += (x[i][j] - mean[i]) * (x[i][j] - mean[i]);
  #pragma GCC unroll 4
  for (int i = 0; i < NT; i++) {
    float inv = (float)(1.0 / sqrt(var[i] / (double)c->d + (double)c->eps)), m = (float)mean[i];
    float *y = c->y + (r0 + i) * c->d;
    if (c->stats) c->stats[2 * (r0 + i)] = m, c->stats[2 * (r0 + i) + 1] = inv;
    for (int64_t j = 0; j < c->d; j++)
      y[j] = (x[i][j] - m) * inv * (c->w ? c->w[j] : 1.0f) + (c->b ? c->b[j] : 0.0f);
  }
}

static void layer_norm_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const norm_ctx *c = arg;
  int64_t r = lo;
  if (c->k->layer_norm16 && c->d < ((int64_t)1 << 27))
    for (; r + 16 <= hi; r += 16)
      c->k->layer_norm16(c->x + r * c->d, c->d, c->w, c->b, c->d, c->eps, c->y + r * c->d,
                         c->stats ? c->stats + 2 * r : NULL);
  for (; r + 4 <= hi; r += 4) layer_norm_tile(c, r, 4);
  for (; r < hi; r++) layer_norm_tile(c, r, 1);
}

int cpu_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err) {
  (void)err;
  cpu_backend *cb = cpu_of(be);
  norm_ctx c = {&cb->k, cpu_f32(x), w ? cpu_f32(w) : NULL, NULL, cpu_f32(y), x->ne[0], icl_dt_nrows(x), eps, NULL};
  run(cb, c.rows, c.d, rms_norm_range, &c);
  return ICL_OK;
}

void cpu_layer_norm_rows(cpu_backend *cb, const float *x, const float *w, const float *b, int64_t d, int64_t n,
                         float eps, float *y, float *stats) {
  norm_ctx c = {&cb->k, x, w, b, y, d, n, eps, stats};
  run(cb, c.rows, c.d, layer_norm_range, &c);
}

int cpu_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y,
                   icl_error *err) {
  (void)err;
  cpu_layer_norm_rows(cpu_of(be), cpu_f32(x), w ? cpu_f32(w) : NULL, b ? cpu_f32(b) : NULL, x->ne[0],
                      icl_dt_nrows(x), eps, cpu_f32(y), NULL);
  return ICL_OK;
}

/* ---- rope --------------------------------------------------------------------------------- */

typedef struct rope_ctx {
  const cpu_kernels *k;
  float *x;
  int64_t hd, nh, n;
  int n_rot, mode;
  const int32_t *pos;
  const double *inv_freq; /* [n_rot/2] base^(-2i/n_rot), while a table is filled */
  const cpu_rope_tab *tab;
} rope_ctx;

/* Angles in double, as in the reference: positions reach thousands of radians, where float
 * argument reduction would lose digits. */
static void rope_angles(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const rope_ctx *c = arg;
  int half = c->n_rot / 2;
  for (int64_t t = lo; t < hi; t++)
    for (int i = 0; i < half; i++) {
      double th = (double)c->pos[t] * c->inv_freq[i];
      c->tab->cs[t * half + i] = (float)cos(th);
      c->tab->sn[t * half + i] = (float)sin(th);
    }
}

static void rope_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const rope_ctx *c = arg;
  int half = c->n_rot / 2;
  for (int64_t t = lo; t < hi; t++) {
    const float *cs = c->tab->cs + t * half, *sn = c->tab->sn + t * half;
    for (int64_t h = 0; h < c->nh; h++) {
      float *v = c->x + (t * c->nh + h) * c->hd;
      c->k->rope_head(v, cs, sn, half, c->mode == ICL_ROPE_NEOX);
    }
  }
}

/* The cos/sin table of c's positions: a kept one when the positions, n_rot and base match, else a new one in the
 * slot used least recently. NULL when out of memory. */
static const cpu_rope_tab *rope_table(cpu_backend *cb, rope_ctx *c, float base) {
  int half = c->n_rot / 2;
  for (int i = 0; i < CPU_ROPE_TABS; i++) {
    const cpu_rope_tab *t = &cb->rope[i];
    if (t->n && t->n_rot == c->n_rot && t->base == base && t->n == c->n &&
        !memcmp(t->pos, c->pos, (size_t)c->n * sizeof *c->pos))
      return t;
  }
  cpu_rope_tab *t = &cb->rope[cb->rope_next];
  cb->rope_next = (cb->rope_next + 1) % CPU_ROPE_TABS;
  t->n = 0;
  if (!(t->pos = cpu_scratch_get(&t->mem, (size_t)c->n * (sizeof(int32_t) + 2 * (size_t)half * sizeof(float)))))
    return NULL;
  double inv_freq[512]; /* n_rot <= 1024 checked by the caller */
  for (int i = 0; i < half; i++) inv_freq[i] = pow((double)base, -2.0 * i / (double)c->n_rot);
  c->inv_freq = inv_freq;
  t->cs = (float *)(t->pos + c->n);
  t->sn = t->cs + c->n * half;
  t->n_rot = c->n_rot;
  t->base = base;
  t->n = c->n;
  memcpy(t->pos, c->pos, (size_t)c->n * sizeof *c->pos);
  c->tab = t;
  run(cb, c->n, half, rope_angles, c);
  c->inv_freq = NULL; /* local to this call */
  return t;
}

int cpu_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  if (n_rot > 1024) return icl_error_set(err, ICL_EUNSUPPORTED, "cpu: rope: n_rot %d > 1024", n_rot);
  rope_ctx c = {.k = &cb->k, .x = cpu_f32(x), .hd = x->ne[0], .nh = x->ne[1], .n = x->ne[2] * x->ne[3], .n_rot = n_rot,
                .mode = mode, .pos = cpu_ptr(pos)};
  if (c.n == 0) return ICL_OK;
  if (!(c.tab = rope_table(cb, &c, base)))
    return icl_error_set(err, ICL_ENOMEM, "cpu: rope: cannot allocate the cos/sin table of %lld positions", (long long)c.n);
  run(cb, c.n, c.hd * c.nh, rope_range, &c);
  return ICL_OK;
}

/* ---- elementwise -------------------------------------------------------------------------- */

enum { EW_ADD, EW_MUL, EW_SCALE, EW_SILU, EW_GELU, EW_SWIGLU, EW_GEGLU, EW_RELU };

typedef struct ew_ctx {
  int op;
  const cpu_kernels *k;
  const float *a, *b;
  float *y;
  int64_t n, d, b_rows; /* binary ops: b is [d, b_rows] */
  float s;
} ew_ctx;

/* silu(x) = x * sigmoid(x) and gelu_tanh(x) = 0.5x(1 + tanh(u)) = x * sigmoid(2u) with
 * u = sqrt(2/pi)(x + 0.044715x^3): both are x / (1 + exp(-z)), which has no cancellation for
 * small z and whose exp runs vectorized in chunks. out may alias x; up may be NULL. */
static void sigmoid_gate(const cpu_kernels *k, int gelu, const float *x, const float *up, float *out, int64_t n) {
  if (k->gate) {
    k->gate(gelu, x, up, out, n);
    return;
  }
  enum { CH = 256 };
  float t[CH];
  for (int64_t i0 = 0; i0 < n; i0 += CH) {
    int64_t m = n - i0 < CH ? n - i0 : CH;
    const float *xs = x + i0;
    if (gelu)
      for (int64_t j = 0; j < m; j++) t[j] = -1.5957691216057308f * (xs[j] + 0.044715f * xs[j] * xs[j] * xs[j]);
    else
      for (int64_t j = 0; j < m; j++) t[j] = -xs[j];
    k->vexp(t, t, m);
    if (up)
      for (int64_t j = 0; j < m; j++) out[i0 + j] = xs[j] / (1.0f + t[j]) * up[i0 + j];
    else
      for (int64_t j = 0; j < m; j++) out[i0 + j] = xs[j] / (1.0f + t[j]);
  }
}

/* b broadcast over rows: element i of a pairs with b[i % d] when b has one row. */
static void ew_binary(const ew_ctx *c, int64_t lo, int64_t hi) {
  for (int64_t i = lo; i < hi;) {
    int64_t col = i % c->d, end = i - col + c->d < hi ? i - col + c->d : hi;
    const float *b = c->b + (c->b_rows == 1 ? 0 : i - col);
    c->k->add_mul(c->op == EW_MUL, c->a + i, b + col, c->y + i, end - i);
    i = end;
  }
}

static void ew_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  ew_ctx *c = arg;
  const float *a = c->a, *b = c->b;
  float *y = c->y;
  switch (c->op) {
  case EW_ADD: case EW_MUL: ew_binary(c, lo, hi); break;
  case EW_SCALE:
    c->k->scale_mul(a + lo, c->s, NULL, y + lo, hi - lo);
    break;
  case EW_SILU: sigmoid_gate(c->k, 0, a + lo, NULL, y + lo, hi - lo); break;
  case EW_GELU: sigmoid_gate(c->k, 1, a + lo, NULL, y + lo, hi - lo); break;
  case EW_SWIGLU: sigmoid_gate(c->k, 0, a + lo, b + lo, y + lo, hi - lo); break;
  case EW_GEGLU: sigmoid_gate(c->k, 1, a + lo, b + lo, y + lo, hi - lo); break;
  case EW_RELU: for (int64_t i = lo; i < hi; i++) y[i] = a[i] > 0.0f ? a[i] : 0.0f; break;
  }
}

static int ew(icl_backend *be, int op, const icl_dt *a, const icl_dt *b, float s, const icl_dt *y) {
  cpu_backend *cb = cpu_of(be);
  ew_ctx c = {op, &cb->k, cpu_f32(a), b ? cpu_f32(b) : NULL, cpu_f32(y), icl_dt_nelem(a), a->ne[0], b ? icl_dt_nrows(b) : 0, s};
  run(cb, c.n, 1, ew_range, &c);
  return ICL_OK;
}

int cpu_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_ADD, a, b, 0, y); }
int cpu_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_MUL, a, b, 0, y); }
int cpu_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_SCALE, x, NULL, s, y); }
int cpu_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_SILU, x, NULL, 0, y); }
int cpu_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_GELU, x, NULL, 0, y); }
int cpu_swiglu(icl_backend *be, const icl_dt *g, const icl_dt *u, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_SWIGLU, g, u, 0, y); }
int cpu_geglu(icl_backend *be, const icl_dt *g, const icl_dt *u, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_GEGLU, g, u, 0, y); }
int cpu_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) { (void)err; return ew(be, EW_RELU, x, NULL, 0, y); }

/* ---- softmax, argmax ---------------------------------------------------------------------- */

typedef struct rows_ctx {
  const cpu_kernels *k;
  const float *x;
  float *y;
  int32_t *idx;
  int64_t d, rows;
} rows_ctx;

static void softmax_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  rows_ctx *c = arg;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = c->x + r * c->d;
    float *y = c->y + r * c->d;
    float mx = -INFINITY;
    for (int64_t i = 0; i < c->d; i++) mx = x[i] > mx ? x[i] : mx; /* not fmaxf: a libm call */
    if (mx == -INFINITY) { /* every entry masked: zeros, as in the reference */
      memset(y, 0, (size_t)c->d * sizeof *y);
      continue;
    }
    if (y != x) memcpy(y, x, (size_t)c->d * sizeof *y);
    double sum = c->k->exp_sum(y, c->d, mx);
    c->k->scale_max(y, c->d, (float)(1.0 / sum));
  }
}

static void argmax_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  rows_ctx *c = arg;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = c->x + r * c->d;
    int64_t best = 0;
    for (int64_t i = 1; i < c->d; i++)
      if (x[i] > x[best]) best = i;
    c->idx[r] = (int32_t)best;
  }
}

int cpu_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)err;
  rows_ctx c = {&cpu_of(be)->k, cpu_f32(x), cpu_f32(y), NULL, x->ne[0], icl_dt_nrows(x)};
  run(cpu_of(be), c.rows, c.d, softmax_range, &c);
  return ICL_OK;
}

int cpu_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err) {
  (void)err;
  rows_ctx c = {&cpu_of(be)->k, cpu_f32(x), NULL, cpu_ptr(out), x->ne[0], icl_dt_nrows(x)};
  run(cpu_of(be), c.rows, c.d, argmax_range, &c);
  return ICL_OK;
}

typedef struct lse_ctx {
  const cpu_kernels *k;
  const float *x;
  const int32_t *ids;
  float *out;
  int64_t d, n_ids;
} lse_ctx;

/* Rows lo..hi: the row is copied to a scratch row so that the vector exp_sum (which writes) leaves x intact. */
static void lse_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  lse_ctx *c = arg;
  float *tmp = malloc((size_t)c->d * sizeof *tmp);
  for (int64_t r = lo; r < hi; r++) {
    const float *x = c->x + r * c->d;
    float *o = c->out + r * (c->n_ids + 1), mx = -INFINITY;
    for (int64_t i = 0; i < c->d; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0.0;
    if (mx > -INFINITY && tmp) memcpy(tmp, x, (size_t)c->d * sizeof *tmp);
    for (int64_t i = 0; mx > -INFINITY && tmp && i < c->d; i += 1024) /* float sums of 1024, double across */
      s += c->k->exp_sum(tmp + i, c->d - i < 1024 ? c->d - i : 1024, mx);
    for (int64_t i = 0; mx > -INFINITY && !tmp && i < c->d; i++) s += expf(x[i] - mx); /* no scratch memory */
    for (int64_t j = 0; j < c->n_ids; j++) o[j] = x[c->ids[j]];
    o[c->n_ids] = mx > -INFINITY ? (float)(mx + log(s)) : -INFINITY;
  }
  free(tmp);
}

int cpu_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  (void)err;
  lse_ctx c = {&cpu_of(be)->k, cpu_f32(x), cpu_ptr(ids), cpu_f32(out), x->ne[0], icl_dt_nelem(ids)};
  run(cpu_of(be), icl_dt_nrows(x), c.d, lse_range, &c);
  return ICL_OK;
}

/* ---- convert, copy, fill ------------------------------------------------------------------ */

int cpu_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  int64_t n = icl_dt_nelem(x);
  if (x->type == y->type) memmove(cpu_ptr(y), cpu_ptr(x), icl_type_row_bytes(x->type, n));
  else if (x->type == ICL_TYPE_F16 && y->type == ICL_TYPE_F32) cb->k.f16_to_f32(cpu_ptr(x), cpu_f32(y), n);
  else if (x->type == ICL_TYPE_F32 && y->type == ICL_TYPE_F16) {
    const float *src = cpu_f32(x);
    uint16_t *dst = cpu_ptr(y);
    for (int64_t i = 0; i < n; i++) dst[i] = icl_f32_to_f16(src[i]);
  } else
    return icl_error_set(err, ICL_EUNSUPPORTED, "cpu: convert %s -> %s (expected f32 <-> f16)",
                         icl_type_name(x->type), icl_type_name(y->type));
  return ICL_OK;
}

int cpu_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
               int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err) {
  (void)be; (void)err;
  const float *s = cpu_f32(src) + src_off;
  float *d = cpu_f32(dst) + dst_off;
  for (int64_t r = 0; r < rows; r++) memmove(d + r * dst_stride, s + r * src_stride, (size_t)cols * sizeof(float));
  return ICL_OK;
}

int cpu_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
               float value, icl_error *err) {
  (void)be; (void)err;
  float *d = cpu_f32(dst) + off;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) d[r * stride + c] = value;
  return ICL_OK;
}
