/* Vulkan elementwise and data-movement ops against the reference: add and mul (full and one-row
 * broadcast, in place), scale, silu, gelu, relu, swiglu, geglu, convert f32<->f16, copy2d, fill2d.
 * Sizes: 1 element, odd counts, SmolLM2/Gemma widths times a few rows, and a count that is not a
 * multiple of the workgroup or of the per-invocation run.
 *
 * Tolerances: add/mul/scale/copy/fill are single f32 operations, exact up to rounding of the
 * same operation (1e-14). silu/gelu use exp in f32 against the reference's libm: a few ulp
 * (1e-11). convert is compared bit for bit. */
#include "test_vk_util.h"

static const int64_t WIDTHS[][2] = {{1, 1}, {7, 3}, {576, 5}, {640, 7}, {1536, 3}, {2048 + 5, 1}};
#define NW (sizeof WIDTHS / sizeof WIDTHS[0])

typedef int (*binop)(icl_backend *, const icl_dt *, const icl_dt *, const icl_dt *, icl_error *);
typedef void (*refbin)(const float *, const float *, int64_t, int64_t, int64_t, float *);

static void test_binary(const char *name, binop op, refbin ref_op, int64_t d, int64_t rows, int bcast, int in_place,
                        uint64_t seed) {
  icl_error err;
  int64_t brows = bcast ? 1 : rows;
  float *a, *b, *ref = vt_xmalloc((size_t)(d * rows) * sizeof(float));
  vt av = vt_rand(d, rows, 1, seed, -3, 3, &a), bv = vt_rand(d, brows, 1, seed + 1, -3, 3, &b);
  vt y = in_place ? av : vt_new(ICL_TYPE_F32, d, rows, 1, 4);
  CHECKF(op(vt_be, &av.dt, &bv.dt, &y.dt, &err) == ICL_OK, "%s: %s", name, err.msg);
  ref_op(a, b, d, rows, brows, ref);
  char what[96];
  snprintf(what, sizeof what, "%s [%lld x %lld]%s%s", name, (long long)d, (long long)rows, bcast ? " bcast" : "",
           in_place ? " in place" : "");
  vt_expect(what, &y, ref, 1e-14);
  if (!in_place) vt_free(&y);
  vt_free(&av), vt_free(&bv);
  free(a), free(b), free(ref);
}

typedef int (*unop)(icl_backend *, const icl_dt *, const icl_dt *, icl_error *);
typedef void (*refun)(const float *, int64_t, float *);

static int scale_op(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return be->ops->scale(be, x, 0.125f * 3, y, err);
}
static void scale_ref(const float *x, int64_t n, float *y) { icl_ref_scale(x, 0.125f * 3, n, y); }

static void test_unary(const char *name, unop op, refun ref_op, int64_t n, int in_place, double thr, uint64_t seed) {
  icl_error err;
  float *x, *ref = vt_xmalloc((size_t)n * sizeof(float));
  vt xv = vt_rand(n, 1, 1, seed, -12, 12, &x); /* wide enough for exp to saturate */
  vt y = in_place ? xv : vt_new(ICL_TYPE_F32, n, 1, 1, 8);
  CHECKF(op(vt_be, &xv.dt, &y.dt, &err) == ICL_OK, "%s: %s", name, err.msg);
  ref_op(x, n, ref);
  char what[96];
  snprintf(what, sizeof what, "%s [%lld]%s", name, (long long)n, in_place ? " in place" : "");
  vt_expect(what, &y, ref, thr);
  if (!in_place) vt_free(&y);
  vt_free(&xv);
  free(x), free(ref);
}

typedef void (*refglu)(const float *, const float *, int64_t, float *);

static void test_glu(const char *name, binop op, refglu ref_op, int64_t n, int alias, uint64_t seed) {
  icl_error err;
  float *g, *u, *ref = vt_xmalloc((size_t)n * sizeof(float));
  vt gv = vt_rand(n, 1, 1, seed, -6, 6, &g), uv = vt_rand(n, 1, 1, seed + 1, -2, 2, &u);
  vt y = alias ? gv : vt_new(ICL_TYPE_F32, n, 1, 1, 16);
  CHECKF(op(vt_be, &gv.dt, &uv.dt, &y.dt, &err) == ICL_OK, "%s: %s", name, err.msg);
  ref_op(g, u, n, ref);
  char what[96];
  snprintf(what, sizeof what, "%s [%lld]%s", name, (long long)n, alias ? " y = gate" : "");
  vt_expect(what, &y, ref, 1e-11);
  if (!alias) vt_free(&y);
  vt_free(&gv), vt_free(&uv);
  free(g), free(u), free(ref);
}

/* f32 -> f16 -> f16 -> f32 through the device. Both conversions are exactly specified (round to
 * nearest even, overflow to inf; f16 -> f32 exact), so results are compared bit for bit; odd
 * counts check that the last half-word's neighbour (a guard byte) is untouched. */
