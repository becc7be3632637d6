/* get_rows and matmul: the ops that read weight matrices, which may be larger than
 * maxStorageBufferRange (Gemma 3's 170 MiB token_embd on lavapipe's 128 MiB). Such matrices
 * are bound as several row ranges, one dispatch each, transparently to the caller. */
#include "vk_ops.h"

typedef struct get_rows_pc {
  uint32_t cols, n_ids, row_lo, row_hi;
  uint32_t w_off, ids_off, o_off, pad;
} get_rows_pc;
_Static_assert(sizeof(get_rows_pc) <= VK_MAX_PUSH, "push constants");

typedef struct matvec_pc { /* matvec.comp */
  uint32_t cols, rows, row0;
  uint32_t w_off, x_off, y_off;
  uint32_t y_stride, pad;
} matvec_pc;
_Static_assert(sizeof(matvec_pc) <= VK_MAX_PUSH, "push constants");

/* Rows of a weight matrix that fit one binding. */
static int64_t rows_per_range(const vk_ctx *c, size_t row_bytes) {
  int64_t r = (int64_t)(vk_bind_max(c) / row_bytes);
  return r > 0 ? r : 1;
}

int vk_op_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), n = icl_dt_nelem(ids);
  size_t rb = icl_type_row_bytes(w->type, cols);
  vk_binding b[3];
  get_rows_pc pc = {0};
  int rc = vk_check_u32(cols * n, "get_rows output size", err);
  if (!rc) rc = vk_bind_view(c, ids, 0, &b[1], &pc.ids_off, err);
  if (!rc) rc = vk_bind_view(c, out, 1, &b[2], &pc.o_off, err);
  if (rc || n == 0) return rc;
  vk_kernel k = {.shader = vk_typed_shader("get_rows", w->type),
                 .n_bindings = 3,
                 .push_size = sizeof pc,
                 .n_spec = 1,
                 .spec = {c->wg}};
  int64_t step = rows_per_range(c, rb), nch = (cols + 31) / 32;
  uint32_t gx, gy;
  vk_grid(c, (uint64_t)(nch * n + c->wg - 1) / c->wg, &gx, &gy);
  for (int64_t r0 = 0; r0 < rows && !rc; r0 += step) {
    int64_t r1 = r0 + step < rows ? r0 + step : rows;
    rc = vk_bind(c, w->buf, w->offset + (size_t)r0 * rb, (size_t)(r1 - r0) * rb, 0, &b[0], &pc.w_off, err);
    pc.cols = (uint32_t)cols;
    pc.n_ids = (uint32_t)n;
    pc.row_lo = (uint32_t)r0;
    pc.row_hi = (uint32_t)r1;
    if (!rc) rc = vk_dispatch(c, &k, b, 3, &pc, sizeof pc, gx, gy, 1, err);
  }
  return rc;
}

void vk_matvec_shape(const vk_ctx *c, uint32_t *wg, uint32_t *tpr, uint32_t *nr) {
  if (vk_cpu_shape(c)) {
    *wg = 8, *tpr = 1, *nr = 4; /* one SIMD-wide subgroup of invocations, each walking 4 whole rows */
  } else {
    *wg = 64, *tpr = 64, *nr = 2;
  }
}

static int matvec_range(vk_ctx *c, const icl_dt *w, vk_binding *b, matvec_pc *pc, int64_t nrows, int64_t n,
                        uint32_t acc, icl_error *err) {
  uint32_t wg, tpr, nr, gx, gy;
  vk_matvec_shape(c, &wg, &tpr, &nr);
  vk_kernel k = {.shader = vk_typed_shader("matvec", w->type),
                 .n_bindings = 3,
                 .push_size = sizeof *pc,
                 .n_spec = 4,
                 .spec = {wg, tpr, nr, acc}};
  uint64_t rows_per_group = (uint64_t)(wg / tpr) * nr;
  vk_grid(c, ((uint64_t)nrows + rows_per_group - 1) / rows_per_group, &gx, &gy);
  return vk_dispatch(c, &k, b, 3, pc, sizeof *pc, gx, gy, (uint32_t)n, err);
}

/* Tile configuration of matmul.comp: WG = (BM/TM) * (BN/TN). */
static void matmul_shape(const vk_ctx *c, int64_t n, uint32_t spec[6]) {
  (void)c;
  if (n <= 16) {
    const uint32_t s[5] = {64, 128, 16, 8, 4}; /* few columns: tall tiles */
    for (int i = 0; i < 5; i++) spec[i] = s[i];
  } else {
    const uint32_t s[5] = {64, 64, 64, 8, 8};
    for (int i = 0; i < 5; i++) spec[i] = s[i];
  }
}

