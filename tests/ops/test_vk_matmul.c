/* Vulkan matmul (matrix-vector for n = 1, tiled for n > 1) and get_rows for every weight type,
 * against the scalar reference, over shape classes: one row, odd widths and row counts, widths
 * that are not multiples of the tile or of 256, SmolLM2-135M and Gemma 3 270M layer shapes.
 *
 * Tolerances: dequantization is exact in f32 for every type (fp16/bf16 scales, small integer
 * quants), so the only difference from the reference is f32 summation order against its double
 * accumulation, NMSE ~ K * 2^-48 < 1e-10; 1e-9 leaves room while a single wrong element or
 * block (NMSE ~ 1e-4 or more) still fails. get_rows copies decoded values: 1e-12. */
#include "test_vk_util.h"

typedef struct shape { int64_t cols, rows, n; } shape;

static const uint32_t TYPES[] = {ICL_TYPE_F32,  ICL_TYPE_F16,  ICL_TYPE_BF16, ICL_TYPE_Q4_0, ICL_TYPE_Q4_1,
                                 ICL_TYPE_Q5_0, ICL_TYPE_Q5_1, ICL_TYPE_Q8_0, ICL_TYPE_Q2_K, ICL_TYPE_Q3_K,
                                 ICL_TYPE_Q4_K, ICL_TYPE_Q5_K, ICL_TYPE_Q6_K};

/* per block class: {cols, rows, n}; rows and n include 1 and odd values, widths of 576/640 are
 * not multiples of 256 or of the 64-row tile, 67 columns leave a partial tile */
static const shape FLOAT_SHAPES[] = {{1, 1, 1}, {7, 5, 3}, {33, 7, 2}, {576, 1536, 1}, {640, 256, 5}, {576, 192, 67}};
static const shape Q32_SHAPES[] = {{32, 1, 1},    {96, 7, 3},     {576, 1536, 1}, {576, 1536, 7},
                                   {640, 256, 1}, {2048, 640, 4}, {576, 192, 67}};
static const shape QK_SHAPES[] = {{256, 1, 1},    {512, 7, 3},     {1536, 576, 1}, {1536, 576, 7},
                                  {2048, 640, 1}, {768, 192, 67}};

static void test_matmul(uint32_t t, shape s, uint64_t seed) {
  icl_error err;
  void *raw;
  float *x, *ref = vt_xmalloc((size_t)(s.rows * s.n) * sizeof(float));
  vt w = vt_weights(t, s.cols, s.rows, seed, &raw);
  vt xv = vt_rand(s.cols, s.n, 1, seed + 1, -1.0f, 1.0f, &x);
  vt y = vt_new(ICL_TYPE_F32, s.rows, s.n, 1, 4);
  int rc = vt_be->ops->matmul(vt_be, &w.dt, &xv.dt, &y.dt, &err);
  CHECKF(rc == ICL_OK, "matmul %s: %s", icl_type_name(t), err.msg);
  icl_ref_matmul(t, raw, s.cols, s.rows, x, s.n, ref);
  char what[96];
  snprintf(what, sizeof what, "matmul %s [%lld x %lld] x %lld", icl_type_name(t), (long long)s.cols,
           (long long)s.rows, (long long)s.n);
  vt_expect(what, &y, ref, 1e-9);
  CHECKF(vt_guards_ok(&w) && vt_guards_ok(&xv), "%s: inputs' guards changed", what);
  vt_free(&w), vt_free(&xv), vt_free(&y);
  free(raw), free(x), free(ref);
}

