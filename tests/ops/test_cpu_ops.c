/* CPU backend vs the scalar reference, for every op, every weight type and the shape classes the
 * models use (one row, odd sizes, widths that are not multiples of 256, SmolLM2 and Gemma 3 shapes,
 * sequences of 1, 7, 512 and a cheap 1400). Each SIMD level the machine has runs the same cases.
 * Every output buffer has guard bytes on both sides (out-of-bounds writes) and is checked for
 * NaN/Inf. Tolerances are NMSE bounds stated per op with their reason. Build with -DPRINT_NMSE
 * to print every case's measured NMSE. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "ops.h"
#include "ref/ref.h"
#include "testutil.h"

/* Float ops accumulate in float where the reference uses double: relative error ~1e-7 per
 * element, so NMSE ~1e-13; 1e-10 leaves room yet catches any indexing or logic error. */
#define TOL_FLOAT 1e-10
/* The integer matmul path quantizes activations to 8 bits per 32-block (error ~1/254 of the
 * block maximum per element); measured NMSE is 1e-5..9e-5 on uniform inputs. */
#define TOL_Q8_ACT 2e-4

#define GUARD 256
#define GUARD_BYTE 0xA5

enum { MAX_BE = 3 };
static icl_backend *g_be[MAX_BE];
static int g_nbe;

/* ---- tensors with guard bytes ------------------------------------------------------------- */

typedef struct tt {
  icl_backend *be;
  icl_dt dt;
  size_t bytes;
} tt;

static size_t dt_bytes(uint32_t type, const int64_t ne[4]) {
  return icl_type_row_bytes(type, ne[0]) * (size_t)(ne[1] * ne[2] * ne[3]);
}

/* A view at offset GUARD inside a buffer with GUARD guard bytes after it; data may be NULL. */
static tt mk(icl_backend *be, uint32_t type, int64_t n0, int64_t n1, int64_t n2, const void *data) {
  tt t = {.be = be, .dt = {.type = type, .ne = {n0, n1, n2, 1}, .offset = GUARD}};
  t.bytes = dt_bytes(type, t.dt.ne);
  size_t total = t.bytes + 2 * GUARD;
  icl_error err;
  if (be->ops->buf_alloc(be, total, ICL_BUF_ACT, &t.dt.buf, &err)) {
    fprintf(stderr, "alloc: %s\n", err.msg);
    exit(1);
  }
  uint8_t *init = malloc(total);
  memset(init, GUARD_BYTE, total);
  if (data) memcpy(init + GUARD, data, t.bytes);
  be->ops->write(be, t.dt.buf, 0, init, total, &err);
  free(init);
  return t;
}

static void rm(tt *t) { t->be->ops->buf_free(t->be, t->dt.buf); }

/* Reads the view back into dst and checks both guard regions. */
static int rd(const tt *t, void *dst, const char *what) {
  size_t total = t->bytes + 2 * GUARD;
  uint8_t *all = malloc(total);
  icl_error err;
  t->be->ops->read(t->be, t->dt.buf, 0, all, total, &err);
  int ok = 1;
  for (size_t i = 0; i < GUARD; i++) ok &= all[i] == GUARD_BYTE && all[GUARD + t->bytes + i] == GUARD_BYTE;
  CHECKF(ok, "%s: write outside the output view (guard bytes changed)", what);
  memcpy(dst, all + GUARD, t->bytes);
  free(all);
  return ok;
}

static int all_finite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return 0;
  return 1;
}

/* Compares got with ref: finite, and NMSE within tol. */
static void cmp(const char *what, const float *ref, const float *got, int64_t n, double tol) {
  CHECKF(all_finite(got, n), "%s: NaN or Inf in the output", what);
  double e = icl_nmse(ref, got, n);
#ifdef PRINT_NMSE
  fprintf(stderr, "%-90s %.3g\n", what, e);
#endif
  CHECKF(e <= tol, "%s: nmse %.3g > %.3g", what, e, tol);
}

static float *rnd(int64_t n, uint64_t seed, float lo, float hi) {
  float *x = malloc((size_t)n * sizeof *x);
  t_rand_fill(x, n, seed, lo, hi);
  return x;
}

static const char *be_name(icl_backend *be) { return cpu_of(be)->k.name; }

/* ---- matmul and get_rows ------------------------------------------------------------------ */

/* Quantized weight types take the integer path (8-bit activations) for few tokens. */
static int has_int_path(uint32_t t) {
  return t != ICL_TYPE_F32 && t != ICL_TYPE_F16 && t != ICL_TYPE_BF16;
}

