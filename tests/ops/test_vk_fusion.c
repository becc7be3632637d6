/* The Vulkan backend's fused ops against the unfused sequence they replace, bit for bit, on both kernel families (the
 * GPU-shaped kernels and the CPU-device ones, ICL_VK_SHAPE): matmul_group on one token (the grouped mat-vec: each
 * output equals its weight's lone matmul) with 3 and 2 members of one type or of a pair of types with a grouped
 * variant, and the fallbacks (other mixes, several tokens); matmul_add (y += x . w^T) against matmul into a temporary
 * then add, on one token and several; rope_pair against rope of q then of k; matmul_glu (gate, up and the activation,
 * of one type or two) against the lone matmuls then swiglu / geglu; the folded norms (rms_matmul_group, rms_matmul_glu:
 * rms_norm into h then the lone matmuls and the activation) and rms_norm_add (rms_norm in place then add) and
 * rms_rope_pair (rms_norm of q and of k, then rope_pair); the post-norm add folded before those norms
 * (add_rms_matmul_group, add_rms_matmul_glu: rms_norm_add, then the folded norm's unfused sequence), counting that
 * the fused ones are one dispatch.
 * test_backend_ops checks the same ops against the float64 oracle; this test checks that fusing changes no bit. */
#include <stdlib.h>
#include <string.h>

#include "icl/devices.h"
#include "ops.h"
#include "ref.h"
#include "testutil.h"

static icl_backend *be;

static icl_dt tensor(uint32_t type, int64_t n0, int64_t n1, const void *host) {
  icl_dt t = {.type = type, .ne = {n0, n1, 1, 1}};
  size_t bytes = icl_type_row_bytes(type, n0) * (size_t)n1;
  icl_error err;
  CHECKF(be->ops->buf_alloc(be, bytes, ICL_BUF_WEIGHT, &t.buf, &err) == ICL_OK, "alloc: %s", err.msg);
  if (host) CHECKF(be->ops->write(be, t.buf, 0, host, bytes, &err) == ICL_OK, "write: %s", err.msg);
  return t;
}

static icl_dt weights(uint32_t type, int64_t K, int64_t rows, uint64_t seed) {
  void *h = malloc(icl_type_row_bytes(type, K) * (size_t)rows);
  if (type == ICL_TYPE_F32) t_rand_fill(h, K * rows, seed, -1.0f, 1.0f);
  else icl_ref_random_weights(type, h, K * rows, seed);
  icl_dt t = tensor(type, K, rows, h);
  free(h);
  return t;
}

static float *download(const icl_dt *t) {
  size_t bytes = (size_t)icl_dt_nelem(t) * 4;
  float *h = malloc(bytes);
  icl_error err;
  CHECKF(be->ops->read(be, t->buf, 0, h, bytes, &err) == ICL_OK, "read: %s", err.msg);
  return h;
}

static int same_bits(const icl_dt *a, const icl_dt *b) {
  float *x = download(a), *y = download(b);
  int same = memcmp(x, y, (size_t)icl_dt_nelem(a) * 4) == 0;
  free(x), free(y);
  return same;
}

static uint64_t dispatches(void);

/* matmul_group of count weights (types ts, rows rs) on n tokens against each weight's lone matmul; `fused`: one
 * dispatch expected (one token, one type or a pair with a grouped variant). */
static void check_group(int count, const uint32_t ts[3], int64_t K, const int64_t rs[3], int64_t n, int fused) {
  if (K % icl_type_block_elems(ts[0]) || K % icl_type_block_elems(ts[count - 1])) return;
  float *xh = malloc((size_t)(K * n) * sizeof(float));
  t_rand_fill(xh, K * n, 5, -2.0f, 2.0f);
  icl_dt x = tensor(ICL_TYPE_F32, K, n, xh), w[3], y[3], y1[3];
  for (int i = 0; i < count; i++) {
    w[i] = weights(ts[i], K, rs[i], 17 + (uint64_t)i);
    y[i] = tensor(ICL_TYPE_F32, rs[i], n, NULL), y1[i] = tensor(ICL_TYPE_F32, rs[i], n, NULL);
  }
  icl_error err;
  uint64_t d0 = dispatches();
  CHECKF(icl_op_matmul_group(be, count, w, &x, y, &err) == ICL_OK, "matmul_group: %s", err.msg);
  uint64_t used = dispatches() - d0;
  CHECKF(fused ? used == 1 : used > 1, "group of %d (%s, %s, %s) n=%lld: %llu dispatches, expected %s", count,
         icl_type_name(ts[0]), icl_type_name(ts[1]), icl_type_name(ts[count - 1]), (long long)n,
         (unsigned long long)used, fused ? "1" : "the matmuls in turn");
  for (int i = 0; i < count; i++) {
    CHECKF(icl_op_matmul(be, &w[i], &x, &y1[i], &err) == ICL_OK, "matmul: %s", err.msg);
    CHECKF(same_bits(&y[i], &y1[i]), "group of %d (%s, %s) K=%lld n=%lld: output %d differs from its lone matmul",
           count, icl_type_name(ts[0]), icl_type_name(ts[count - 1]), (long long)K, (long long)n, i);
    be->ops->buf_free(be, w[i].buf), be->ops->buf_free(be, y[i].buf), be->ops->buf_free(be, y1[i].buf);
  }
  be->ops->buf_free(be, x.buf);
  free(xh);
}

