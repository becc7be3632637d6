/* The Vulkan device layer and recording machinery: device listing and ICL_DEVICE choice, the
 * validation counter (a deliberate error in a child process must be counted), buffer
 * round-trips on the mapped (UMA) path and the staging path (ICL_VK_STAGING=1), dependency
 * chains that need barriers, host writes to buffers with pending work, more dispatches in one
 * batch than a descriptor pool or the profiler's query pool holds, and ICL_PROFILE=1. */
#include <sys/wait.h>
#include <unistd.h>

#include "test_vk_util.h"
#include "vk_internal.h"

static void test_listing(void) {
  icl_device_info infos[16];
  int n, chosen;
  icl_error err;
  CHECKF(icl_vk_list_devices(infos, 16, &n, &chosen, &err) == ICL_OK, "list: %s", err.msg);
  CHECK(n >= 1 && chosen >= 0 && chosen < n);
  const icl_device_info *d = &infos[chosen];
  CHECK(d->usable && d->subgroup_size >= 1 && (d->subgroup_size & (d->subgroup_size - 1)) == 0);
  CHECK(d->max_storage_range >= (1u << 27) && d->min_storage_align >= 1 && d->n_heaps >= 1);
  /* by index and by name substring; a bad value is an error that names the variable */
  char idx[16];
  snprintf(idx, sizeof idx, "%d", chosen);
  setenv("ICL_DEVICE", idx, 1);
  CHECK(icl_vk_list_devices(infos, 16, &n, &chosen, &err) == ICL_OK && chosen == atoi(idx));
  setenv("ICL_DEVICE", d->name, 1);
  CHECK(icl_vk_list_devices(infos, 16, &n, &chosen, &err) == ICL_OK && chosen == atoi(idx));
  setenv("ICL_DEVICE", "no such device", 1);
  icl_backend *be = NULL;
  CHECK(icl_vk_backend_new(-1, &be, &err) == ICL_EINVAL && be == NULL && strstr(err.msg, "ICL_DEVICE"));
  unsetenv("ICL_DEVICE");
}

/* Which kernels a device gets (icl devices prints it): the family by device type, the query-block attention's tiles
 * shrinking to the device's shared memory (4 bytes x (BQ hd + BK (hd + 1) + BQ BK + 3 BQ)), and ICL_VK_ATTN. */
static void test_kernel_paths(void) {
  icl_device_info d = {.type = "discrete", .max_shared = 49152, .max_wg_invocations = 1024};
  char buf[1024];
  uint32_t bq = 0, bk = 0;
  unsetenv("ICL_VK_SHAPE");
  unsetenv("ICL_VK_ATTN");
  CHECK(vk_flash_tiles(&d, 256, &bq, &bk) && bq == 16 && bk == 16); /* 32 keys: 51,520 bytes > 48 KiB */
  CHECK(vk_flash_tiles(&d, 64, &bq, &bk) && bq == 16 && bk == 32);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "GPU-shaped") && strstr(buf, "hd 256: 16 x 16") && strstr(buf, "hd 64: 16 x 32"), "%s", buf);
  d.max_shared = 16384; /* Vulkan's minimum: hd 256 fits 4 queries x 8 keys (12,496 bytes) */
  CHECK(vk_flash_tiles(&d, 256, &bq, &bk) && bq == 4 && bk == 8);
  d.max_shared = 8192;
  CHECK(!vk_flash_tiles(&d, 256, &bq, &bk));
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "hd 256: per query"), "%s", buf);
  d.max_shared = 49152, d.max_wg_invocations = 64;
  CHECK(!vk_flash_tiles(&d, 64, &bq, &bk));
  d.max_wg_invocations = 1024;
  setenv("ICL_VK_ATTN", "legacy", 1);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "ICL_VK_ATTN=legacy") && !strstr(buf, "attention_flash"), "%s", buf);
  unsetenv("ICL_VK_ATTN");
  d.type = "cpu";
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "CPU-shaped") && strstr(buf, "attention_cpu.comp"), "%s", buf);
  setenv("ICL_VK_SHAPE", "gpu", 1);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "GPU-shaped") && strstr(buf, "attention_flash"), "%s", buf);
  unsetenv("ICL_VK_SHAPE");
}

/* The several-token matmul path at FAST precision (ICL_VK_MATMUL), from the properties alone: intdot by default
 * on GPU-shaped devices with integer dots, tiled on the CPU-shaped family unless asked; refusals name the
 * variable, the value and what the device offers. */