static void case_matmul(uint32_t type, int64_t K, int64_t rows, int64_t n, uint64_t seed) {
  size_t wb = icl_type_row_bytes(type, K) * (size_t)rows;
  uint8_t *w = malloc(wb);
  icl_ref_random_weights(type, w, K * rows, seed);
  float *x = rnd(K * n, seed + 1, -1.0f, 1.0f), *ref = malloc((size_t)(rows * n) * sizeof(float));
  float *got = malloc((size_t)(rows * n) * sizeof(float));
  icl_ref_matmul(type, w, K, rows, x, n, ref);
  for (int b = 0; b < 2 * g_nbe; b++) { /* each backend exact, then fast where fast takes another path */
    icl_backend *be = g_be[b % g_nbe];
    int fast = b >= g_nbe;
    if (fast && n >= cpu_of(be)->tile_min_tokens) continue;
    be->precision = fast ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
    double tol = fast && has_int_path(type) ? TOL_Q8_ACT : TOL_FLOAT;
    tt tw = mk(be, type, K, rows, 1, w), tx = mk(be, ICL_TYPE_F32, K, n, 1, x), ty = mk(be, ICL_TYPE_F32, rows, n, 1, NULL);
    icl_error err;
    int rc = icl_op_matmul(be, &tw.dt, &tx.dt, &ty.dt, &err);
    CHECKF(rc == ICL_OK, "matmul: %s", err.msg);
    char what[160];
    snprintf(what, sizeof what, "matmul %s%s %s [%lld x %lld] n=%lld", be_name(be), fast ? " fast" : "",
             icl_type_name(type), (long long)K, (long long)rows, (long long)n);
    if (rd(&ty, got, what)) cmp(what, ref, got, rows * n, tol);
    rm(&tw);
    rm(&tx);
    rm(&ty);
  }
  free(w);
  free(x);
  free(ref);
  free(got);
}

static void case_get_rows(uint32_t type, int64_t K, int64_t rows, int64_t n, uint64_t seed) {
  size_t wb = icl_type_row_bytes(type, K) * (size_t)rows;
  uint8_t *w = malloc(wb);
  icl_ref_random_weights(type, w, K * rows, seed);
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(t_rand_u64(&s) % (uint64_t)rows);
  ids[n - 1] = (int32_t)rows - 1; /* the last row, to catch off-by-one row strides */
  float *ref = malloc((size_t)(K * n) * sizeof(float)), *got = malloc((size_t)(K * n) * sizeof(float));
  icl_ref_get_rows(type, w, K, ids, n, ref);
  for (int b = 0; b < g_nbe; b++) {
    icl_backend *be = g_be[b];
    tt tw = mk(be, type, K, rows, 1, w), ti = mk(be, ICL_TYPE_I32, n, 1, 1, ids), to = mk(be, ICL_TYPE_F32, K, n, 1, NULL);
    icl_error err;
    CHECKF(icl_op_get_rows(be, &tw.dt, &ti.dt, &to.dt, &err) == ICL_OK, "get_rows: %s", err.msg);
    char what[128];
    snprintf(what, sizeof what, "get_rows %s %s K=%lld n=%lld", be_name(be), icl_type_name(type), (long long)K, (long long)n);
    /* the same dequantization as the reference: exact */
    if (rd(&to, got, what)) cmp(what, ref, got, K * n, 0.0);
    rm(&tw);
    rm(&ti);
    rm(&to);
  }
  free(w);
  free(ids);
  free(ref);
  free(got);
}

static void test_matmul_all_types(void) {
  for (uint32_t t = 0; t < ICL_TYPE_COUNT; t++) {
    if (!icl_type_is_weight(t)) continue;
    int64_t be = icl_type_block_elems(t);
    /* one row of output, odd row counts (partial 32-row tiles), token counts on both sides of
     * the integer/tile switch and not multiples of the kernels' token blocks */
    static const int64_t ns[] = {1, 3, 7, 13, 32, 37};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) case_matmul(t, 256, 33, ns[i], 100 + t * 10 + i);
    case_matmul(t, 256, 1, 5, 7);
    if (be == 32) { /* widths that are not multiples of 256 (SmolLM2 576, Gemma 3 640) */
      case_matmul(t, 576, 40, 2, 11);
      case_matmul(t, 640, 70, 9, 12);
    } else {
      case_matmul(t, 1536, 20, 2, 13);
      case_matmul(t, 512, 37, 11, 14);
    }
    case_get_rows(t, be == 32 ? 576 : 512, 50, 7, 21 + t);
    case_get_rows(t, 256, 3, 1, 22 + t);
  }
}