/* matmul_add against matmul into t then add(y, t). */
static void check_add(uint32_t type, int64_t K, int64_t rows, int64_t n) {
  if (K % icl_type_block_elems(type)) return;
  float *xh = malloc((size_t)(K * n) * sizeof(float)), *yh = malloc((size_t)(rows * n) * sizeof(float));
  t_rand_fill(xh, K * n, 9, -2.0f, 2.0f);
  t_rand_fill(yh, rows * n, 10, -4.0f, 4.0f);
  icl_dt w = weights(type, K, rows, 21), x = tensor(ICL_TYPE_F32, K, n, xh);
  icl_dt y = tensor(ICL_TYPE_F32, rows, n, yh), y1 = tensor(ICL_TYPE_F32, rows, n, yh);
  icl_dt t = tensor(ICL_TYPE_F32, rows, n, NULL);
  icl_error err;
  CHECKF(be->ops->matmul_add, "the Vulkan backend has no matmul_add");
  CHECKF(icl_op_matmul_add(be, &w, &x, &t, &y, &err) == ICL_OK, "matmul_add: %s", err.msg);
  CHECKF(icl_op_matmul(be, &w, &x, &t, &err) == ICL_OK, "matmul: %s", err.msg);
  CHECKF(icl_op_add(be, &y1, &t, &y1, &err) == ICL_OK, "add: %s", err.msg);
  CHECKF(same_bits(&y, &y1), "matmul_add %s K=%lld rows=%lld n=%lld differs from matmul then add",
         icl_type_name(type), (long long)K, (long long)rows, (long long)n);
  be->ops->buf_free(be, w.buf), be->ops->buf_free(be, x.buf), be->ops->buf_free(be, y.buf);
  be->ops->buf_free(be, y1.buf), be->ops->buf_free(be, t.buf);
  free(xh), free(yh);
}

/* rope_pair against rope of q then rope of k (SmolLM2's 9 and 3 heads, Gemma 3's 4 and 1, partial rotation). */
static void check_rope_pair(int64_t hd, int64_t nh, int64_t nk, int64_t n, int n_rot, int mode, int32_t pos0) {
  float *qh = malloc((size_t)(hd * nh * n) * 4), *kh = malloc((size_t)(hd * nk * n) * 4);
  int32_t *ph = malloc((size_t)n * 4);
  t_rand_fill(qh, hd * nh * n, 3, -1.0f, 1.0f);
  t_rand_fill(kh, hd * nk * n, 4, -1.0f, 1.0f);
  for (int64_t i = 0; i < n; i++) ph[i] = pos0 + (int32_t)i;
  icl_dt q = tensor(ICL_TYPE_F32, hd, nh * n, qh), k = tensor(ICL_TYPE_F32, hd, nk * n, kh);
  icl_dt q1 = tensor(ICL_TYPE_F32, hd, nh * n, qh), k1 = tensor(ICL_TYPE_F32, hd, nk * n, kh);
  icl_dt pos = tensor(ICL_TYPE_I32, n, 1, ph);
  q.ne[1] = q1.ne[1] = nh, q.ne[2] = q1.ne[2] = n, k.ne[1] = k1.ne[1] = nk, k.ne[2] = k1.ne[2] = n;
  icl_error err;
  CHECKF(be->ops->rope_pair, "the Vulkan backend has no rope_pair");
  CHECKF(icl_op_rope_pair(be, &q, &k, &pos, n_rot, 1e4f, mode, &err) == ICL_OK, "rope_pair: %s", err.msg);
  CHECKF(icl_op_rope(be, &q1, &pos, n_rot, 1e4f, mode, &err) == ICL_OK, "rope: %s", err.msg);
  CHECKF(icl_op_rope(be, &k1, &pos, n_rot, 1e4f, mode, &err) == ICL_OK, "rope: %s", err.msg);
  CHECKF(same_bits(&q, &q1) && same_bits(&k, &k1), "rope_pair hd=%lld heads %lld+%lld n=%lld n_rot=%d mode %d "
         "differs from two ropes", (long long)hd, (long long)nh, (long long)nk, (long long)n, n_rot, mode);
  be->ops->buf_free(be, q.buf), be->ops->buf_free(be, k.buf), be->ops->buf_free(be, q1.buf);
  be->ops->buf_free(be, k1.buf), be->ops->buf_free(be, pos.buf);
  free(qh), free(kh), free(ph);
}

