/* The Vulkan cooperative-matrix matmul (ICL_VK_MATMUL=coopmat, FAST precision) for every weight type against the
 * float64 oracle, through matmul and matmul_add; EXACT precision must still run the f32 kernel with the switch set.
 * Skips (77) where the build has no cooperative-matrix kernel (a glslang without GL_KHR_cooperative_matrix) or the
 * device lists no usable f16 x f16 -> f32 shape.
 *
 * Tolerance: weights and activations are rounded to f16 (11 significant bits: relative error <= 2^-11 each) and
 * products summed in f32, so NMSE ~ 2 x 2^-22 / 3 ~ 1.6e-7 on random data; 1e-5 allowed, while a wrong tile,
 * block or row is >= 1e-3. The f32 kernels' NMSE is ~1e-14, so an error below 1e-12 means f16 never ran. */
#include "test_vk_util.h"
#include "vk_internal.h"

typedef struct shape { int64_t cols, rows, n; } shape;

static const uint32_t TYPES[] = {ICL_TYPE_F32,  ICL_TYPE_F16,  ICL_TYPE_BF16, ICL_TYPE_Q4_0, ICL_TYPE_Q4_1,
                                 ICL_TYPE_Q5_0, ICL_TYPE_Q5_1, ICL_TYPE_Q8_0, ICL_TYPE_Q2_K, ICL_TYPE_Q3_K,
                                 ICL_TYPE_Q4_K, ICL_TYPE_Q5_K, ICL_TYPE_Q6_K};
/* partial tiles in both directions, a partial K chunk (float types), a model layer */
static const shape FLOAT_SHAPES[] = {{33, 7, 2}, {96, 70, 67}, {576, 192, 67}};
static const shape Q32_SHAPES[] = {{96, 7, 3}, {256, 70, 67}, {576, 192, 67}};
static const shape QK_SHAPES[] = {{256, 7, 3}, {512, 70, 67}, {768, 192, 67}};

static void test_coopmat(uint32_t t, shape s, int acc, uint64_t seed) {
  vt_mm c = vt_mm_run("coopmat", t, s.cols, s.rows, s.n, acc, seed);
  double e = vt_expect(c.what, &c.y, c.oracle, 1e-5);
  CHECKF(e > 1e-12, "%s: NMSE %.3g: the f32 kernel ran, not the f16 cooperative matrices", c.what, e);
  vt_mm_free(&c);
}

/* test_vk_coopmat [--quick]: --quick runs F16, Q4_1 and Q4_K only, one type of each block family (on lavapipe each
 * type's pipeline costs LLVM seconds, cold) */
int main(int argc, char **argv) {
  int quick = argc > 1 && !strcmp(argv[1], "--quick");
  if (argc > 1 && !quick) {
    fprintf(stderr, "usage: test_vk_coopmat [--quick]\n");
    return 2;
  }
  icl_device_info infos[16];
  int n, chosen;
  icl_error err;
  uint32_t sh[3];
  if (icl_vk_list_devices(infos, 16, &n, &chosen, &err) || chosen < 0) {
    fprintf(stderr, "no Vulkan device: %s\n", err.msg);
    return 1;
  }
  if (!vk_coopmat_built() || !vk_coopmat_shape(&infos[chosen], sh)) {
    printf("%s: the coopmat path is not offered (%s), nothing to test (skip)\n", infos[chosen].name,
           vk_coopmat_built() ? "no usable cooperative-matrix shape" : "this build has no cooperative-matrix kernel");
    return 77;
  }
  printf("cooperative matrices %u x %u x %u\n", sh[0], sh[1], sh[2]);
  setenv("ICL_VK_MATMUL", "coopmat", 1);
  vt_backend();
  vt_be->precision = ICL_PRECISION_FAST;
  CHECK(!strcmp(icl_vk_backend_matmul_path(vt_be, ICL_PRECISION_FAST), "coopmat"));
  for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++) {
    if (quick && TYPES[i] != ICL_TYPE_F16 && TYPES[i] != ICL_TYPE_Q4_1 && TYPES[i] != ICL_TYPE_Q4_K) continue;
    int64_t be = icl_type_block_elems(TYPES[i]);
    const shape *s = be == 1 ? FLOAT_SHAPES : be == 32 ? Q32_SHAPES : QK_SHAPES;
    for (int k = 0; k < 3; k++) test_coopmat(TYPES[i], s[k], 0, 10 * i + (uint64_t)k);
    printf("%-5s ok\n", icl_type_name(TYPES[i]));
  }
  test_coopmat(ICL_TYPE_Q4_1, Q32_SHAPES[1], 1, 77);
  test_coopmat(ICL_TYPE_Q6_K, QK_SHAPES[2], 1, 78);
  vt_exact_stays_f32("coopmat", ICL_TYPE_Q4_K, 768); /* EXACT with the switch set: the f32 kernel */
  return vt_finish();
}