/* The shapes of the target models: SmolLM2 (d 576, ff 1536, kv 192, vocab 49152, Q4_1/Q8_0/Q5_x)
 * and Gemma 3 270M (d 640, ff 2048, Q8_0), for decode (1), a short prompt (7) and a chunk (512). */
static void test_matmul_model_shapes(void) {
  case_matmul(ICL_TYPE_Q4_1, 576, 1536, 1, 31);
  case_matmul(ICL_TYPE_Q4_1, 576, 1536, 7, 32);
  case_matmul(ICL_TYPE_Q4_1, 576, 1536, 512, 33);
  case_matmul(ICL_TYPE_Q5_0, 1536, 576, 512, 34);
  case_matmul(ICL_TYPE_Q8_0, 576, 192, 512, 35);
  case_matmul(ICL_TYPE_Q5_1, 576, 576, 7, 36);
  case_matmul(ICL_TYPE_Q8_0, 640, 2048, 1, 37);
  case_matmul(ICL_TYPE_Q8_0, 640, 2048, 64, 38);
  case_matmul(ICL_TYPE_F16, 2048, 640, 9, 39);
  case_matmul(ICL_TYPE_Q4_K, 1536, 576, 3, 40);
  case_matmul(ICL_TYPE_Q6_K, 1536, 576, 40, 41);
  case_matmul(ICL_TYPE_Q4_1, 576, 49152, 1, 42); /* tied LM head, decode */
  case_get_rows(ICL_TYPE_Q8_0, 640, 4096, 512, 43);
}

/* ---- norms, rope -------------------------------------------------------------------------- */

static void case_norm(int layer, int64_t d, int64_t rows, int with_w, int in_place, uint64_t seed) {
  int64_t n = d * rows;
  float *x = rnd(n, seed, -2.0f, 3.0f), *w = rnd(d, seed + 1, 0.5f, 1.5f), *b = rnd(d, seed + 2, -1.0f, 1.0f);
  float *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
  if (layer) icl_ref_layer_norm(x, with_w ? w : NULL, with_w ? b : NULL, d, rows, 1e-5f, ref);
  else icl_ref_rms_norm(x, with_w ? w : NULL, d, rows, 1e-6f, ref);
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt tx = mk(be, ICL_TYPE_F32, d, rows, 1, x), tw = mk(be, ICL_TYPE_F32, d, 1, 1, w), tb = mk(be, ICL_TYPE_F32, d, 1, 1, b);
    tt ty = in_place ? tx : mk(be, ICL_TYPE_F32, d, rows, 1, NULL);
    icl_error err;
    int rc = layer ? icl_op_layer_norm(be, &tx.dt, with_w ? &tw.dt : NULL, with_w ? &tb.dt : NULL, 1e-5f, &ty.dt, &err)
                   : icl_op_rms_norm(be, &tx.dt, with_w ? &tw.dt : NULL, 1e-6f, &ty.dt, &err);
    CHECKF(rc == ICL_OK, "norm: %s", err.msg);
    char what[128];
    snprintf(what, sizeof what, "%s %s d=%lld rows=%lld w=%d inplace=%d", layer ? "layer_norm" : "rms_norm",
             be_name(be), (long long)d, (long long)rows, with_w, in_place);
    if (rd(&ty, got, what)) cmp(what, ref, got, n, TOL_FLOAT);
    rm(&tx);
    rm(&tw);
    rm(&tb);
    if (!in_place) rm(&ty);
  }
  free(x);
  free(w);
  free(b);
  free(ref);
  free(got);
}

static void test_norms(void) {
  for (int layer = 0; layer < 2; layer++) {
    case_norm(layer, 576, 1, 1, 0, 50);
    case_norm(layer, 576, 7, 1, 1, 51);
    case_norm(layer, 576, 512, 1, 0, 52);
    case_norm(layer, 640, 9, 0, 0, 53);
    case_norm(layer, 256, 4 * 7, 1, 1, 54); /* Gemma's per-head q/k norm: rows of head_dim 256 */
    case_norm(layer, 97, 5, 1, 0, 55);     /* odd width */
  }
}