static int matmul_range(vk_ctx *c, const icl_dt *w, vk_binding *b, matmul_pc *pc, int64_t nrows, int64_t n,
                        uint32_t acc, icl_error *err) {
  vk_kernel k = {
      .shader = vk_typed_shader("matmul", w->type), .n_bindings = 3, .push_size = sizeof *pc, .n_spec = 6, .spec = {0}};
  matmul_shape(c, n, k.spec);
  k.spec[5] = acc;
  uint32_t gx = (uint32_t)((nrows + k.spec[1] - 1) / k.spec[1]), gy = (uint32_t)((n + k.spec[2] - 1) / k.spec[2]);
  return vk_dispatch(c, &k, b, 3, pc, sizeof *pc, gx, gy, 1, err);
}

/* One dispatch: weight rows [r0, r1) times columns [t0, t1), written to y or (acc) added to it. */
static int matmul_part(vk_ctx *c, const icl_dt *w, const icl_dt *x, const icl_dt *y, int64_t r0, int64_t r1,
                       int64_t t0, int64_t t1, uint32_t acc, icl_error *err) {
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), n = t1 - t0;
  size_t rb = icl_type_row_bytes(w->type, cols);
  vk_binding b[3];
  uint32_t w_off, x_rem, y_rem;
  int rc = vk_bind(c, w->buf, w->offset + (size_t)r0 * rb, (size_t)(r1 - r0) * rb, 0, &b[0], &w_off, err);
  if (!rc) rc = vk_bind(c, x->buf, x->offset + (size_t)(t0 * cols) * 4, (size_t)(n * cols) * 4, 0, &b[1], &x_rem, err);
  if (!rc) rc = vk_bind(c, y->buf, y->offset + (size_t)(t0 * rows) * 4, (size_t)(n * rows) * 4, 1, &b[2], &y_rem, err);
  if (rc) return rc;
  /* the bytes this part writes, for barrier tracking: rows [r0, r1) of each of its columns */
  b[2].lo = y->offset + (size_t)(t0 * rows + r0) * 4;
  b[2].hi = y->offset + (size_t)((t1 - 1) * rows + r1) * 4;
  if (n == 1 && vk_matvec_cpu_fits(c, cols)) return vk_matvec_cpu(c, w, x, b, w_off, y_rem, r0, r1, t0, acc, err);
  if (n == 1) {
    matvec_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, w_off, x_rem / 4, y_rem / 4, (uint32_t)rows, 0};
    return matvec_range(c, w, b, &pc, r1 - r0, n, acc, err);
  }
  if (vk_matmul_cpu_window(c, cols) >= 1) return vk_matmul_cpu(c, w, x, b, w_off, y_rem, r0, r1, t0, t1, acc, err);
  matmul_pc pc = {(uint32_t)cols, (uint32_t)(r1 - r0), (uint32_t)r0, (uint32_t)n, w_off, x_rem / 4, y_rem / 4,
                  (uint32_t)rows, 0};
  return matmul_range(c, w, b, &pc, r1 - r0, n, acc, err);
}

static int matmul_any(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, uint32_t acc,
                      icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t cols = w->ne[0], rows = icl_dt_nrows(w), n = icl_dt_nrows(x);
  size_t rb = icl_type_row_bytes(w->type, cols);
  if (x->offset % 4 || y->offset % 4)
    return icl_error_set(err, ICL_EINVAL, "vulkan: matmul activations must be 4-byte aligned");
  /* columns per dispatch so that x and y bindings fit; rows per dispatch so that w fits */
  int64_t widest = (rows > cols ? rows : cols) * 4;
  int64_t tstep = (int64_t)(vk_bind_max(c) / (size_t)widest), rstep = rows_per_range(c, rb);
  int rc = tstep > 0 ? vk_check_u32(rows * (n < tstep ? n : tstep), "matmul output size", err)
                     : icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: a matmul column exceeds maxStorageBufferRange");
  /* FAST precision may take the integer-dot or cooperative-matrix path (ICL_VK_MATMUL; EXACT: the f32 kernels) */
  int fast = be->precision == ICL_PRECISION_FAST;
  int intdot = fast && c->mm_fast == VK_MM_INTDOT && vk_intdot_type(w->type);
  int coopmat = fast && c->mm_fast == VK_MM_COOPMAT;
  for (int64_t t0 = 0; t0 < n && !rc; t0 += tstep) {
    int64_t t1 = t0 + tstep < n ? t0 + tstep : n;
    if ((intdot || coopmat) && t1 - t0 > 1) {
      rc = intdot ? vk_matmul_intdot(c, w, x, y, t0, t1, rstep, acc, err)
                  : vk_matmul_coopmat(c, w, x, y, t0, t1, rstep, acc, err);
      continue;
    }
    for (int64_t r0 = 0; r0 < rows && !rc; r0 += rstep)
      rc = matmul_part(c, w, x, y, r0, r0 + rstep < rows ? r0 + rstep : rows, t0, t1, acc, err);
  }
  return rc;
}

int vk_op_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return matmul_any(be, w, x, y, 0, err);
}

int vk_op_matmul_add(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return matmul_any(be, w, x, y, 1, err);
}