/* matmul_glu (gate of `type`, up of `up_type`) against the lone matmuls into (y, u) then swiglu / geglu, on one token
 * (fused) and several (fallback). */
static void check_glu(uint32_t type, uint32_t up_type, int64_t K, int64_t rows, int64_t n, int act) {
  if (K % icl_type_block_elems(type) || K % icl_type_block_elems(up_type)) return;
  float *xh = malloc((size_t)(K * n) * sizeof(float));
  t_rand_fill(xh, K * n, 12, -2.0f, 2.0f);
  icl_dt w[2] = {weights(type, K, rows, 31), weights(up_type, K, rows, 32)}, x = tensor(ICL_TYPE_F32, K, n, xh);
  icl_dt y = tensor(ICL_TYPE_F32, rows, n, NULL), u = tensor(ICL_TYPE_F32, rows, n, NULL);
  icl_dt y1[2] = {tensor(ICL_TYPE_F32, rows, n, NULL), tensor(ICL_TYPE_F32, rows, n, NULL)};
  icl_error err;
  CHECKF(be->ops->matmul_glu, "the Vulkan backend has no matmul_glu");
  CHECKF(icl_op_matmul_glu(be, &w[0], &w[1], &x, &y, &u, act, &err) == ICL_OK, "matmul_glu: %s", err.msg);
  for (int i = 0; i < 2; i++) /* the lone matmuls: the grouped ones are under test too */
    CHECKF(icl_op_matmul(be, &w[i], &x, &y1[i], &err) == ICL_OK, "matmul: %s", err.msg);
  CHECKF((act == ICL_GLU_GELU ? icl_op_geglu : icl_op_swiglu)(be, &y1[0], &y1[1], &y1[0], &err) == ICL_OK, "glu: %s",
         err.msg);
  CHECKF(same_bits(&y, &y1[0]), "matmul_glu %s/%s K=%lld rows=%lld n=%lld act %d differs from matmuls then glu",
         icl_type_name(type), icl_type_name(up_type), (long long)K, (long long)rows, (long long)n, act);
  for (int i = 0; i < 2; i++) be->ops->buf_free(be, w[i].buf), be->ops->buf_free(be, y1[i].buf);
  be->ops->buf_free(be, x.buf), be->ops->buf_free(be, y.buf), be->ops->buf_free(be, u.buf);
  free(xh);
}


static uint64_t dispatches(void) {
  icl_be_counts k = {0};
  be->ops->counts(be, &k);
  return k.dispatches;
}

/* A view of n floats at word offset `shift` of a fresh buffer (the uniform-buffer loads' unaligned word shift). */
static icl_dt shifted(int64_t n, int shift, uint64_t seed, float lo, float hi) {
  float *h = malloc((size_t)(n + shift) * 4);
  t_rand_fill(h, n + shift, seed, lo, hi);
  icl_dt t = tensor(ICL_TYPE_F32, n + shift, 1, h);
  t.offset = (size_t)shift * 4, t.ne[0] = n;
  free(h);
  return t;
}

/* The fold tests' consumers: weights of types ts (K wide; rs[i] rows each, or rs[0] for both GLU members) seeded
 * from seed, with the fused outputs y and the reference outputs y1. */
static void fold_members(int count, const uint32_t ts[3], int64_t K, const int64_t rs[3], int64_t n, int glu,
                         uint64_t seed, icl_dt w[3], icl_dt y[3], icl_dt y1[3]) {
  for (int i = 0; i < count; i++) {
    int64_t rows = rs[glu >= 0 ? 0 : i];
    w[i] = weights(ts[i], K, rows, seed + (uint64_t)i);
    y[i] = tensor(ICL_TYPE_F32, rows, n, NULL), y1[i] = tensor(ICL_TYPE_F32, rows, n, NULL);
  }
}

/* The unfused consumer of the normed h1: the lone matmuls into y1 (the grouped ones are under test too), then
 * swiglu / geglu into y1[0] for a GLU. */