static void case_rope(int64_t hd, int64_t nh, int64_t n, int n_rot, float base, int mode, int32_t pos0, uint64_t seed) {
  int64_t ne = hd * nh * n;
  float *x = rnd(ne, seed, -1.0f, 1.0f), *ref = malloc((size_t)ne * sizeof *ref), *got = malloc((size_t)ne * sizeof *got);
  int32_t *pos = malloc((size_t)n * sizeof *pos);
  for (int64_t i = 0; i < n; i++) pos[i] = pos0 + (int32_t)i;
  memcpy(ref, x, (size_t)ne * sizeof *ref);
  icl_ref_rope(ref, hd, nh, n, pos, n_rot, base, mode);
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt tx = mk(be, ICL_TYPE_F32, hd, nh, n, x), tp = mk(be, ICL_TYPE_I32, n, 1, 1, pos);
    icl_error err;
    CHECKF(icl_op_rope(be, &tx.dt, &tp.dt, n_rot, base, mode, &err) == ICL_OK, "rope: %s", err.msg);
    char what[128];
    snprintf(what, sizeof what, "rope %s hd=%lld nh=%lld n=%lld n_rot=%d mode=%d pos0=%d", be_name(be), (long long)hd,
             (long long)nh, (long long)n, n_rot, mode, pos0);
    if (rd(&tx, got, what)) cmp(what, ref, got, ne, TOL_FLOAT);
    rm(&tx);
    rm(&tp);
  }
  free(x);
  free(ref);
  free(got);
  free(pos);
}

static void test_rope(void) {
  case_rope(64, 9, 1, 64, 10000.0f, ICL_ROPE_NORMAL, 0, 60);
  case_rope(64, 3, 7, 64, 100000.0f, ICL_ROPE_NORMAL, 5, 61);
  case_rope(64, 9, 512, 64, 10000.0f, ICL_ROPE_NORMAL, 0, 62);
  case_rope(256, 4, 7, 256, 1e6f, ICL_ROPE_NEOX, 1393, 63);
  case_rope(256, 1, 3, 256, 10000.0f, ICL_ROPE_NEOX, 100000, 64); /* large angles */
  case_rope(64, 2, 5, 32, 10000.0f, ICL_ROPE_NEOX, 3, 65);       /* partial rotation */
  case_rope(64, 2, 5, 32, 10000.0f, ICL_ROPE_NORMAL, 3, 66);
}

/* ---- attention ---------------------------------------------------------------------------- */

typedef struct attn_case {
  int64_t hd, nh, nkvh, nq, n_past;
  int window;
  float softcap;
  int with_mask, with_pattern;
} attn_case;

static void case_attention(const attn_case *a, uint64_t seed) {
  int64_t nkv = a->n_past + a->nq, nq_el = a->hd * a->nh * a->nq, nkv_el = a->hd * a->nkvh * nkv;
  int64_t np = nkv * a->nq * a->nh;
  float *q = rnd(nq_el, seed, -1.0f, 1.0f), *k = rnd(nkv_el, seed + 1, -1.0f, 1.0f), *v = rnd(nkv_el, seed + 2, -1.0f, 1.0f);
  float *mask = NULL;
  if (a->with_mask) { /* random additive scores with some edges knocked out */
    mask = rnd(np, seed + 3, -1.0f, 1.0f);
    for (int64_t i = 0; i < np; i += 7) mask[i] = -INFINITY;
  }
  icl_attn_params p = {.n_past = (int32_t)a->n_past, .scale = 1.0f / sqrtf((float)a->hd), .window = a->window,
                       .softcap = a->softcap};
  float *ref = malloc((size_t)nq_el * sizeof *ref), *got = malloc((size_t)nq_el * sizeof *got);
  float *pref = a->with_pattern ? malloc((size_t)np * sizeof *pref) : NULL;
  float *pgot = a->with_pattern ? malloc((size_t)np * sizeof *pgot) : NULL;
  icl_ref_attention(q, k, v, a->hd, a->nh, a->nkvh, a->nq, nkv, &p, mask, ref, pref);
  for (int b = 0; b < 2 * g_nbe; b++) { /* exact, then fast for few queries (the row-at-a-time path) */
    icl_backend *be = g_be[b % g_nbe];
    int fast = b >= g_nbe;
    if (fast && a->nq >= 4) continue;
    be->precision = fast ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
    tt tq = mk(be, ICL_TYPE_F32, a->hd, a->nh, a->nq, q), tk = mk(be, ICL_TYPE_F32, a->hd, a->nkvh, nkv, k);
    tt tv = mk(be, ICL_TYPE_F32, a->hd, a->nkvh, nkv, v), to = mk(be, ICL_TYPE_F32, a->hd, a->nh, a->nq, NULL);
    tt tm = mk(be, ICL_TYPE_F32, nkv, a->nq, a->nh, mask), tp = mk(be, ICL_TYPE_F32, nkv, a->nq, a->nh, NULL);
    icl_error err;
    int rc = icl_op_attention(be, &tq.dt, &tk.dt, &tv.dt, &p, mask ? &tm.dt : NULL, &to.dt,
                              a->with_pattern ? &tp.dt : NULL, &err);
    CHECKF(rc == ICL_OK, "attention: %s", err.msg);
    char what[192];
    snprintf(what, sizeof what, "attention %s%s hd=%lld nh=%lld nkvh=%lld nq=%lld past=%lld win=%d cap=%g mask=%d",
             be_name(be), fast ? " fast" : "", (long long)a->hd, (long long)a->nh, (long long)a->nkvh, (long long)a->nq,
             (long long)a->n_past, a->window, a->softcap, a->with_mask);
    if (rd(&to, got, what)) cmp(what, ref, got, nq_el, TOL_FLOAT);
    if (a->with_pattern && rd(&tp, pgot, what)) {
      cmp(what, pref, pgot, np, TOL_FLOAT);
      int zeros_ok = 1; /* masked entries exactly 0 */
      for (int64_t i = 0; i < np; i++) zeros_ok &= (pref[i] == 0.0f) == (pgot[i] == 0.0f);
      CHECKF(zeros_ok, "%s: pattern zeros differ from the reference", what);
    }
    rm(&tq);
    rm(&tk);
    rm(&tv);
    rm(&to);
    rm(&tm);
    rm(&tp);
  }
  free(q);
  free(k);
  free(v);
  free(mask);
  free(ref);
  free(got);
  free(pref);
  free(pgot);
}

