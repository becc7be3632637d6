/* The Vulkan integer-dot matmul (ICL_VK_MATMUL=intdot, FAST precision) for the 32-element block types and the K
 * types Q3_K..Q6_K (their 32-element sub-blocks; Q3_K and Q6_K with integer half scales), against
 * its scalar reference icl_ref_matmul_q8 (the same int8 activations and exact integer dots; tight) and against
 * the float64 oracle (FAST's int8 error), through matmul and matmul_add; EXACT precision must still run the f32
 * kernel with the switch set; a bad ICL_VK_MATMUL value is refused. Skips (77) on a device without
 * shaderIntegerDotProduct.
 *
 * Tolerances: against icl_ref_matmul_q8 the codes and integer dots are the same; what may differ is the
 * device's 1 / d (Vulkan allows 2.5 ulp for division, moving a code that lies on a rounding edge by one) and
 * fused multiply-adds in the scale products: NMSE 0 measured on lavapipe (Mesa 22.3, 25.0, 26.2), 1e-9 allowed
 * for a GPU, while a wrong block, code or scale is >= 1e-5 (a wrong nibble shift gave 0.46). Against the oracle:
 * 1.3e-5..1.8e-5 measured, the op table's FAST bound 1e-3. */
#include "test_vk_util.h"

typedef struct shape { int64_t cols, rows, n; } shape;

static const uint32_t TYPES[] = {ICL_TYPE_Q4_0, ICL_TYPE_Q4_1, ICL_TYPE_Q5_0, ICL_TYPE_Q5_1, ICL_TYPE_Q8_0};
static const uint32_t K_TYPES[] = {ICL_TYPE_Q3_K, ICL_TYPE_Q4_K, ICL_TYPE_Q5_K, ICL_TYPE_Q6_K};
/* odd sizes, a partial tile, the small-n tile, a model layer (SmolLM2's q at 67 tokens) */
static const shape SHAPES[] = {{96, 7, 3}, {256, 33, 37}, {2048, 70, 4}, {576, 192, 67}};
/* K types: rows of whole 256-element blocks; Gemma 3's o (1024 wide) at 67 tokens */
static const shape K_SHAPES[] = {{256, 33, 37}, {2048, 70, 4}, {1024, 192, 67}};

static void test_intdot(uint32_t t, shape s, int acc, uint64_t seed) {
  vt_mm c = vt_mm_run("intdot", t, s.cols, s.rows, s.n, acc, seed);
  float *ref = vt_xmalloc((size_t)(s.rows * s.n) * sizeof(float));
  CHECK(icl_ref_matmul_q8(t, c.raw, s.cols, s.rows, c.xh, s.n, ref) == ICL_OK);
  for (int64_t i = 0; acc && i < s.rows * s.n; i++) ref[i] += c.y0[i];
  vt_expect(c.what, &c.y, ref, 1e-9);
  double e = vt_expect(c.what, &c.y, c.oracle, 1e-3);
  CHECKF(e > 1e-9, "%s: NMSE %.3g against the oracle: the f32 kernel ran, not the int8 path", c.what, e);
  vt_mm_free(&c);
  free(ref);
}

int main(void) {
  icl_device_info infos[16];
  int n, chosen;
  icl_error err;
  if (icl_vk_list_devices(infos, 16, &n, &chosen, &err) || chosen < 0) {
    fprintf(stderr, "no Vulkan device: %s\n", err.msg);
    return 1;
  }
  if (!infos[chosen].int_dot) {
    printf("%s lacks shaderIntegerDotProduct: the intdot path is not offered, nothing to test (skip)\n",
           infos[chosen].name);
    return 77;
  }
  icl_backend *bad = NULL;
  setenv("ICL_VK_MATMUL", "int8", 1);
  CHECKF(icl_vk_backend_new(-1, &bad, &err) == ICL_EINVAL && !bad && strstr(err.msg, "ICL_VK_MATMUL") &&
             strstr(err.msg, "int8") && strstr(err.msg, "intdot"),
         "a bad ICL_VK_MATMUL: %s", err.msg);
  setenv("ICL_VK_MATMUL", "intdot", 1);
  vt_backend();
  vt_be->precision = ICL_PRECISION_FAST;
  CHECK(!strcmp(icl_vk_backend_matmul_path(vt_be, ICL_PRECISION_FAST), "intdot"));
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
    for (size_t k = 0; k < sizeof SHAPES / sizeof SHAPES[0]; k++) test_intdot(TYPES[i], SHAPES[k], 0, 10 * i + k);
    printf("%-5s ok\n", icl_type_name(TYPES[i]));
  }
  for (size_t i = 0; i < sizeof K_TYPES / sizeof K_TYPES[0]; i++) {
    for (size_t k = 0; k < sizeof K_SHAPES / sizeof K_SHAPES[0]; k++)
      test_intdot(K_TYPES[i], K_SHAPES[k], 0, 100 + 10 * i + k);
    printf("%-5s ok\n", icl_type_name(K_TYPES[i]));
  }
  test_intdot(ICL_TYPE_Q4_1, SHAPES[1], 1, 77);
  test_intdot(ICL_TYPE_Q6_K, K_SHAPES[2], 1, 79);
  test_intdot(ICL_TYPE_Q8_0, SHAPES[3], 1, 78);
  vt_exact_stays_f32("intdot", ICL_TYPE_Q4_1, 576); /* EXACT with the switch set: the f32 kernel */
  return vt_finish();
}