static void test_get_rows(uint32_t t, int64_t cols, int64_t rows, uint64_t seed) {
  icl_error err;
  void *raw;
  int32_t ids[6] = {(int32_t)rows - 1, 0, (int32_t)(rows / 2), 0, (int32_t)(rows / 3), (int32_t)rows - 1};
  int64_t n = 6;
  float *ref = vt_xmalloc((size_t)(cols * n) * sizeof(float));
  vt w = vt_weights(t, cols, rows, seed, &raw);
  vt iv = vt_new(ICL_TYPE_I32, n, 1, 1, 8);
  vt_upload(&iv, ids);
  vt out = vt_new(ICL_TYPE_F32, cols, n, 1, 20);
  int rc = vt_be->ops->get_rows(vt_be, &w.dt, &iv.dt, &out.dt, &err);
  CHECKF(rc == ICL_OK, "get_rows %s: %s", icl_type_name(t), err.msg);
  icl_ref_get_rows(t, raw, cols, ids, n, ref);
  char what[96];
  snprintf(what, sizeof what, "get_rows %s [%lld x %lld]", icl_type_name(t), (long long)cols, (long long)rows);
  vt_expect(what, &out, ref, 1e-12);
  vt_free(&w), vt_free(&iv), vt_free(&out);
  free(raw), free(ref);
}

static void shapes_of(uint32_t t, const shape **s, int *n) {
  int64_t be = icl_type_block_elems(t);
  if (be == 1) *s = FLOAT_SHAPES, *n = (int)(sizeof FLOAT_SHAPES / sizeof FLOAT_SHAPES[0]);
  else if (be == 32) *s = Q32_SHAPES, *n = (int)(sizeof Q32_SHAPES / sizeof Q32_SHAPES[0]);
  else *s = QK_SHAPES, *n = (int)(sizeof QK_SHAPES / sizeof QK_SHAPES[0]);
}

/* Which shapes of a type's list run: all, or `some`: the first three and the last (one row, odd sizes,
 * a many-row matrix-vector product, a partial tile), which still reach every kernel of a family
 * (matrix-vector, small-n and large-n tiles) and leave out the middle layer shapes. */
enum { ALL, SOME };
static int runs(int sel, int k, int ns) { return sel == ALL || k < 3 || k == ns - 1; }

/* Every type (with `few_types`, Q4_1 and Q4_K only: the two models' big matrices) over the shapes `sel`
 * picks; the per-type line gives wall and process CPU seconds. */
static void run_all(int sel, int few_types) {
  const char *only = getenv("ICL_TEST_TYPE"); /* e.g. ICL_TEST_TYPE=q4_k for one type */
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
    uint32_t t = TYPES[i];
    if (only && icl_type_from_name(only) != (int)t) continue;
    if (few_types && t != ICL_TYPE_Q4_1 && t != ICL_TYPE_Q4_K) continue;
    double t0 = vt_now();
    clock_t c0 = clock();
    const shape *s;
    int ns;
    shapes_of(t, &s, &ns);
    for (int k = 0; k < ns; k++)
      if (runs(sel, k, ns)) test_matmul(t, s[k], 100 * i + (uint64_t)k);
    test_get_rows(t, s[0].cols, 3, 7 + i);
    if (sel == ALL) test_get_rows(t, s[ns - 2].cols, s[ns - 2].rows, 9 + i);
    printf("%-5s ok in %.2f s (cpu %.2f s)\n", icl_type_name(t), vt_now() - t0,
           (double)(clock() - c0) / CLOCKS_PER_SEC);
  }
}

/* test_vk_matmul [--quick]: the other family of kernel shapes always runs `some` shapes. --quick runs
 * `some` in this device's own family too, and the other family on Q4_1 and Q4_K only (its float and
 * other block kernels are left to the full run): every type on the kernels the device runs. On
 * lavapipe each type's pipelines cost LLVM seconds to compile; the shapes' sizes barely matter. */
int main(int argc, char **argv) {
  int quick = argc > 1 && !strcmp(argv[1], "--quick");
  if (argc > 1 && !quick) {
    fprintf(stderr, "usage: test_vk_matmul [--quick]\n");
    return 2;
  }
  run_all(quick ? SOME : ALL, 0);
  vt_other_shape();
  run_all(SOME, quick);
  return vt_finish();
}