static void test_attention(void) {
  static const attn_case cases[] = {
      {64, 9, 3, 1, 0, 0, 0, 0, 1},       /* first token */
      {64, 9, 3, 1, 100, 0, 0, 0, 1},     /* decode with a cache */
      {64, 9, 3, 3, 10, 0, 0, 1, 1},      /* a few queries (row path) with a mask */
      {256, 4, 1, 1, 700, 512, 0, 0, 1},  /* Gemma 3 decode on a sliding layer */
      {64, 9, 3, 7, 0, 0, 0, 0, 1},       /* short prompt */
      {64, 9, 3, 7, 20, 0, 0, 1, 1},      /* second chunk with an additive mask */
      {64, 9, 3, 512, 0, 0, 0, 0, 0},     /* SmolLM2 prefill chunk */
      {256, 4, 1, 7, 600, 512, 0, 0, 1},  /* Gemma 3 sliding layer past its window */
      {256, 4, 1, 40, 0, 16, 0, 1, 1},    /* small window and mask */
      {64, 4, 2, 5, 3, 0, 30.0f, 0, 1},   /* soft-capped scores */
      {64, 1, 1, 1400, 0, 0, 0, 0, 1},    /* a full 1400-token pattern, one head to stay cheap */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) case_attention(&cases[i], 70 + i);
}

/* ---- elementwise, softmax, convert, argmax, copy ------------------------------------------ */

enum { U_SCALE, U_SILU, U_GELU, U_RELU, B_ADD, B_MUL, G_SWIGLU, G_GEGLU };