static void fold_reference(int count, int glu, const icl_dt w[3], const icl_dt *h1, icl_dt y1[3]) {
  icl_error err;
  for (int i = 0; i < count; i++)
    CHECKF(icl_op_matmul(be, &w[i], h1, &y1[i], &err) == ICL_OK, "matmul: %s", err.msg);
  if (glu >= 0)
    CHECKF((glu == ICL_GLU_GELU ? icl_op_geglu : icl_op_swiglu)(be, &y1[0], &y1[1], &y1[0], &err) == ICL_OK,
           "glu: %s", err.msg);
}

static void free_members(int count, icl_dt w[3], icl_dt y[3], icl_dt y1[3]) {
  for (int i = 0; i < count; i++)
    be->ops->buf_free(be, w[i].buf), be->ops->buf_free(be, y[i].buf), be->ops->buf_free(be, y1[i].buf);
}

/* rms_matmul_group (glu < 0) or rms_matmul_glu (act glu) of weights of types ts, x of K at word shift xs, the norm
 * weight at shift ws, against rms_norm into h then the lone matmuls (and swiglu / geglu); one dispatch when n = 1. */
static void check_rms_fold_mix(int count, const uint32_t ts[3], int64_t K, const int64_t rs[3], int64_t n, int glu,
                               int xs, int ws) {
  uint32_t type = ts[0];
  for (int i = 0; i < count; i++)
    if (K % icl_type_block_elems(ts[i])) return;
  icl_dt x = shifted(K * n, xs, 41, -3.0f, 3.0f), nw = shifted(K, ws, 42, 0.5f, 1.5f);
  x.ne[0] = K, x.ne[1] = n;
  icl_dt h = tensor(ICL_TYPE_F32, K, n, NULL), h1 = tensor(ICL_TYPE_F32, K, n, NULL), w[3], y[3], y1[3];
  fold_members(count, ts, K, rs, n, glu, 43, w, y, y1);
  icl_error err;
  float eps = 1e-5f;
  uint64_t d0 = dispatches();
  if (glu < 0) {
    CHECKF(be->ops->rms_matmul_group, "the Vulkan backend has no rms_matmul_group");
    CHECKF(icl_op_rms_matmul_group(be, &x, &nw, eps, &h, count, w, y, &err) == ICL_OK, "rms_matmul_group: %s",
           err.msg);
  } else {
    CHECKF(be->ops->rms_matmul_glu, "the Vulkan backend has no rms_matmul_glu");
    CHECKF(icl_op_rms_matmul_glu(be, &x, &nw, eps, &h, &w[0], &w[1], &y[0], &y[1], glu, &err) == ICL_OK,
           "rms_matmul_glu: %s", err.msg);
  }
  uint64_t used = dispatches() - d0;
  if (n == 1) CHECKF(used == 1, "rms fold %s K=%lld: %llu dispatches, expected 1", icl_type_name(type), (long long)K,
                     (unsigned long long)used);
  CHECKF(icl_op_rms_norm(be, &x, &nw, eps, &h1, &err) == ICL_OK, "rms_norm: %s", err.msg);
  fold_reference(count, glu, w, &h1, y1);
  for (int i = 0; i < (glu < 0 ? count : 1); i++)
    CHECKF(same_bits(&y[i], &y1[i]), "rms fold (count %d, glu %d) %s K=%lld n=%lld x+%d nw+%d: output %d differs "
           "from rms_norm then the lone matmuls", count, glu, icl_type_name(type), (long long)K, (long long)n, xs, ws,
           i);
  free_members(count, w, y, y1);
  be->ops->buf_free(be, x.buf), be->ops->buf_free(be, nw.buf), be->ops->buf_free(be, h.buf);
  be->ops->buf_free(be, h1.buf);
}

static void check_rms_fold(int count, uint32_t type, int64_t K, const int64_t rs[3], int64_t n, int glu, int xs,
                           int ws) {
  check_rms_fold_mix(count, (uint32_t[3]){type, type, type}, K, rs, n, glu, xs, ws);
}

