/* The matmul paths for CPU devices (lavapipe): matvec_cpu.comp for n = 1 and matmul_cpu.comp
 * for n > 1, both reading x from uniform buffers, which llvmpipe loads far more cheaply than
 * storage buffers when every invocation of a subgroup reads the same address. */
#include "vk_ops.h"

static uint64_t ubo_max(const vk_ctx *c) {
  uint64_t m = c->info.max_uniform_range;
  return m < VK_UBO_VEC4S * 16 ? m : VK_UBO_VEC4S * 16;
}

typedef struct matvec_cpu_pc { /* matvec_cpu.comp */
  uint32_t cols, rows, row0;
  uint32_t w_off, x_off, y_off;
  uint32_t x_len, pad;
} matvec_cpu_pc;
_Static_assert(sizeof(matvec_cpu_pc) <= VK_MAX_PUSH, "push constants");

/* CPU devices: x in a uniform buffer when it fits (see matvec_cpu.comp). */
int vk_matvec_cpu_fits(const vk_ctx *c, int64_t cols) {
  return vk_cpu_shape(c) && (uint64_t)cols * 4 + 64 <= ubo_max(c);
}

int vk_matvec_cpu(vk_ctx *c, const icl_dt *w, const icl_dt *x, vk_binding *b, uint32_t w_off, uint32_t y_rem,
                  int64_t r0, int64_t r1, int64_t t0, uint32_t acc, icl_error *err) {
  int64_t cols = w->ne[0];
  uint32_t x_rem, nr = 8, wg = 8, gx, gy;
  int rc = vk_bind_ubo(c, x->buf, x->offset + (size_t)(t0 * cols) * 4, (size_t)cols * 4, &b[1], &x_rem, err);
  if (rc) return rc;
  matvec_cpu_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, w_off, x_rem / 4, y_rem / 4,
                      (uint32_t)(b[1].range / 16), 0};
  vk_kernel k = {.shader = vk_typed_shader("matvec_cpu", w->type), .n_bindings = 3, .ubo_mask = 2,
                 .push_size = sizeof pc, .n_spec = 4, .spec = {wg, nr, VK_UBO_VEC4S, acc}};
  vk_grid(c, ((uint64_t)(r1 - r0) + wg * nr - 1) / (wg * nr), &gx, &gy);
  return vk_dispatch(c, &k, b, 3, &pc, sizeof pc, gx, gy, 1, err);
}

/* CPU devices, n > 1: windows of x columns as uniform buffers (see matmul_cpu.comp). */
int64_t vk_matmul_cpu_window(const vk_ctx *c, int64_t cols) {
  if (!vk_cpu_shape(c)) return 0;
  return (int64_t)((ubo_max(c) - 64) / ((uint64_t)cols * 4));
}

int vk_matmul_cpu(vk_ctx *c, const icl_dt *w, const icl_dt *x, vk_binding *b, uint32_t w_off, uint32_t y_rem,
                  int64_t r0, int64_t r1, int64_t t0, int64_t t1, uint32_t acc, icl_error *err) {
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), win = vk_matmul_cpu_window(c, cols);
  uint32_t tn = win < 8 ? (uint32_t)win : 8, tm = 8, wg = 8; /* measured best on lavapipe */
  win = win / tn * tn;
  int rc = ICL_OK;
  size_t ylo = b[2].lo;
  for (int64_t tw = t0; tw < t1 && !rc; tw += win) {
    int64_t nw = t1 - tw < win ? t1 - tw : win;
    uint32_t x_rem;
    rc = vk_bind_ubo(c, x->buf, x->offset + (size_t)(tw * cols) * 4, (size_t)(nw * cols) * 4, &b[1], &x_rem, err);
    if (rc) break;
    b[2].lo = ylo + (size_t)((tw - t0) * rows) * 4;
    b[2].hi = b[2].lo + (size_t)((nw - 1) * rows + (r1 - r0)) * 4;
    matmul_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, (uint32_t)nw, w_off, x_rem / 4,
                    y_rem / 4 + (uint32_t)((tw - t0) * rows), (uint32_t)rows, (uint32_t)(b[1].range / 16)};
    vk_kernel k = {.shader = vk_typed_shader("matmul_cpu", w->type), .n_bindings = 3, .ubo_mask = 2,
                   .push_size = sizeof pc, .n_spec = 5, .spec = {wg, tm, tn, VK_UBO_VEC4S, acc}};
    uint32_t gx = (uint32_t)((r1 - r0 + wg * tm - 1) / (wg * tm)), gy = (uint32_t)((nw + tn - 1) / tn);
    rc = vk_dispatch(c, &k, b, 3, &pc, sizeof pc, gx, gy, 1, err);
  }
  return rc;
}