static void test_convert(int64_t n, uint64_t seed) {
  icl_error err;
  float *x, *back = vt_xmalloc((size_t)n * 4), *ref = vt_xmalloc((size_t)n * 4);
  uint16_t *h_ref = vt_xmalloc((size_t)n * 2), *h_got = vt_xmalloc((size_t)n * 2);
  vt xv = vt_rand(n, 1, 1, seed, -60000, 60000, &x);
  const float special[] = {1e5f, -1e5f, 1e-8f, -3e-5f, 65519.0f, 0.1f}; /* overflow, subnormal, rounding */
  for (int64_t i = 0; i < n && i < 6; i++) x[i] = special[i];
  vt_upload(&xv, x);
  vt hv = vt_new(ICL_TYPE_F16, n, 1, 1, 4), yv = vt_new(ICL_TYPE_F32, n, 1, 1, 4),
     h2 = vt_new(ICL_TYPE_F16, n, 1, 1, 8);
  CHECK(vt_be->ops->convert(vt_be, &xv.dt, &hv.dt, &err) == ICL_OK);
  CHECK(vt_be->ops->convert(vt_be, &hv.dt, &h2.dt, &err) == ICL_OK);
  CHECK(vt_be->ops->convert(vt_be, &h2.dt, &yv.dt, &err) == ICL_OK);
  icl_ref_convert(ICL_TYPE_F32, x, ICL_TYPE_F16, h_ref, n);
  icl_ref_convert(ICL_TYPE_F16, h_ref, ICL_TYPE_F32, ref, n);
  vt_download(&h2, h_got);
  vt_download(&yv, back);
  int64_t diff = 0;
  for (int64_t i = 0; i < n; i++) diff += h_got[i] != h_ref[i];
  CHECKF(diff == 0, "convert f32->f16 [%lld]: %lld halves differ", (long long)n, (long long)diff);
  CHECKF(memcmp(back, ref, (size_t)n * 4) == 0, "convert f16->f32 [%lld] differs", (long long)n);
  CHECKF(vt_guards_ok(&hv) && vt_guards_ok(&h2) && vt_guards_ok(&yv), "convert [%lld]: guards changed", (long long)n);
  vt_free(&xv), vt_free(&hv), vt_free(&yv), vt_free(&h2);
  free(x), free(back), free(ref), free(h_ref), free(h_got);
}

static void test_copy_fill(uint64_t seed) {
  icl_error err;
  /* capture heads 1..2 of a [64, 4 heads, 7 tokens] tensor into a [128, 7] buffer at offset 3 */
  float *src, *dst0, *ref;
  vt sv = vt_rand(64 * 4, 7, 1, seed, -1, 1, &src), dv = vt_rand(131, 7, 1, seed + 1, -1, 1, &dst0);
  ref = vt_xmalloc(131 * 7 * 4);
  memcpy(ref, dst0, 131 * 7 * 4);
  for (int r = 0; r < 7; r++)
    for (int c = 0; c < 128; c++) ref[3 + r * 131 + c] = src[64 + r * 256 + c];
  CHECK(vt_be->ops->copy2d(vt_be, &sv.dt, 64, 256, &dv.dt, 3, 131, 7, 128, &err) == ICL_OK);
  vt_expect("copy2d [128 of 256 x 7]", &dv, ref, 1e-14);
  /* zero-ablate head 2 of the source in place */
  for (int r = 0; r < 7; r++)
    for (int c = 0; c < 64; c++) src[128 + r * 256 + c] = 0.0f;
  CHECK(vt_be->ops->fill2d(vt_be, &sv.dt, 128, 256, 7, 64, 0.0f, &err) == ICL_OK);
  vt_expect("fill2d [64 of 256 x 7]", &sv, src, 1e-14);
  /* one element */
  src[5] = -2.5f;
  CHECK(vt_be->ops->fill2d(vt_be, &sv.dt, 5, 1, 1, 1, -2.5f, &err) == ICL_OK);
  vt_expect("fill2d [1]", &sv, src, 1e-14);
  vt_free(&sv), vt_free(&dv);
  free(src), free(dst0), free(ref);
}

static void run_all(void) {
  vt_backend();
  double t0 = vt_now();
  for (size_t i = 0; i < NW; i++) {
    int64_t d = WIDTHS[i][0], rows = WIDTHS[i][1], n = d * rows;
    test_binary("add", vt_be->ops->add, icl_ref_add, d, rows, 0, i % 2, 10 + i);
    test_binary("add", vt_be->ops->add, icl_ref_add, d, rows, 1, 0, 20 + i);
    test_binary("mul", vt_be->ops->mul, icl_ref_mul, d, rows, 0, 0, 30 + i);
    test_binary("mul", vt_be->ops->mul, icl_ref_mul, d, rows, 1, i % 2, 40 + i);
    test_unary("scale", scale_op, scale_ref, n, i % 2, 1e-14, 50 + i);
    test_unary("silu", vt_be->ops->silu, icl_ref_silu, n, i % 2, 1e-11, 60 + i);
    test_unary("gelu", vt_be->ops->gelu, icl_ref_gelu, n, !(i % 2), 1e-11, 70 + i);
    test_unary("relu", vt_be->ops->relu, icl_ref_relu, n, i % 2, 0.0, 75 + i); /* max(x, 0): exact */
    test_glu("swiglu", vt_be->ops->swiglu, icl_ref_swiglu, n, i % 2, 80 + i);
    test_glu("geglu", vt_be->ops->geglu, icl_ref_geglu, n, !(i % 2), 90 + i);
    test_convert(n, 100 + i);
  }
  test_copy_fill(7);
  printf("elementwise ops ok in %.2f s\n", vt_now() - t0);
}

int main(void) {
  run_all();
  vt_other_shape();
  run_all();
  return vt_finish();
}
