/* Row-wise ops: one workgroup per row (rms_norm, layer_norm, softmax, argmax, lse_select). */
#include "vk_ops.h"

typedef struct rms_norm_pc {
  uint32_t d, rows, has_w;
  float eps;
  uint32_t x_off, w_off, y_off, pad;
} rms_norm_pc;
_Static_assert(sizeof(rms_norm_pc) <= VK_MAX_PUSH, "push constants");

typedef struct layer_norm_pc {
  uint32_t d, rows, has_w, has_b;
  float eps;
  uint32_t x_off, w_off, b_off, y_off;
} layer_norm_pc;
_Static_assert(sizeof(layer_norm_pc) <= VK_MAX_PUSH, "push constants");

typedef struct row_pc { /* softmax.comp, argmax.comp */
  uint32_t d, rows, x_off, y_off;
} row_pc;
_Static_assert(sizeof(row_pc) <= VK_MAX_PUSH, "push constants");

/* Kernel of a row op: workgroup size and contiguous-per-invocation mode by device type. */
static vk_kernel row_kernel(const vk_ctx *c, const char *shader, uint32_t nb, uint32_t push) {
  vk_kernel k = {
      .shader = shader, .n_bindings = nb, .push_size = push, .n_spec = 2, .spec = {c->wg, vk_cpu_shape(c) ? 1u : 0u}};
  return k;
}

static int row_dispatch(vk_ctx *c, const char *shader, const vk_binding *b, uint32_t nb, const void *pc,
                        uint32_t push, int64_t rows, icl_error *err) {
  vk_kernel k = row_kernel(c, shader, nb, push);
  uint32_t gx, gy;
  vk_grid(c, (uint64_t)rows, &gx, &gy);
  return vk_dispatch(c, &k, b, nb, pc, push, gx, gy, 1, err);
}

/* Binds an optional f32 vector; without one, binds x again as an unused stand-in. */
static int bind_optional(vk_ctx *c, const icl_dt *v, const icl_dt *x, vk_binding *b, uint32_t *off, uint32_t *has,
                         icl_error *err) {
  *has = v != NULL;
  return vk_bind_view(c, v ? v : x, 0, b, off, err);
}

/* add 0: y = rms_norm(x, w); 1: y += it (rms_norm.comp's ADD) */
static int rms_norm_rec(vk_ctx *c, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, uint32_t add,
                        icl_error *err) {
  vk_binding b[3];
  rms_norm_pc pc = {(uint32_t)x->ne[0], (uint32_t)icl_dt_nrows(x), 0, eps, 0, 0, 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "rms_norm size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = bind_optional(c, w, x, &b[1], &pc.w_off, &pc.has_w, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[2], &pc.y_off, err);
  if (rc) return rc;
  vk_kernel k = row_kernel(c, "rms_norm", 3, sizeof pc);
  k.n_spec = 3, k.spec[2] = add;
  uint32_t gx, gy;
  vk_grid(c, (uint64_t)icl_dt_nrows(x), &gx, &gy);
  return vk_dispatch(c, &k, b, 3, &pc, sizeof pc, gx, gy, 1, err);
}

int vk_op_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err) {
  return rms_norm_rec(vk_of(be), x, w, eps, y, 0, err);
}

int vk_op_rms_norm_add(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err) {
  return rms_norm_rec(vk_of(be), x, w, eps, y, 1, err);
}

int vk_op_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *bias, float eps, const icl_dt *y,
                     icl_error *err) {
  vk_ctx *c = vk_of(be);
  vk_binding b[4];
  layer_norm_pc pc = {(uint32_t)x->ne[0], (uint32_t)icl_dt_nrows(x), 0, 0, eps, 0, 0, 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "layer_norm size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = bind_optional(c, w, x, &b[1], &pc.w_off, &pc.has_w, err);
  if (!rc) rc = bind_optional(c, bias, x, &b[2], &pc.b_off, &pc.has_b, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[3], &pc.y_off, err);
  if (!rc) rc = row_dispatch(c, "layer_norm", b, 4, &pc, sizeof pc, icl_dt_nrows(x), err);
  return rc;
}

int vk_op_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  vk_binding b[2];
  row_pc pc = {(uint32_t)x->ne[0], (uint32_t)icl_dt_nrows(x), 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "softmax size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[1], &pc.y_off, err);
  if (!rc) rc = row_dispatch(c, "softmax", b, 2, &pc, sizeof pc, icl_dt_nrows(x), err);
  return rc;
}

int vk_op_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err) {
  vk_ctx *c = vk_of(be);
  vk_binding b[2];
  row_pc pc = {(uint32_t)x->ne[0], (uint32_t)icl_dt_nrows(x), 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "argmax size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind_view(c, out, 1, &b[1], &pc.y_off, err);
  if (!rc) rc = row_dispatch(c, "argmax", b, 2, &pc, sizeof pc, icl_dt_nrows(x), err);
  return rc;
}

typedef struct lse_pc { /* lse_select.comp */
  uint32_t d, rows, k, x_off, ids_off, o_off;
} lse_pc;
_Static_assert(sizeof(lse_pc) <= VK_MAX_PUSH, "push constants");

int vk_op_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  vk_ctx *c = vk_of(be);
  vk_binding b[3];
  lse_pc pc = {(uint32_t)x->ne[0], (uint32_t)icl_dt_nrows(x), (uint32_t)icl_dt_nelem(ids), 0, 0, 0};
  int rc = vk_check_u32(icl_dt_nelem(x), "lse_select size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind_view(c, ids, 0, &b[1], &pc.ids_off, err);
  if (!rc) rc = vk_bind_view(c, out, 1, &b[2], &pc.o_off, err);
  if (!rc) rc = row_dispatch(c, "lse_select", b, 3, &pc, sizeof pc, icl_dt_nrows(x), err);
  return rc;
}