/* rms_norm_add (y += rms_norm(x, w)) against rms_norm in place then add, one dispatch. */
static void check_rms_add(int64_t d, int64_t rows) {
  float *xh = malloc((size_t)(d * rows) * 4), *yh = malloc((size_t)(d * rows) * 4), *wh = malloc((size_t)d * 4);
  t_rand_fill(xh, d * rows, 51, -3.0f, 3.0f);
  t_rand_fill(yh, d * rows, 52, -8.0f, 8.0f);
  t_rand_fill(wh, d, 53, 0.5f, 1.5f);
  icl_dt x = tensor(ICL_TYPE_F32, d, rows, xh), x1 = tensor(ICL_TYPE_F32, d, rows, xh);
  icl_dt y = tensor(ICL_TYPE_F32, d, rows, yh), y1 = tensor(ICL_TYPE_F32, d, rows, yh);
  icl_dt w = tensor(ICL_TYPE_F32, d, 1, wh);
  w.ne[0] = d, w.ne[1] = 1;
  icl_error err;
  CHECKF(be->ops->rms_norm_add, "the Vulkan backend has no rms_norm_add");
  uint64_t d0 = dispatches();
  CHECKF(icl_op_rms_norm_add(be, &x, &w, 1e-6f, &y, &err) == ICL_OK, "rms_norm_add: %s", err.msg);
  CHECKF(dispatches() - d0 == 1, "rms_norm_add: not one dispatch");
  CHECKF(icl_op_rms_norm(be, &x1, &w, 1e-6f, &x1, &err) == ICL_OK, "rms_norm: %s", err.msg);
  CHECKF(icl_op_add(be, &y1, &x1, &y1, &err) == ICL_OK, "add: %s", err.msg);
  CHECKF(same_bits(&y, &y1), "rms_norm_add d=%lld rows=%lld differs from rms_norm then add", (long long)d,
         (long long)rows);
  be->ops->buf_free(be, x.buf), be->ops->buf_free(be, x1.buf), be->ops->buf_free(be, y.buf);
  be->ops->buf_free(be, y1.buf), be->ops->buf_free(be, w.buf);
  free(xh), free(yh), free(wh);
}

/* add_rms_matmul_group (glu < 0) or add_rms_matmul_glu (act glu): t = x + rms_norm(o, pw) then the folded norm of t
 * (weight nw) and the weights of types ts, against the unfused sequence the forward pass runs otherwise: rms_norm_add
 * into a copy of x, then rms_norm into h and the lone matmuls (and swiglu / geglu). x, o, pw and t at word shift s
 * (the uniform-buffer loads' unaligned shifts), nw at ws; one dispatch when n = 1. t and every output bit for bit. */
static void check_post_fold(int count, const uint32_t ts[3], int64_t K, const int64_t rs[3], int64_t n, int glu,
                            int sh, int ws) {
  for (int i = 0; i < count; i++)
    if (K % icl_type_block_elems(ts[i])) return;
  icl_dt x = shifted(K * n, sh, 71, -3.0f, 3.0f), o = shifted(K * n, sh, 72, -9.0f, 9.0f);
  icl_dt o1 = shifted(K * n, sh, 72, -9.0f, 9.0f), t1 = shifted(K * n, sh, 71, -3.0f, 3.0f); /* copies of o, x */
  icl_dt pw = shifted(K, sh, 73, 0.5f, 1.5f), nw = shifted(K, ws, 74, 0.5f, 1.5f), t = shifted(K * n, sh, 75, 0, 1);
  x.ne[0] = o.ne[0] = o1.ne[0] = t1.ne[0] = t.ne[0] = K, x.ne[1] = o.ne[1] = o1.ne[1] = t1.ne[1] = t.ne[1] = n;
  icl_dt h = tensor(ICL_TYPE_F32, K, n, NULL), h1 = tensor(ICL_TYPE_F32, K, n, NULL), w[3], y[3], y1[3];
  fold_members(count, ts, K, rs, n, glu, 76, w, y, y1);
  icl_error err;
  float eps = 1e-6f;
  icl_post_add pa = {&o, &pw, &t};
  uint64_t d0 = dispatches();
  if (glu < 0) {
    CHECKF(be->ops->add_rms_matmul_group, "the Vulkan backend has no add_rms_matmul_group");
    CHECKF(icl_op_add_rms_matmul_group(be, &x, &pa, &nw, eps, &h, count, w, y, &err) == ICL_OK,
           "add_rms_matmul_group: %s", err.msg);
  } else {
    CHECKF(be->ops->add_rms_matmul_glu, "the Vulkan backend has no add_rms_matmul_glu");
    CHECKF(icl_op_add_rms_matmul_glu(be, &x, &pa, &nw, eps, &h, &w[0], &w[1], &y[0], &y[1], glu, &err) == ICL_OK,
           "add_rms_matmul_glu: %s", err.msg);
  }
  uint64_t used = dispatches() - d0;
  if (n == 1) CHECKF(used == 1, "post fold %s K=%lld: %llu dispatches, expected 1", icl_type_name(ts[0]),
                     (long long)K, (unsigned long long)used);
  CHECKF(icl_op_rms_norm_add(be, &o1, &pw, eps, &t1, &err) == ICL_OK, "rms_norm_add: %s", err.msg);
  CHECKF(icl_op_rms_norm(be, &t1, &nw, eps, &h1, &err) == ICL_OK, "rms_norm: %s", err.msg);
  fold_reference(count, glu, w, &h1, y1);
  float *tf = malloc((size_t)(K * n) * 4), *tr = malloc((size_t)(K * n) * 4);
  CHECKF(be->ops->read(be, t.buf, t.offset, tf, (size_t)(K * n) * 4, &err) == ICL_OK, "read: %s", err.msg);
  CHECKF(be->ops->read(be, t1.buf, t1.offset, tr, (size_t)(K * n) * 4, &err) == ICL_OK, "read: %s", err.msg);
  CHECKF(memcmp(tf, tr, (size_t)(K * n) * 4) == 0, "post fold (count %d, glu %d) %s K=%lld n=%lld +%d: t "
         "differs from rms_norm_add's residual", count, glu, icl_type_name(ts[0]), (long long)K, (long long)n, sh);
  free(tf), free(tr);
  for (int i = 0; i < (glu < 0 ? count : 1); i++)
    CHECKF(same_bits(&y[i], &y1[i]), "post fold (count %d, glu %d) %s K=%lld n=%lld +%d nw+%d: output %d differs "
           "from rms_norm_add, rms_norm then the lone matmuls", count, glu, icl_type_name(ts[0]), (long long)K,
           (long long)n, sh, ws, i);
  free_members(count, w, y, y1);
  icl_dt *bufs[] = {&x, &o, &o1, &t1, &pw, &nw, &t, &h, &h1};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->ops->buf_free(be, bufs[i]->buf);
}