static void case_ew(int op, int64_t d, int64_t rows, int64_t b_rows, int in_place, uint64_t seed) {
  int64_t n = d * rows;
  float *a = rnd(n, seed, -6.0f, 6.0f), *b = rnd(d * (op >= G_SWIGLU ? rows : b_rows), seed + 1, -2.0f, 2.0f);
  float *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
  static const char *names[] = {"scale", "silu", "gelu", "relu", "add", "mul", "swiglu", "geglu"};
  switch (op) {
  case U_SCALE: icl_ref_scale(a, 0.125f, n, ref); break;
  case U_SILU: icl_ref_silu(a, n, ref); break;
  case U_GELU: icl_ref_gelu(a, n, ref); break;
  case U_RELU: icl_ref_relu(a, n, ref); break;
  case B_ADD: icl_ref_add(a, b, d, rows, b_rows, ref); break;
  case B_MUL: icl_ref_mul(a, b, d, rows, b_rows, ref); break;
  case G_SWIGLU: icl_ref_swiglu(a, b, n, ref); break;
  default: icl_ref_geglu(a, b, n, ref); break;
  }
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt ta = mk(be, ICL_TYPE_F32, d, rows, 1, a), tb = mk(be, ICL_TYPE_F32, d, op >= G_SWIGLU ? rows : b_rows, 1, b);
    tt ty = in_place ? ta : mk(be, ICL_TYPE_F32, d, rows, 1, NULL);
    icl_error err;
    int rc;
    switch (op) {
    case U_SCALE: rc = icl_op_scale(be, &ta.dt, 0.125f, &ty.dt, &err); break;
    case U_SILU: rc = icl_op_silu(be, &ta.dt, &ty.dt, &err); break;
    case U_GELU: rc = icl_op_gelu(be, &ta.dt, &ty.dt, &err); break;
    case U_RELU: rc = icl_op_relu(be, &ta.dt, &ty.dt, &err); break;
    case B_ADD: rc = icl_op_add(be, &ta.dt, &tb.dt, &ty.dt, &err); break;
    case B_MUL: rc = icl_op_mul(be, &ta.dt, &tb.dt, &ty.dt, &err); break;
    case G_SWIGLU: rc = icl_op_swiglu(be, &ta.dt, &tb.dt, &ty.dt, &err); break;
    default: rc = icl_op_geglu(be, &ta.dt, &tb.dt, &ty.dt, &err); break;
    }
    CHECKF(rc == ICL_OK, "%s: %s", names[op], err.msg);
    char what[128];
    snprintf(what, sizeof what, "%s %s d=%lld rows=%lld b_rows=%lld inplace=%d", names[op], be_name(be), (long long)d,
             (long long)rows, (long long)b_rows, in_place);
    /* add, mul, scale and relu are the same single float operation as the reference: exact */
    int exact = op == U_SCALE || op == U_RELU || op == B_ADD || op == B_MUL;
    if (rd(&ty, got, what)) cmp(what, ref, got, n, exact ? 0.0 : TOL_FLOAT);
    rm(&ta);
    rm(&tb);
    if (!in_place) rm(&ty);
  }
  free(a);
  free(b);
  free(ref);
  free(got);
}

static void test_elementwise(void) {
  for (int op = U_SCALE; op <= G_GEGLU; op++) {
    case_ew(op, 97, 5, 1, 0, 80 + op);      /* odd width, broadcast b */
    case_ew(op, 576, 1, 1, 1, 90 + op);     /* one row, in place */
    case_ew(op, 1536, 512, 512, 0, 100 + op); /* prefill FFN size: threaded */
    case_ew(op, 640, 70, 70, 1, 110 + op);
  }
  case_ew(B_ADD, 576, 512, 1, 0, 120); /* bias-like broadcast over a threaded range */
}

/* Softmax with -inf entries and (when rows > 1) a fully masked row; argmax of the same rows
 * with a tie in row 0 (the first index must win). */
static void case_softmax(int64_t d, int64_t rows, uint64_t seed) {
  int64_t n = d * rows;
  float *x = rnd(n, seed, -20.0f, 20.0f), *ref = malloc((size_t)n * sizeof *ref), *got = malloc((size_t)n * sizeof *got);
  for (int64_t i = 3; i < n; i += 11) x[i] = -INFINITY;
  if (rows > 1)
    for (int64_t i = 0; i < d; i++) x[d + i] = -INFINITY;
  float *xa = malloc((size_t)n * sizeof *xa);
  memcpy(xa, x, (size_t)n * sizeof *xa);
  xa[1] = xa[d - 1] = 1000.0f;
  icl_ref_softmax(x, d, rows, ref);
  int32_t *am_ref = malloc((size_t)rows * sizeof *am_ref), *am_got = malloc((size_t)rows * sizeof *am_got);
  icl_ref_argmax(xa, d, rows, am_ref);
  CHECK(am_ref[0] == 1);
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt tx = mk(be, ICL_TYPE_F32, d, rows, 1, x), ty = mk(be, ICL_TYPE_F32, d, rows, 1, NULL);
    tt ta = mk(be, ICL_TYPE_F32, d, rows, 1, xa), ti = mk(be, ICL_TYPE_I32, rows, 1, 1, NULL);
    icl_error err;
    char what[96];
    CHECKF(icl_op_softmax(be, &tx.dt, &ty.dt, &err) == ICL_OK, "softmax: %s", err.msg);
    snprintf(what, sizeof what, "softmax %s d=%lld rows=%lld", be_name(be), (long long)d, (long long)rows);
    if (rd(&ty, got, what)) cmp(what, ref, got, n, TOL_FLOAT);
    CHECKF(icl_op_argmax(be, &ta.dt, &ti.dt, &err) == ICL_OK, "argmax: %s", err.msg);
    snprintf(what, sizeof what, "argmax %s d=%lld rows=%lld", be_name(be), (long long)d, (long long)rows);
    if (rd(&ti, am_got, what)) CHECKF(memcmp(am_ref, am_got, (size_t)rows * 4) == 0, "%s: differs", what);
    rm(&tx);
    rm(&ty);
    rm(&ta);
    rm(&ti);
  }
  free(x);
  free(xa);
  free(ref);
  free(got);
  free(am_ref);
  free(am_got);
}

