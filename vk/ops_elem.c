/* Elementwise ops: add, mul (with row broadcast), scale, silu, gelu, relu, swiglu, geglu. */
#include "vk_ops.h"

typedef struct binary_pc { /* common/binary.glsl */
  uint32_t n, d, b_bcast;
  uint32_t a_off, b_off, y_off;
} binary_pc;
_Static_assert(sizeof(binary_pc) <= VK_MAX_PUSH, "push constants");

typedef struct unary_pc { /* common/unary.glsl */
  uint32_t n, x_off, y_off;
  float s;
} unary_pc;
_Static_assert(sizeof(unary_pc) <= VK_MAX_PUSH, "push constants");

typedef struct glu_pc { /* common/glu.glsl */
  uint32_t n, g_off, u_off, y_off;
} glu_pc;
_Static_assert(sizeof(glu_pc) <= VK_MAX_PUSH, "push constants");

static int elt_dispatch(vk_ctx *c, const char *shader, const vk_binding *b, uint32_t nb, const void *pc,
                        uint32_t push, int64_t n, icl_error *err) {
  vk_kernel k = {.shader = shader, .n_bindings = nb, .push_size = push, .n_spec = 2, .spec = {c->wg, vk_elt_per(c)}};
  uint32_t gx, gy;
  vk_elt_grid(c, (uint64_t)n, &gx, &gy);
  return vk_dispatch(c, &k, b, nb, pc, push, gx, gy, 1, err);
}

static int binary(icl_backend *be, const char *shader, const icl_dt *a, const icl_dt *bv, const icl_dt *y,
                  icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t n = icl_dt_nelem(a);
  vk_binding b[3];
  binary_pc pc = {(uint32_t)n, (uint32_t)a->ne[0], icl_dt_nrows(bv) == 1, 0, 0, 0};
  int rc = vk_check_u32(n, "elementwise size", err);
  if (!rc) rc = vk_bind_view(c, a, 0, &b[0], &pc.a_off, err);
  if (!rc) rc = vk_bind_view(c, bv, 0, &b[1], &pc.b_off, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[2], &pc.y_off, err);
  if (!rc) rc = elt_dispatch(c, shader, b, 3, &pc, sizeof pc, n, err);
  return rc;
}

int vk_op_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  return binary(be, "add", a, b, y, err);
}

int vk_op_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  return binary(be, "mul", a, b, y, err);
}

static int unary(icl_backend *be, const char *shader, const icl_dt *x, float s, const icl_dt *y, icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t n = icl_dt_nelem(x);
  vk_binding b[2];
  unary_pc pc = {(uint32_t)n, 0, 0, s};
  int rc = vk_check_u32(n, "elementwise size", err);
  if (!rc) rc = vk_bind_view(c, x, 0, &b[0], &pc.x_off, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[1], &pc.y_off, err);
  if (!rc) rc = elt_dispatch(c, shader, b, 2, &pc, sizeof pc, n, err);
  return rc;
}

int vk_op_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err) {
  return unary(be, "scale", x, s, y, err);
}

int vk_op_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return unary(be, "silu", x, 0, y, err);
}

int vk_op_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return unary(be, "gelu", x, 0, y, err);
}

int vk_op_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return unary(be, "relu", x, 0, y, err);
}

static int glu(icl_backend *be, const char *shader, const icl_dt *gate, const icl_dt *up, const icl_dt *y,
               icl_error *err) {
  vk_ctx *c = vk_of(be);
  int64_t n = icl_dt_nelem(gate);
  vk_binding b[3];
  glu_pc pc = {(uint32_t)n, 0, 0, 0};
  int rc = vk_check_u32(n, "elementwise size", err);
  if (!rc) rc = vk_bind_view(c, gate, 0, &b[0], &pc.g_off, err);
  if (!rc) rc = vk_bind_view(c, up, 0, &b[1], &pc.u_off, err);
  if (!rc) rc = vk_bind_view(c, y, 1, &b[2], &pc.y_off, err);
  if (!rc) rc = elt_dispatch(c, shader, b, 3, &pc, sizeof pc, n, err);
  return rc;
}

int vk_op_swiglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err) {
  return glu(be, "swiglu", gate, up, y, err);
}

int vk_op_geglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err) {
  return glu(be, "geglu", gate, up, y, err);
}
