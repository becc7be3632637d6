/* The device's measured ceilings for `icl bench`: streaming bandwidth and peak multiply-add rate,
 * each from a kernel written for the purpose (shaders/bench_bw.comp, bench_fma.comp). */
#include <time.h>

#include "vk_ops.h"
#include "vk.h"

typedef struct bw_pc { uint32_t per, threads; } bw_pc;
typedef struct fma_pc { uint32_t iters, threads; float m, c; } fma_pc;
_Static_assert(sizeof(bw_pc) <= VK_MAX_PUSH && sizeof(fma_pc) <= VK_MAX_PUSH, "push constants");

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of `reps` timed runs of one dispatch (seconds); the first, untimed run warms up. */
static int time_dispatch(vk_ctx *c, const vk_kernel *k, const vk_binding *b, uint32_t nb, const void *pc,
                         uint32_t gx, int reps, double *best, icl_error *err) {
  uint32_t gy = 1;
  int rc = ICL_OK;
  *best = 1e30;
  for (int r = 0; r <= reps && !rc; r++) {
    double t0 = now_s();
    rc = vk_dispatch(c, k, b, nb, pc, k->push_size, gx, gy, 1, err);
    if (!rc) rc = vk_flush(c, err);
    if (r > 0 && now_s() - t0 < *best) *best = now_s() - t0;
  }
  return rc;
}

static int measure_bw(vk_ctx *c, size_t bytes, int contig, double *gbps, icl_error *err) {
  icl_buf *src = NULL, *out = NULL;
  uint32_t wg = c->wg, threads = vk_cpu_shape(c) ? 4096 : 65536, per = (uint32_t)(bytes / 16 / threads);
  int rc = vk_buf_create(c, (size_t)per * threads * 16, ICL_BUF_ACT, &src, err);
  if (!rc) rc = vk_buf_create(c, (size_t)threads * 4, ICL_BUF_ACT, &out, err);
  vk_binding b[2];
  uint32_t r0, r1;
  if (!rc) rc = vk_bind(c, src, 0, (size_t)per * threads * 16, 0, &b[0], &r0, err);
  if (!rc) rc = vk_bind(c, out, 0, (size_t)threads * 4, 1, &b[1], &r1, err);
  bw_pc pc = {per, threads};
  vk_kernel k = {
      .shader = "bench_bw", .n_bindings = 2, .push_size = sizeof pc, .n_spec = 2, .spec = {wg, (uint32_t)contig}};
  double t = 1;
  if (!rc) rc = time_dispatch(c, &k, b, 2, &pc, threads / wg, 3, &t, err);
  *gbps = (double)per * threads * 16 / t * 1e-9;
  vk_buf_destroy(c, src);
  vk_buf_destroy(c, out);
  return rc;
}

static int measure_fma(vk_ctx *c, int quick, double *gflops, icl_error *err) {
  icl_buf *out = NULL;
  uint32_t wg = c->wg, threads = vk_cpu_shape(c) ? 2048 : 1u << 20, iters = quick ? 2000 : 8000;
  int rc = vk_buf_create(c, (size_t)threads * 4, ICL_BUF_ACT, &out, err);
  vk_binding b[1];
  uint32_t r0;
  if (!rc) rc = vk_bind(c, out, 0, (size_t)threads * 4, 1, &b[0], &r0, err);
  fma_pc pc = {iters, threads, 0.999f, 1e-4f};
  vk_kernel k = {.shader = "bench_fma", .n_bindings = 1, .push_size = sizeof pc, .n_spec = 1, .spec = {wg}};
  double t = 1;
  if (!rc) rc = time_dispatch(c, &k, b, 1, &pc, threads / wg, 3, &t, err);
  *gflops = (double)threads * iters * 64 / t * 1e-9;
  vk_buf_destroy(c, out);
  return rc;
}

int icl_vk_ceilings(icl_backend *be, int quick, icl_ceilings *out, icl_error *err) {
  vk_ctx *c = vk_of(be);
  size_t bytes = (size_t)(quick ? 64 : 256) << 20;
  if (bytes > vk_bind_max(c)) bytes = vk_bind_max(c) / (1 << 20) * (1 << 20); /* one binding */
  int rc = vk_flush(c, err);
  if (!rc) rc = measure_bw(c, bytes, 1, &out->gbps_contig, err);
  if (!rc) rc = measure_bw(c, bytes, 0, &out->gbps_strided, err);
  if (!rc) rc = measure_fma(c, quick, &out->gflops, err);
  out->gbps = out->gbps_contig > out->gbps_strided ? out->gbps_contig : out->gbps_strided;
  return rc;
}
