/* The integer-dot matmul (ICL_VK_MATMUL=intdot, FAST precision only): activations quantized per 32-element block
 * by quantize_q8.comp into a scratch buffer the backend keeps, then matmul_intdot.comp per weight row range. */
#include "vk_ops.h"

typedef struct quantize_pc {
  uint32_t cols, n, x_off, q_off;
} quantize_pc;
_Static_assert(sizeof(quantize_pc) <= VK_MAX_PUSH, "push constants");

enum { Q8_BLOCK_BYTES = 40 }; /* 8 words of int8 codes, d, s */

/* The scratch buffer for quantized activations, at least size bytes (work recorded on a smaller one is flushed
 * before it is replaced). */
static int q8_scratch(vk_ctx *c, size_t size, icl_error *err) {
  if (c->q8 && c->q8_size >= size) return ICL_OK;
  int rc = c->q8 && c->recording ? vk_flush(c, err) : ICL_OK;
  if (rc) return rc;
  if (c->q8) vk_buf_destroy(c, c->q8);
  c->q8 = NULL, c->q8_size = 0;
  if ((rc = vk_buf_create(c, size, ICL_BUF_ACT, &c->q8, err))) return rc;
  c->q8_size = size;
  return ICL_OK;
}

static const char *intdot_shader(uint32_t t) {
  return t == ICL_TYPE_Q4_0 ? "matmul_intdot" : vk_typed_shader("matmul_intdot", t); /* plain name: Q4_0 */
}

int vk_matmul_intdot(vk_ctx *c, const icl_dt *w, const icl_dt *x, const icl_dt *y, int64_t t0, int64_t t1,
                     int64_t rstep, uint32_t acc, icl_error *err) {
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), n = t1 - t0, nb = cols / 32;
  size_t rb = icl_type_row_bytes(w->type, cols), qbytes = (size_t)(n * nb) * Q8_BLOCK_BYTES;
  int rc = q8_scratch(c, qbytes, err);
  if (rc) return rc;
  /* 1. quantize columns [t0, t1) */
  vk_binding b[3];
  uint32_t x_rem, q_rem, w_off, y_rem;
  rc = vk_bind(c, x->buf, x->offset + (size_t)(t0 * cols) * 4, (size_t)(n * cols) * 4, 0, &b[0], &x_rem, err);
  if (!rc) rc = vk_bind(c, c->q8, 0, qbytes, 1, &b[1], &q_rem, err);
  if (rc) return rc;
  quantize_pc qp = {(uint32_t)cols, (uint32_t)n, x_rem / 4, q_rem / 4};
  vk_kernel kq = {.shader = "quantize_q8", .n_bindings = 2, .push_size = sizeof qp, .n_spec = 1, .spec = {c->wg}};
  uint32_t gx, gy;
  vk_grid(c, ((uint64_t)(n * nb) + c->wg - 1) / c->wg, &gx, &gy);
  if ((rc = vk_dispatch(c, &kq, b, 2, &qp, sizeof qp, gx, gy, 1, err))) return rc;
  /* 2. the product, one dispatch per weight row range */
  vk_kernel k = {.shader = intdot_shader(w->type), .n_bindings = 3, .push_size = sizeof(matmul_pc), .n_spec = 6};
  const uint32_t tall[5] = {64, 128, 16, 8, 4}, square[5] = {64, 64, 64, 8, 8}; /* WG = (BM/TM) * (BN/TN) */
  for (int i = 0; i < 5; i++) k.spec[i] = n <= 16 ? tall[i] : square[i];
  k.spec[5] = acc;
  for (int64_t r0 = 0; r0 < rows && !rc; r0 += rstep) {
    int64_t r1 = r0 + rstep < rows ? r0 + rstep : rows;
    rc = vk_bind(c, w->buf, w->offset + (size_t)r0 * rb, (size_t)(r1 - r0) * rb, 0, &b[0], &w_off, err);
    if (!rc) rc = vk_bind(c, c->q8, 0, qbytes, 0, &b[1], &q_rem, err);
    if (!rc)
      rc = vk_bind(c, y->buf, y->offset + (size_t)(t0 * rows) * 4, (size_t)(n * rows) * 4, 1, &b[2], &y_rem, err);
    if (rc) break;
    /* the bytes this part writes, for barrier tracking: rows [r0, r1) of each of its columns */
    b[2].lo = y->offset + (size_t)(t0 * rows + r0) * 4;
    b[2].hi = y->offset + (size_t)((t1 - 1) * rows + r1) * 4;
    matmul_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, (uint32_t)n, w_off, q_rem / 4, y_rem / 4,
                    (uint32_t)rows, 0};
    uint32_t gm = (uint32_t)((r1 - r0 + k.spec[1] - 1) / k.spec[1]), gn = (uint32_t)((n + k.spec[2] - 1) / k.spec[2]);
    rc = vk_dispatch(c, &k, b, 3, &pc, sizeof pc, gm, gn, 1, err);
  }
  return rc;
}
