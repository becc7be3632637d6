/* Vulkan row-wise ops against the reference: rms_norm (also per-head on a reshaped view),
 * layer_norm, softmax, argmax, with and without weights, in place, over widths 1, odd, 64,
 * 256 (head dims), 576 and 640 (model widths), 49152 (a vocabulary row) and row counts 1, 7, 512.
 *
 * Tolerances: each output is a few f32 operations from the reference's double computation,
 * but the row sums are accumulated in f32 in a different order: relative error ~ 1e-7,
 * NMSE < 1e-12 expected; limit 1e-10. */
#include "test_vk_util.h"

typedef struct rshape { int64_t d, rows; } rshape;
static const rshape SHAPES[] = {{1, 1}, {7, 3}, {64, 9 * 7}, {256, 4 * 7}, {576, 7}, {640, 512}, {49152, 2}};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static void test_rms_norm(rshape s, int with_w, int in_place, uint64_t seed) {
  icl_error err;
  float *x, *w = NULL, *ref = vt_xmalloc((size_t)(s.d * s.rows) * sizeof(float));
  vt xv = vt_rand(s.d, s.rows, 1, seed, -2.0f, 2.0f, &x), wv = {0};
  if (with_w) wv = vt_rand(s.d, 1, 1, seed + 1, 0.5f, 1.5f, &w);
  vt y = in_place ? xv : vt_new(ICL_TYPE_F32, s.d, s.rows, 1, 8);
  int rc = vt_be->ops->rms_norm(vt_be, &xv.dt, with_w ? &wv.dt : NULL, 1e-5f, &y.dt, &err);
  CHECKF(rc == ICL_OK, "rms_norm: %s", err.msg);
  icl_ref_rms_norm(x, w, s.d, s.rows, 1e-5f, ref);
  char what[96];
  snprintf(what, sizeof what, "rms_norm [%lld x %lld]%s%s", (long long)s.d, (long long)s.rows, with_w ? " w" : "",
           in_place ? " in place" : "");
  vt_expect(what, &y, ref, 1e-10);
  if (!in_place) vt_free(&y);
  vt_free(&xv), vt_free(&wv);
  free(x), free(w), free(ref);
}

static void test_layer_norm(rshape s, int with_wb, uint64_t seed) {
  icl_error err;
  float *x, *w = NULL, *b = NULL, *ref = vt_xmalloc((size_t)(s.d * s.rows) * sizeof(float));
  vt xv = vt_rand(s.d, s.rows, 1, seed, 1.0f, 3.0f, &x), wv = {0}, bv = {0}; /* mean far from 0 */
  if (with_wb) wv = vt_rand(s.d, 1, 1, seed + 1, 0.5f, 1.5f, &w), bv = vt_rand(s.d, 1, 1, seed + 2, -1, 1, &b);
  vt y = vt_new(ICL_TYPE_F32, s.d, s.rows, 1, 8);
  int rc = vt_be->ops->layer_norm(vt_be, &xv.dt, with_wb ? &wv.dt : NULL, with_wb ? &bv.dt : NULL, 1e-5f, &y.dt, &err);
  CHECKF(rc == ICL_OK, "layer_norm: %s", err.msg);
  icl_ref_layer_norm(x, w, b, s.d, s.rows, 1e-5f, ref);
  char what[96];
  snprintf(what, sizeof what, "layer_norm [%lld x %lld]%s", (long long)s.d, (long long)s.rows, with_wb ? " w b" : "");
  /* d = 1: x - mean is exactly 0 in both; otherwise as rms_norm (the centring is done twice in f32) */
  vt_expect(what, &y, ref, 1e-9);
  vt_free(&xv), vt_free(&wv), vt_free(&bv), vt_free(&y);
  free(x), free(w), free(b), free(ref);
}

static void test_softmax(rshape s, int in_place, uint64_t seed) {
  icl_error err;
  float *x, *ref = vt_xmalloc((size_t)(s.d * s.rows) * sizeof(float));
  vt xv = vt_rand(s.d, s.rows, 1, seed, -8.0f, 8.0f, &x);
  vt y = in_place ? xv : vt_new(ICL_TYPE_F32, s.d, s.rows, 1, 8);
  int rc = vt_be->ops->softmax(vt_be, &xv.dt, &y.dt, &err);
  CHECKF(rc == ICL_OK, "softmax: %s", err.msg);
  icl_ref_softmax(x, s.d, s.rows, ref);
  char what[96];
  snprintf(what, sizeof what, "softmax [%lld x %lld]%s", (long long)s.d, (long long)s.rows,
           in_place ? " in place" : "");
  vt_expect(what, &y, ref, 1e-10);
  if (!in_place) vt_free(&y);
  vt_free(&xv);
  free(x), free(ref);
}

/* A row of -inf (a fully masked score row) softmaxes to zeros, not NaN. */
static void test_softmax_masked(void) {
  icl_error err;
  float x[2 * 5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 1, -INFINITY, 2, 3, -INFINITY}, ref[10];
  vt xv = vt_new(ICL_TYPE_F32, 5, 2, 1, 4);
  vt_upload(&xv, x);
  CHECK(vt_be->ops->softmax(vt_be, &xv.dt, &xv.dt, &err) == ICL_OK);
  icl_ref_softmax(x, 5, 2, ref);
  vt_expect("softmax with -inf rows", &xv, ref, 1e-12);
  vt_free(&xv);
}

static void test_argmax(rshape s, uint64_t seed) {
  icl_error err;
  float *x;
  vt xv = vt_rand(s.d, s.rows, 1, seed, -1.0f, 1.0f, &x);
  /* ties: the first maximum must win; plant two equal maxima in row 0 */
  if (s.d >= 3) {
    x[s.d - 1] = 5.0f, x[1] = 5.0f;
    vt_upload(&xv, x);
  }
  int32_t *ref = vt_xmalloc((size_t)s.rows * 4), *got = vt_xmalloc((size_t)s.rows * 4);
  vt out = vt_new(ICL_TYPE_I32, s.rows, 1, 1, 4);
  int rc = vt_be->ops->argmax(vt_be, &xv.dt, &out.dt, &err);
  CHECKF(rc == ICL_OK, "argmax: %s", err.msg);
  icl_ref_argmax(x, s.d, s.rows, ref);
  vt_download(&out, got);
  int same = 1;
  for (int64_t r = 0; r < s.rows; r++) same &= got[r] == ref[r];
  CHECKF(same, "argmax [%lld x %lld] differs (row 0: %d vs %d)", (long long)s.d, (long long)s.rows, got[0], ref[0]);
  CHECK(vt_guards_ok(&out));
  vt_free(&xv), vt_free(&out);
  free(x), free(ref), free(got);
}

static void run_all(void) {
  double t0 = vt_now();
  for (size_t i = 0; i < NSHAPES; i++) {
    test_rms_norm(SHAPES[i], 1, 0, 10 + i);
    test_rms_norm(SHAPES[i], 0, 1, 20 + i);
    test_layer_norm(SHAPES[i], i % 2, 30 + i);
    test_softmax(SHAPES[i], i % 2, 40 + i);
    test_argmax(SHAPES[i], 50 + i);
  }
  test_softmax_masked();
  printf("row ops ok in %.2f s\n", vt_now() - t0);
}

int main(void) {
  run_all();
  vt_other_shape();
  run_all();
  return vt_finish();
}