static void test_matmul_paths(void) {
  icl_device_info d = {.name = "dev", .type = "discrete", .max_shared = 49152, .max_wg_invocations = 1024};
  icl_error err;
  char buf[2048];
  int path = -1;
  unsetenv("ICL_VK_SHAPE");
  unsetenv("ICL_VK_MATMUL");
  CHECK(vk_matmul_path_for(&d, NULL, &path, &err) == ICL_OK && path == VK_MM_TILED);
  CHECK(vk_matmul_path_for(&d, "intdot", &path, &err) == ICL_EINVAL && strstr(err.msg, "ICL_VK_MATMUL=intdot") &&
        strstr(err.msg, "offers tiled") && !strstr(err.msg, "offers tiled,"));
  d.int_dot = 1;
  CHECK(vk_matmul_path_for(&d, "", &path, &err) == ICL_OK && path == VK_MM_INTDOT);
  CHECK(vk_matmul_path_for(&d, "tiled", &path, &err) == ICL_OK && path == VK_MM_TILED);
  CHECK(vk_matmul_path_for(&d, "coopmat", &path, &err) == ICL_EINVAL && strstr(err.msg, "ICL_VK_MATMUL=coopmat") &&
        strstr(err.msg, "offers tiled, intdot"));
  CHECK(vk_matmul_path_for(&d, "int8", &path, &err) == ICL_EINVAL && strstr(err.msg, "ICL_VK_MATMUL='int8'") &&
        strstr(err.msg, "offers tiled, intdot"));
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "FAST precision: intdot") && strstr(buf, "(EXACT precision): shared-memory tiles"), "%s", buf);
  setenv("ICL_VK_MATMUL", "int8", 1);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "FAST precision: error: vulkan: ICL_VK_MATMUL='int8'"), "%s", buf);
  unsetenv("ICL_VK_MATMUL");
  d.type = "cpu";
  CHECK(vk_matmul_path_for(&d, NULL, &path, &err) == ICL_OK && path == VK_MM_TILED);
  CHECK(vk_matmul_path_for(&d, "intdot", &path, &err) == ICL_OK && path == VK_MM_INTDOT);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  CHECKF(strstr(buf, "FAST precision: tiled, as EXACT (matmul_cpu.comp"), "%s", buf);
  CHECK(vk_intdot_type(ICL_TYPE_Q4_0) && vk_intdot_type(ICL_TYPE_Q8_0) && vk_intdot_type(ICL_TYPE_Q4_K) &&
        vk_intdot_type(ICL_TYPE_Q6_K) && !vk_intdot_type(ICL_TYPE_Q2_K) &&
        !vk_intdot_type(ICL_TYPE_F16));
  /* cooperative matrices: a shape dividing the 32 x 32 quarter tile, 16 x 16 x 16 first; f16, the memory model and
   * 32 KiB of shared memory needed; the default where the build has the kernel */
  uint32_t sh[3] = {0};
  d.type = "discrete", d.subgroup_size = 32, d.fp16 = 1, d.memory_model = 1, d.n_coopmat = 3;
  const uint32_t shapes[3][3] = {{12, 12, 12}, {8, 8, 8}, {16, 16, 16}};
  memcpy(d.coopmat, shapes, sizeof shapes);
  CHECK(vk_coopmat_shape(&d, sh) && sh[0] == 16 && sh[1] == 16 && sh[2] == 16);
  d.n_coopmat = 2;
  CHECK(vk_coopmat_shape(&d, sh) && sh[0] == 8 && sh[2] == 8);
  d.n_coopmat = 1;
  CHECK(!vk_coopmat_shape(&d, sh));
  d.n_coopmat = 3, d.memory_model = 0;
  CHECK(!vk_coopmat_shape(&d, sh));
  d.memory_model = 1, d.max_shared = 16384;
  CHECK(!vk_coopmat_shape(&d, sh));
  d.max_shared = 49152;
  CHECK(vk_matmul_path_for(&d, NULL, &path, &err) == ICL_OK && path == VK_MM_INTDOT); /* coopmat only when asked */
  int rc = vk_matmul_path_for(&d, "coopmat", &path, &err);
  CHECKF(vk_coopmat_built() ? rc == ICL_OK && path == VK_MM_COOPMAT
                            : rc == ICL_EINVAL && strstr(err.msg, "no cooperative-matrix kernel"), "%s", err.msg);
  setenv("ICL_VK_MATMUL", "coopmat", 1);
  icl_vk_kernel_paths(&d, buf, sizeof buf);
  unsetenv("ICL_VK_MATMUL");
  CHECKF(strstr(buf, vk_coopmat_built() ? "FAST precision: coopmat: f16 x f16 -> f32 cooperative matrices 16 x 16 x 16"
                                        : "cooperative matrices: listed, kernel not built"), "%s", buf);
}