static void test_softmax_argmax(void) {
  case_softmax(7, 1, 130);
  case_softmax(49152, 3, 131); /* vocabulary-sized rows */
  case_softmax(1400, 64, 132);
}

static void test_convert(void) {
  enum { N = 1001 };
  float *x = rnd(N, 140, -70000.0f, 70000.0f); /* includes values that overflow f16 to inf */
  for (int i = 0; i < 50; i++) x[i] *= 1e-9f; /* and subnormals */
  uint16_t h_ref[N], h_got[N];
  float f_ref[N], f_got[N];
  icl_ref_convert(ICL_TYPE_F32, x, ICL_TYPE_F16, h_ref, N);
  icl_ref_convert(ICL_TYPE_F16, h_ref, ICL_TYPE_F32, f_ref, N);
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt tx = mk(be, ICL_TYPE_F32, N, 1, 1, x), th = mk(be, ICL_TYPE_F16, N, 1, 1, NULL);
    tt tf = mk(be, ICL_TYPE_F32, N, 1, 1, NULL), tc = mk(be, ICL_TYPE_F32, N, 1, 1, NULL);
    icl_error err;
    CHECK(icl_op_convert(be, &tx.dt, &th.dt, &err) == ICL_OK);
    CHECK(icl_op_convert(be, &th.dt, &tf.dt, &err) == ICL_OK);
    CHECK(icl_op_convert(be, &tx.dt, &tc.dt, &err) == ICL_OK);
    if (rd(&th, h_got, "convert f32->f16")) CHECKF(memcmp(h_ref, h_got, sizeof h_ref) == 0, "convert f32->f16 %s", be_name(be));
    if (rd(&tf, f_got, "convert f16->f32")) CHECKF(memcmp(f_ref, f_got, sizeof f_ref) == 0, "convert f16->f32 %s", be_name(be));
    if (rd(&tc, f_got, "convert f32->f32")) CHECKF(memcmp(x, f_got, sizeof f_got) == 0, "convert copy %s", be_name(be));
    rm(&tx);
    rm(&th);
    rm(&tf);
    rm(&tc);
  }
  free(x);
}

static void test_copy_fill(void) {
  enum { R = 9, C = 64 * 9 };
  float *src = rnd(R * C, 150, -1.0f, 1.0f), want[R * C], got[R * C];
  for (int k = 0; k < g_nbe; k++) {
    icl_backend *be = g_be[k];
    tt ts = mk(be, ICL_TYPE_F32, C, R, 1, src), td = mk(be, ICL_TYPE_F32, C, R, 1, NULL);
    icl_error err;
    /* fill everything with 0, copy head 2 (64 columns) of rows 1..7 into columns 128.., then
     * broadcast source row 0 (stride 0) into the last row's first 64 columns */
    memset(want, 0, sizeof want);
    CHECK(icl_op_fill2d(be, &td.dt, 0, C, R, C, 0.0f, &err) == ICL_OK);
    CHECK(icl_op_copy2d(be, &ts.dt, C + 128, C, &td.dt, C + 128, C, 7, 64, &err) == ICL_OK);
    for (int r = 1; r < 8; r++) memcpy(want + r * C + 128, src + r * C + 128, 64 * sizeof(float));
    CHECK(icl_op_copy2d(be, &ts.dt, 0, 0, &td.dt, (R - 1) * C, C, 1, 64, &err) == ICL_OK);
    memcpy(want + (R - 1) * C, src, 64 * sizeof(float));
    CHECK(icl_op_fill2d(be, &td.dt, 3, C, 2, 5, -2.5f, &err) == ICL_OK); /* strided fill: head ablation */
    for (int r = 0; r < 2; r++)
      for (int c = 0; c < 5; c++) want[r * C + 3 + c] = -2.5f;
    if (rd(&td, got, "copy2d/fill2d")) CHECKF(memcmp(want, got, sizeof want) == 0, "copy2d/fill2d %s", be_name(be));
    rm(&ts);
    rm(&td);
  }
  free(src);
}

/* ---- the checking wrappers reject bad shapes with a message naming op and operand ---------- */