/* rms_rope_pair against rms_norm of q, of k (per head) then rope_pair, one dispatch. */
static void check_rms_rope(int64_t hd, int64_t nh, int64_t nk, int64_t n, int n_rot, int mode, int32_t pos0) {
  float *qh = malloc((size_t)(hd * nh * n) * 4), *kh = malloc((size_t)(hd * nk * n) * 4), *wh = malloc((size_t)hd * 8);
  int32_t *ph = malloc((size_t)n * 4);
  t_rand_fill(qh, hd * nh * n, 61, -3.0f, 3.0f);
  t_rand_fill(kh, hd * nk * n, 62, -3.0f, 3.0f);
  t_rand_fill(wh, 2 * hd, 63, 0.5f, 1.5f);
  for (int64_t i = 0; i < n; i++) ph[i] = pos0 + (int32_t)i;
  icl_dt q = tensor(ICL_TYPE_F32, hd, nh * n, qh), k = tensor(ICL_TYPE_F32, hd, nk * n, kh);
  icl_dt q1 = tensor(ICL_TYPE_F32, hd, nh * n, qh), k1 = tensor(ICL_TYPE_F32, hd, nk * n, kh);
  icl_dt qw = tensor(ICL_TYPE_F32, hd, 1, wh), kw = tensor(ICL_TYPE_F32, hd, 1, wh + hd);
  icl_dt pos = tensor(ICL_TYPE_I32, n, 1, ph);
  q.ne[1] = q1.ne[1] = nh, q.ne[2] = q1.ne[2] = n, k.ne[1] = k1.ne[1] = nk, k.ne[2] = k1.ne[2] = n;
  icl_error err;
  CHECKF(be->ops->rms_rope_pair, "the Vulkan backend has no rms_rope_pair");
  uint64_t d0 = dispatches();
  CHECKF(icl_op_rms_rope_pair(be, &q, &k, &qw, &kw, 1e-6f, &pos, n_rot, 1e4f, mode, &err) == ICL_OK,
         "rms_rope_pair: %s", err.msg);
  CHECKF(dispatches() - d0 == 1, "rms_rope_pair: not one dispatch");
  CHECKF(icl_op_rms_norm(be, &q1, &qw, 1e-6f, &q1, &err) == ICL_OK, "rms_norm: %s", err.msg);
  CHECKF(icl_op_rms_norm(be, &k1, &kw, 1e-6f, &k1, &err) == ICL_OK, "rms_norm: %s", err.msg);
  CHECKF(icl_op_rope_pair(be, &q1, &k1, &pos, n_rot, 1e4f, mode, &err) == ICL_OK, "rope_pair: %s", err.msg);
  CHECKF(same_bits(&q, &q1) && same_bits(&k, &k1), "rms_rope_pair hd=%lld heads %lld+%lld n=%lld n_rot=%d mode %d "
         "differs from rms_norm twice then rope_pair", (long long)hd, (long long)nh, (long long)nk, (long long)n, n_rot,
         mode);
  be->ops->buf_free(be, q.buf), be->ops->buf_free(be, k.buf), be->ops->buf_free(be, q1.buf);
  be->ops->buf_free(be, k1.buf), be->ops->buf_free(be, pos.buf), be->ops->buf_free(be, qw.buf);
  be->ops->buf_free(be, kw.buf);
  free(qh), free(kh), free(wh), free(ph);
}