/* ICL_DEVICE=gpu:N (the N-th GPU in PCI order, CPU devices skipped, devices without a PCI address last) and
 * GPU-<uuid>, on a made-up node whose Vulkan order differs from its PCI order. */
static void test_choice_forms(void) {
  icl_device_info d[4] = {
      {.index = 0, .type = "discrete", .pci = "0000:c1:00.0", .usable = 1, .uuid = {0x8a, 0x1b, [15] = 0x55}},
      {.index = 1, .type = "cpu", .pci = "", .usable = 1},
      {.index = 2, .type = "discrete", .pci = "0000:41:00.0", .usable = 1, .uuid = {0x01, [15] = 0x02}},
      {.index = 3, .type = "virtual", .pci = "", .usable = 1}};
  snprintf(d[0].name, sizeof d[0].name, "GPU A");
  snprintf(d[1].name, sizeof d[1].name, "llvmpipe");
  snprintf(d[2].name, sizeof d[2].name, "GPU B");
  snprintf(d[3].name, sizeof d[3].name, "virtio");
  static const struct { const char *env; int want; } cases[] = {
      {"gpu:0", 2}, {"gpu:1", 0}, {"gpu:2", 3}, {"1", 1}, {"B", 2},
      {"GPU-8a1b0000-0000-0000-0000-000000000055", 0}, {"gpu-8A1B0000-0000-0000-0000-000000000055", -1},
      {"GPU-01000000000000000000000000000002", 2}};
  icl_error err;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int chosen = -7;
    setenv("ICL_DEVICE", cases[i].env, 1);
    int rc = vk_physdev_choose(d, 4, -1, &chosen, &err);
    if (cases[i].want >= 0) CHECKF(rc == ICL_OK && chosen == cases[i].want, "ICL_DEVICE=%s chose %d, expected %d",
                                   cases[i].env, chosen, cases[i].want);
    else CHECKF(rc == ICL_EINVAL, "ICL_DEVICE=%s: expected no match (name substrings are case-sensitive)", cases[i].env);
  }
  static const char *bad[] = {"gpu:3", "gpu:", "gpu:-1", "gpu:1x", "GPU-8a1b", "GPU-zz"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int chosen = -7;
    setenv("ICL_DEVICE", bad[i], 1);
    CHECKF(vk_physdev_choose(d, 4, -1, &chosen, &err) == ICL_EINVAL && strstr(err.msg, bad[i]),
           "ICL_DEVICE=%s: an error naming it (%s)", bad[i], err.msg);
  }
  unsetenv("ICL_DEVICE");
}

