/* The cooperative-matrix matmul (ICL_VK_MATMUL=coopmat, FAST precision only): matmul_coopmat.comp per weight row
 * range, 64 x 64 output tiles, f16 operands, f32 accumulation. */
#include "vk_ops.h"

int vk_matmul_coopmat(vk_ctx *c, const icl_dt *w, const icl_dt *x, const icl_dt *y, int64_t t0, int64_t t1,
                      int64_t rstep, uint32_t acc, icl_error *err) {
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), n = t1 - t0;
  size_t rb = icl_type_row_bytes(w->type, cols);
  vk_kernel k = {.shader = vk_typed_shader("matmul_coopmat", w->type), .n_bindings = 3, .push_size = sizeof(matmul_pc),
                 .n_spec = 5, .spec = {4 * c->info.subgroup_size, c->coop[0], c->coop[1], c->coop[2], acc},
                 .full_subgroups = 1};
  vk_binding b[3];
  uint32_t w_off, x_rem, y_rem;
  int rc = ICL_OK;
  for (int64_t r0 = 0; r0 < rows && !rc; r0 += rstep) {
    int64_t r1 = r0 + rstep < rows ? r0 + rstep : rows;
    rc = vk_bind(c, w->buf, w->offset + (size_t)r0 * rb, (size_t)(r1 - r0) * rb, 0, &b[0], &w_off, err);
    if (!rc)
      rc = vk_bind(c, x->buf, x->offset + (size_t)(t0 * cols) * 4, (size_t)(n * cols) * 4, 0, &b[1], &x_rem, err);
    if (!rc)
      rc = vk_bind(c, y->buf, y->offset + (size_t)(t0 * rows) * 4, (size_t)(n * rows) * 4, 1, &b[2], &y_rem, err);
    if (rc) break;
    /* the bytes this part writes, for barrier tracking: rows [r0, r1) of each of its columns */
    b[2].lo = y->offset + (size_t)(t0 * rows + r0) * 4;
    b[2].hi = y->offset + (size_t)((t1 - 1) * rows + r1) * 4;
    matmul_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, (uint32_t)n, w_off, x_rem / 4, y_rem / 4,
                    (uint32_t)rows, 0};
    rc = vk_dispatch(c, &k, b, 3, &pc, sizeof pc, (uint32_t)((r1 - r0 + 63) / 64), (uint32_t)((n + 63) / 64), 1, err);
  }
  return rc;
}
