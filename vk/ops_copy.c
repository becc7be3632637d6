/* Data movement: f32/f16 conversion, 2-D strided copy and fill (hooks: capture, ablation). */
#include "vk_ops.h"

typedef struct convert_pc {
  uint32_t n, x_off, y_off, pad; /* offsets in elements of each side's type */
} convert_pc;
_Static_assert(sizeof(convert_pc) <= VK_MAX_PUSH, "push constants");

typedef struct copy2d_pc {
  uint32_t rows, cols, src_off, src_stride, dst_off, dst_stride;
} copy2d_pc;
_Static_assert(sizeof(copy2d_pc) <= VK_MAX_PUSH, "push constants");

typedef struct fill2d_pc {
  uint32_t rows, cols, off, stride;
  float value;
} fill2d_pc;
_Static_assert(sizeof(fill2d_pc) <= VK_MAX_PUSH, "push constants");

static const char *convert_shader(uint32_t from, uint32_t to) {
  if (from == ICL_TYPE_F32) return to == ICL_TYPE_F32 ? "convert" : "convert_f32_f16";
  return to == ICL_TYPE_F32 ? "convert_f16_f32" : "convert_f16_f16";
}

static size_t elem_size(uint32_t t) { return t == ICL_TYPE_F16 ? 2 : 4; }

int vk_op_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t n = icl_dt_nelem(x);
  if ((x->type != ICL_TYPE_F32 && x->type != ICL_TYPE_F16) || (y->type != ICL_TYPE_F32 && y->type != ICL_TYPE_F16))
    return icl_error_set(err, ICL_EUNSUPPORTED, "vulkan: convert %s -> %s", icl_type_name(x->type),
                         icl_type_name(y->type));
  vk_binding b[2];
  convert_pc pc = {(uint32_t)n, 0, 0, 0};
  int rc = vk_check_u32(n, "convert size", err);
  if (!rc) rc = vk_bind(c, x->buf, x->offset, (size_t)n * elem_size(x->type), 0, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind(c, y->buf, y->offset, (size_t)n * elem_size(y->type), 1, &b[1], &pc.y_off, err);
  if (rc) return rc;
  pc.x_off /= (uint32_t)elem_size(x->type);
  pc.y_off /= (uint32_t)elem_size(y->type);
  vk_kernel k = {.shader = convert_shader(x->type, y->type),
                 .n_bindings = 2,
                 .push_size = sizeof pc,
                 .n_spec = 2,
                 .spec = {c->wg, vk_elt_per(c)}};
  uint32_t gx, gy;
  vk_elt_grid(c, (uint64_t)n, &gx, &gy);
  return vk_dispatch(c, &k, b, 2, &pc, sizeof pc, gx, gy, 1, err);
}

/* Binds the elements [off, off + (rows-1)*stride + cols) of an f32 view; *word gets off's word
 * index inside the binding. Read rows may overlap (stride 0 repeats a row); written rows may not. */
static int bind_span(vk_ctx *c, const icl_dt *t, int64_t off, int64_t stride, int64_t rows, int64_t cols, int write,
                     vk_binding *b, uint32_t *word, icl_error *err) {
  if (off < 0 || stride < 0 || (write && rows > 1 && stride < cols))
    return icl_error_set(err, ICL_EINVAL, "vulkan: 2-D view with offset %lld, stride %lld, %lld columns",
                         (long long)off, (long long)stride, (long long)cols);
  int64_t span = (rows - 1) * stride + cols;
  uint32_t rem;
  int rc = vk_bind(c, t->buf, t->offset + (size_t)off * 4, (size_t)span * 4, write, b, &rem, err);
  *word = rem / 4;
  return rc;
}

int vk_op_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
                 int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (rows <= 0 || cols <= 0) return ICL_OK;
  vk_binding b[2];
  copy2d_pc pc = {(uint32_t)rows, (uint32_t)cols, 0, (uint32_t)src_stride, 0, (uint32_t)dst_stride};
  int rc = vk_check_u32(rows * cols, "copy2d size", err);
  if (!rc) rc = bind_span(c, src, src_off, src_stride, rows, cols, 0, &b[0], &pc.src_off, err);
  if (!rc) rc = bind_span(c, dst, dst_off, dst_stride, rows, cols, 1, &b[1], &pc.dst_off, err);
  if (rc) return rc;
  vk_kernel k = {
      .shader = "copy2d", .n_bindings = 2, .push_size = sizeof pc, .n_spec = 2, .spec = {c->wg, vk_elt_per(c)}};
  uint32_t gx, gy;
  vk_elt_grid(c, (uint64_t)(rows * cols), &gx, &gy);
  return vk_dispatch(c, &k, b, 2, &pc, sizeof pc, gx, gy, 1, err);
}

int vk_op_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                 float value, icl_error *err) {
  vk_ctx *c = vk_of(be);
  if (rows <= 0 || cols <= 0) return ICL_OK;
  vk_binding b[1];
  fill2d_pc pc = {(uint32_t)rows, (uint32_t)cols, 0, (uint32_t)stride, value};
  int rc = vk_check_u32(rows * cols, "fill2d size", err);
  if (!rc) rc = bind_span(c, dst, off, stride, rows, cols, 1, &b[0], &pc.off, err);
  if (rc) return rc;
  vk_kernel k = {
      .shader = "fill2d", .n_bindings = 1, .push_size = sizeof pc, .n_spec = 2, .spec = {c->wg, vk_elt_per(c)}};
  uint32_t gx, gy;
  vk_elt_grid(c, (uint64_t)(rows * cols), &gx, &gy);
  return vk_dispatch(c, &k, b, 1, &pc, sizeof pc, gx, gy, 1, err);
}