/* In a child: a buffer of size 0 is invalid usage (VUID-VkBufferCreateInfo-size-00912). */
static void test_validation_counts(void) {
  const char *v = getenv("ICL_VALIDATION");
  if (!v || strcmp(v, "1") != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    icl_backend *be;
    icl_error err;
    if (icl_vk_backend_new(-1, &be, &err)) _exit(3);
    vk_ctx *c = vk_of(be);
    if (!c->inst.validation) _exit(4); /* layer not installed: the instance warned already */
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 0,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
    VkBuffer b = VK_NULL_HANDLE;
    fprintf(stderr, "(a validation error is expected next)\n");
    if (vkCreateBuffer(c->device, &bi, NULL, &b) == VK_SUCCESS && b) vkDestroyBuffer(c->device, b, NULL);
    int n = icl_vk_validation_messages();
    be->ops->destroy(be);
    _exit(n >= 1 ? 0 : 5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECKF(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 4),
         "validation messages are not counted (child status %d)", status);
}

static void test_roundtrip(icl_backend *be, size_t size, size_t off) {
  icl_error err;
  icl_buf *b;
  CHECK(be->ops->buf_alloc(be, size, ICL_BUF_ACT, &b, &err) == ICL_OK);
  unsigned char *src = vt_xmalloc(size), *dst = vt_xmalloc(size);
  for (size_t i = 0; i < size; i++) src[i] = (unsigned char)(i * 131 + 7);
  CHECK(be->ops->write(be, b, 0, src, size, &err) == ICL_OK);
  CHECK(be->ops->write(be, b, off, src, size - off, &err) == ICL_OK); /* overlapping, shifted */
  memset(dst, 0, size);
  CHECK(be->ops->read(be, b, 0, dst, size, &err) == ICL_OK);
  CHECKF(memcmp(dst, src, off) == 0 && memcmp(dst + off, src, size - off) == 0, "round trip of %zu bytes", size);
  CHECK(be->ops->write(be, b, size - 1, src, 2, &err) == ICL_EINVAL); /* out of bounds */
  be->ops->buf_free(be, b);
  free(src), free(dst);
}

/* x += b fifty times in place, then y = x * 2 and x = 0 (a write after y's read): every step
 * depends on the previous one, so a missing barrier shows up as a wrong sum. */
static void test_chain(icl_backend *be) {
  icl_error err;
  float *x, *b;
  vt xv = vt_rand(577, 3, 1, 1, -1, 1, &x), bv = vt_rand(577, 1, 1, 2, -1, 1, &b);
  vt yv = vt_new(ICL_TYPE_F32, 577, 3, 1, 4);
  for (int i = 0; i < 50; i++) CHECK(be->ops->add(be, &xv.dt, &bv.dt, &xv.dt, &err) == ICL_OK);
  CHECK(be->ops->scale(be, &xv.dt, 2.0f, &yv.dt, &err) == ICL_OK);
  CHECK(be->ops->fill2d(be, &xv.dt, 0, 577, 3, 577, 0.0f, &err) == ICL_OK);
  float *ref = vt_xmalloc(577 * 3 * 4), *zero = calloc(577 * 3, 4);
  for (int r = 0; r < 3; r++)
    for (int i = 0; i < 577; i++) {
      float v = x[r * 577 + i];
      for (int k = 0; k < 50; k++) v += b[i];
      ref[r * 577 + i] = 2 * v;
    }
  vt_expect("chain: 50 x add, scale", &yv, ref, 1e-12);
  /* host write to a buffer that recorded work still reads: the write must wait for it */
  CHECK(be->ops->scale(be, &bv.dt, 3.0f, &yv.dt, &err) == ICL_OK);
  vt_upload(&bv, zero);
  for (int i = 0; i < 577; i++) ref[i] = 3 * b[i];
  float got[577];
  CHECK(be->ops->read(be, yv.dt.buf, yv.pre, got, sizeof got, &err) == ICL_OK);
  CHECK(icl_nmse(ref, got, 577) < 1e-14);
  vt_expect("chain: fill after read", &xv, zero, 0);
  vt_free(&xv), vt_free(&bv), vt_free(&yv);
  free(x), free(b), free(ref), free(zero);
}

/* More dispatches in one batch than a descriptor pool holds (and, with ICL_PROFILE=1, than the
 * query pool times). */
static void test_many_dispatches(icl_backend *be, int n) {
  icl_error err;
  float *x;
  vt xv = vt_rand(33, 1, 1, 3, -1, 1, &x);
  for (int i = 0; i < n; i++) CHECK(be->ops->scale(be, &xv.dt, i % 2 ? 2.0f : 0.5f, &xv.dt, &err) == ICL_OK);
  vt_expect("many dispatches", &xv, x, 1e-14);
  vt_free(&xv);
  free(x);
}

/* A matmul and get_rows through the staging path (device-local memory, copies through a host
 * buffer in 32 MiB pieces). */
static void test_staging(void) {
  setenv("ICL_VK_STAGING", "1", 1);
  icl_backend *saved = vt_be;
  vt_be = NULL;
  icl_backend *be = vt_backend();
  test_roundtrip(be, (size_t)40 << 20, 12);
  void *raw;
  float *x, ref[96 * 2];
  vt w = vt_weights(ICL_TYPE_Q4_1, 640, 96, 4, &raw), xv = vt_rand(640, 2, 1, 5, -1, 1, &x);
  vt y = vt_new(ICL_TYPE_F32, 96, 2, 1, 4);
  icl_error err;
  CHECK(be->ops->matmul(be, &w.dt, &xv.dt, &y.dt, &err) == ICL_OK);
  icl_ref_matmul(ICL_TYPE_Q4_1, raw, 640, 96, x, 2, ref);
  vt_expect("staging path: matmul Q4_1", &y, ref, 1e-9);
  vt_free(&w), vt_free(&xv), vt_free(&y);
  free(raw), free(x);
  be->ops->destroy(be);
  vt_be = saved;
  unsetenv("ICL_VK_STAGING");
}

static void test_profile(void) {
  setenv("ICL_PROFILE", "1", 1);
  icl_backend *saved = vt_be;
  vt_be = NULL;
  icl_backend *be = vt_backend();
  test_many_dispatches(be, 4500); /* beyond 4096 timed dispatches per batch */
  test_chain(be);
  be->ops->destroy(be); /* prints the per-op table on stderr */
  vt_be = saved;
  unsetenv("ICL_PROFILE");
}

int main(void) {
  test_validation_counts(); /* first: forks before this process touches Vulkan */
  test_listing();
  test_kernel_paths();
  test_matmul_paths();
  test_choice_forms();
  icl_backend *be = vt_backend();
  test_roundtrip(be, 1, 0);
  test_roundtrip(be, 4099, 6);
  test_chain(be);
  test_many_dispatches(be, 1200);
  test_staging();
  test_profile();
  return vt_finish();
}