static void run_family(void) {
  check_rope_pair(64, 9, 3, 1, 64, ICL_ROPE_NORMAL, 1393);
  check_rope_pair(64, 9, 3, 7, 64, ICL_ROPE_NEOX, 0);
  check_rope_pair(256, 4, 1, 5, 256, ICL_ROPE_NEOX, 17);
  check_rope_pair(64, 2, 1, 3, 32, ICL_ROPE_NORMAL, 5);
  /* the GLU epilogue is one more pipeline per type and activation: SmolLM2's type with silu, Gemma's with gelu */
  check_glu(ICL_TYPE_Q4_1, ICL_TYPE_Q4_1, 576, 1536, 1, ICL_GLU_SILU);
  check_glu(ICL_TYPE_Q4_K, ICL_TYPE_Q4_K, 256, 65, 1, ICL_GLU_GELU);
  check_glu(ICL_TYPE_Q4_1, ICL_TYPE_Q4_1, 256, 33, 3, ICL_GLU_SILU); /* several tokens: matmul_group then swiglu */
  /* folded norms: SmolLM2's q/k/v and gate/up, partial workgroups, a partial last chunk (F32, K=100), more chunks
   * than one window of the workgroup's partials (8448 = 264 chunks), unaligned x and norm weight, several tokens */
  static const int64_t QKV[3] = {576, 192, 192}, ODD[3] = {33, 7, 65}, FF[3] = {1536, 1536}, FF_ODD[3] = {65, 65};
  check_rms_fold(3, ICL_TYPE_Q4_1, 576, QKV, 1, -1, 0, 0);
  check_rms_fold(2, ICL_TYPE_Q4_1, 576, FF, 1, -1, 0, 0);
  check_rms_fold(2, ICL_TYPE_Q4_1, 576, FF, 1, ICL_GLU_SILU, 0, 0);
  check_rms_fold(2, ICL_TYPE_Q4_K, 256, FF_ODD, 1, ICL_GLU_GELU, 1, 3);
  check_rms_fold(3, ICL_TYPE_Q4_K, 256, ODD, 1, -1, 2, 1);
  check_rms_fold(3, ICL_TYPE_F32, 100, ODD, 1, -1, 3, 2);
  check_rms_fold(2, ICL_TYPE_F32, 100, FF_ODD, 1, ICL_GLU_SILU, 1, 0);
  check_rms_fold(3, ICL_TYPE_Q8_0, 8448, ODD, 1, -1, 0, 1);
  check_rms_fold(3, ICL_TYPE_Q4_1, 256, ODD, 3, -1, 0, 0);           /* several tokens: rms_norm then the group */
  check_rms_fold(2, ICL_TYPE_Q4_1, 256, FF_ODD, 2, ICL_GLU_SILU, 0, 0); /* and then matmul_glu */
  /* post-norms with the residual add: Gemma 3's 640, one and several rows, a partial chunk, > one window */
  check_rms_add(640, 1);
  check_rms_add(640, 5);
  check_rms_add(100, 3);
  check_rms_add(8448, 2);
  /* Gemma 3's q/k norms with RoPE: its 4 and 1 heads of 256, one token and several, partial rotation, normal mode */
  check_rms_rope(256, 4, 1, 1, 256, ICL_ROPE_NEOX, 1393);
  check_rms_rope(256, 4, 1, 5, 256, ICL_ROPE_NEOX, 0);
  check_rms_rope(64, 3, 2, 3, 32, ICL_ROPE_NORMAL, 7);
  check_rms_rope(100, 2, 1, 2, 40, ICL_ROPE_NEOX, 3);
  /* the fused kernels differ from the lone ones only in row mapping, loads and stores, the same for every type:
   * a float type, a block type and two k-quants (each is pipelines to compile, seconds each on lavapipe) */
  static const uint32_t TYPES[] = {ICL_TYPE_F32, ICL_TYPE_Q4_1, ICL_TYPE_Q4_K, ICL_TYPE_Q6_K};
  /* {K, rows0, rows1, rows2}: SmolLM2's q, k, v; rows that leave partial workgroups */
  static const int64_t SHAPES[][4] = {{576, 576, 192, 192}, {256, 5, 64, 65}, {96, 33, 7, 1}};
  for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
    uint32_t ts[3] = {TYPES[t], TYPES[t], TYPES[t]}, mixed[3] = {TYPES[t], TYPES[t], ICL_TYPE_Q8_0};
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
      check_group(3, ts, SHAPES[s][0], SHAPES[s] + 1, 1, 1);
      check_group(2, ts, SHAPES[s][0], SHAPES[s] + 1, 1, 1);
    }
    check_group(3, mixed, 256, SHAPES[1] + 1, 1, 0); /* a mix without a grouped variant: the matmuls in turn */
    check_group(3, ts, 256, SHAPES[1] + 1, 3, 0);    /* several tokens: likewise */
    check_add(TYPES[t], 576, 576, 1);
    check_add(TYPES[t], 256, 33, 7);
  }
  /* members of two types (MIX): Gemma 3's q, k, v (Q5_0, Q5_0, Q8_0) with its K = 640, the second type first or
   * alone in the middle, a k-quant pair, partial workgroups; gate and up of two types with the GLU; the folded norm
   * over a mix; several tokens of a mix: the matmuls in turn */
  static const int64_t GEMMA[3] = {1024, 256, 256}, GFF[3] = {65, 65};
  static const uint32_t MIXES[][3] = {{ICL_TYPE_Q5_0, ICL_TYPE_Q5_0, ICL_TYPE_Q8_0},
                                      {ICL_TYPE_Q8_0, ICL_TYPE_Q5_0, ICL_TYPE_Q5_0},
                                      {ICL_TYPE_Q6_K, ICL_TYPE_Q4_K, ICL_TYPE_Q6_K}};
  check_group(3, MIXES[0], 640, GEMMA, 1, 1);
  for (size_t m = 0; m < sizeof MIXES / sizeof MIXES[0]; m++) {
    check_group(3, MIXES[m], 256, SHAPES[1] + 1, 1, 1);
    check_group(2, (uint32_t[3]){MIXES[m][1], MIXES[m][2], 0}, 256, (int64_t[3]){64, 65, 0}, 1, 1);
  }
  check_group(3, MIXES[0], 256, SHAPES[1] + 1, 3, 0);
  check_glu(ICL_TYPE_Q5_0, ICL_TYPE_Q8_0, 640, 65, 1, ICL_GLU_GELU);
  check_glu(ICL_TYPE_Q6_K, ICL_TYPE_Q4_K, 256, 33, 1, ICL_GLU_SILU);
  check_rms_fold_mix(3, MIXES[0], 640, GEMMA, 1, -1, 0, 0);
  check_rms_fold_mix(3, MIXES[2], 256, ODD, 1, -1, 1, 2);
  check_rms_fold_mix(2, MIXES[1], 640, GFF, 1, ICL_GLU_GELU, 0, 1);
  /* the post-norm add folded in too (Gemma 3: its mixed q/k/v with K = 640, gate/up with geglu), a single type, a
   * partial last chunk (F32, K = 100), > one window (8448), unaligned vectors, the group (gate/up, hooked mlp_pre)
   * and several tokens (the unfused fallback) */
  check_post_fold(3, MIXES[0], 640, GEMMA, 1, -1, 0, 0);
  check_post_fold(2, MIXES[1], 640, GFF, 1, ICL_GLU_GELU, 0, 0);
  check_post_fold(2, (uint32_t[3]){ICL_TYPE_Q4_K, ICL_TYPE_Q4_K, 0}, 256, FF_ODD, 1, ICL_GLU_SILU, 1, 2);
  check_post_fold(3, (uint32_t[3]){ICL_TYPE_F32, ICL_TYPE_F32, ICL_TYPE_F32}, 100, ODD, 1, -1, 3, 1);
  check_post_fold(3, (uint32_t[3]){ICL_TYPE_Q8_0, ICL_TYPE_Q8_0, ICL_TYPE_Q8_0}, 8448, ODD, 1, -1, 2, 0);
  check_post_fold(2, (uint32_t[3]){ICL_TYPE_Q4_1, ICL_TYPE_Q4_1, 0}, 256, FF_ODD, 1, -1, 0, 3);
  check_post_fold(3, MIXES[0], 640, GEMMA, 2, -1, 0, 0);
  check_post_fold(2, MIXES[1], 640, GFF, 3, ICL_GLU_GELU, 1, 0);
}

int main(void) {
  if (!t_vulkan_built()) {
    printf("Vulkan support not built: nothing to fuse\n");
    return 77;
  }
  const char *families[2] = {"gpu", "cpu"};
  for (int f = 0; f < 2; f++) {
    setenv("ICL_VK_SHAPE", families[f], 1);
    icl_error err;
    CHECKF(icl_vk_backend_new(-1, &be, &err) == ICL_OK, "no Vulkan backend: %s", err.msg);
    if (!be) return t_done();
    run_family();
    printf("%s-shaped kernels: grouped mat-vecs, matmul_add, rope_pair, matmul_glu, folded norms, "
           "rms_norm_add, rms_rope_pair and the post-add folds equal the unfused sequence bit for bit\n",
           families[f]);
    be->ops->destroy(be);
  }
  return t_done();
}