/* The message starts "op: operand" ("matmul: x: expected ne[0] = 576 ..."). */
static void expect_error(int rc, const icl_error *err, const char *op, const char *operand) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s: %s", op, operand);
  CHECKF(rc == ICL_EINVAL && strncmp(err->msg, prefix, strlen(prefix)) == 0, "want EINVAL '%s...', got %d '%s'", prefix,
         rc, err->msg);
}

static void test_shape_errors(void) {
  icl_backend *be = g_be[0];
  tt w = mk(be, ICL_TYPE_Q4_1, 576, 64, 1, NULL), x = mk(be, ICL_TYPE_F32, 640, 2, 1, NULL);
  tt y = mk(be, ICL_TYPE_F32, 64, 2, 1, NULL), y3 = mk(be, ICL_TYPE_F32, 64, 3, 1, NULL);
  tt x576 = mk(be, ICL_TYPE_F32, 576, 2, 1, NULL), i32 = mk(be, ICL_TYPE_I32, 2, 1, 1, NULL);
  tt q = mk(be, ICL_TYPE_F32, 64, 9, 2, NULL);
  icl_error err;
  expect_error(icl_op_matmul(be, &w.dt, &x.dt, &y.dt, &err), &err, "matmul", "x");
  CHECK(strstr(err.msg, "576") && strstr(err.msg, "640")); /* expected and actual */
  expect_error(icl_op_matmul(be, &w.dt, &x576.dt, &y3.dt, &err), &err, "matmul", "y");
  expect_error(icl_op_matmul(be, &w.dt, &x576.dt, &x576.dt, &err), &err, "matmul", "y"); /* 64 rows != 576 */
  expect_error(icl_op_rms_norm(be, &x.dt, &y.dt, 1e-5f, &x.dt, &err), &err, "rms_norm", "w");
  expect_error(icl_op_add(be, &x576.dt, &y.dt, &x576.dt, &err), &err, "add", "b");
  expect_error(icl_op_rope(be, &q.dt, &i32.dt, 7, 1e4f, ICL_ROPE_NORMAL, &err), &err, "rope", "n_rot");
  expect_error(icl_op_get_rows(be, &w.dt, &x.dt, &y.dt, &err), &err, "get_rows", "ids");
  expect_error(icl_op_copy2d(be, &y3.dt, 0, 64, &y.dt, 0, 64, 3, 64, &err), &err, "copy2d", "dst");
  expect_error(icl_op_rope(be, &q.dt, &y.dt, 64, 1e4f, ICL_ROPE_NORMAL, &err), &err, "rope", "pos");
  expect_error(icl_op_attention(be, &q.dt, &x576.dt, &x576.dt, &(icl_attn_params){.scale = 1.0f}, NULL, &q.dt, NULL, &err),
               &err, "attention", "k");
  icl_dt wk = w.dt;
  wk.type = ICL_TYPE_Q4_K; /* 576 columns are not a whole number of 256-blocks */
  expect_error(icl_op_matmul(be, &wk, &x576.dt, &y.dt, &err), &err, "matmul", "w");
  rm(&w);
  rm(&x);
  rm(&y);
  rm(&y3);
  rm(&x576);
  rm(&i32);
  rm(&q);
}

int main(void) {
  /* generic on one thread (the pool's inline path); the SIMD levels on 3 and 2 threads (3 on a
   * 2-core machine: more threads than cores, work claimed unevenly) */
  static const char *levels[] = {"generic", "avx2", "avx512"};
  static const int threads[] = {1, 3, 2};
  for (int i = 0; i < 3; i++) {
    setenv("ICL_CPU_SIMD", levels[i], 1);
    icl_error err;
    icl_backend *be;
    if (icl_cpu_backend_new(threads[i], &be, &err)) {
      fprintf(stderr, "cpu backend: %s\n", err.msg);
      return 1;
    }
    if (strcmp(cpu_of(be)->k.name, levels[i]) != 0) { /* this CPU lacks the level */
      be->ops->destroy(be);
      continue;
    }
    g_be[g_nbe++] = be;
    printf("testing level %s\n", levels[i]);
  }
  unsetenv("ICL_CPU_SIMD");
  test_matmul_all_types();
  test_matmul_model_shapes();
  test_norms();
  test_rope();
  test_attention();
  test_elementwise();
  test_softmax_argmax();
  test_convert();
  test_copy_fill();
  test_shape_errors();
  for (int i = 0; i < g_nbe; i++) g_be[i]->ops->destroy(g_be[i]);
  return t_done();
}
