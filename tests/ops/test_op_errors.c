/* The checking wrappers (src/ops.c) reject bad shapes and types with a message naming the op and
 * the operand ("matmul: x: expected ne[0] = 576 ..."), before any backend sees them. Moved here
 * from test_cpu_ops.c when test_backend_ops.c took over its value checks; run on ref and cpu. */
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "testutil.h"

static icl_backend *g_be;

/* A view of its own buffer (contents irrelevant: every call here must fail before reading). */
static icl_dt mk(uint32_t type, int64_t n0, int64_t n1, int64_t n2) {
  icl_dt t = {.type = type, .ne = {n0, n1, n2, 1}};
  icl_error err;
  size_t bytes = icl_type_row_bytes(type, n0) * (size_t)(n1 * n2);
  if (g_be->ops->buf_alloc(g_be, bytes, ICL_BUF_ACT, &t.buf, &err)) {
    fprintf(stderr, "alloc: %s\n", err.msg);
    exit(1);
  }
  return t;
}

/* The message starts "op: operand". */
static void expect_error(int rc, const icl_error *err, const char *op, const char *operand) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "%s: %s", op, operand);
  CHECKF(rc == ICL_EINVAL && strncmp(err->msg, prefix, strlen(prefix)) == 0, "%s: want EINVAL '%s...', got %d '%s'",
         g_be->ops->name, prefix, rc, err->msg);
}

static void test_shape_errors(void) {
  icl_dt w = mk(ICL_TYPE_Q4_1, 576, 64, 1), x = mk(ICL_TYPE_F32, 640, 2, 1), y = mk(ICL_TYPE_F32, 64, 2, 1);
  icl_dt y3 = mk(ICL_TYPE_F32, 64, 3, 1), x576 = mk(ICL_TYPE_F32, 576, 2, 1), i32 = mk(ICL_TYPE_I32, 2, 1, 1);
  icl_dt q = mk(ICL_TYPE_F32, 64, 9, 2);
  icl_error err;
  expect_error(icl_op_matmul(g_be, &w, &x, &y, &err), &err, "matmul", "x");
  CHECK(strstr(err.msg, "576") && strstr(err.msg, "640")); /* expected and actual */
  expect_error(icl_op_matmul(g_be, &w, &x576, &y3, &err), &err, "matmul", "y");
  expect_error(icl_op_matmul(g_be, &w, &x576, &x576, &err), &err, "matmul", "y"); /* 64 rows != 576 */
  icl_dt gw[2] = {w, w}, gy[2] = {y, y3}, gsame[2] = {y, y};
  expect_error(icl_op_matmul_group(g_be, 2, gw, &x576, gy, &err), &err, "matmul_group[1]", "y"); /* 3 rows, x 2 */
  expect_error(icl_op_matmul_group(g_be, 2, gw, &x576, gsame, &err), &err, "matmul_group", "y[1]"); /* one output */
  CHECK(strstr(err.msg, "overlaps y[0]"));
  expect_error(icl_op_matmul_group(g_be, 5, gw, &x576, gy, &err), &err, "matmul_group", "count");
  icl_dt y2 = mk(ICL_TYPE_F32, 64, 2, 1);
  expect_error(icl_op_matmul_add(g_be, &w, &x, &y2, &y, &err), &err, "matmul_add", "x");
  expect_error(icl_op_matmul_add(g_be, &w, &x576, &y3, &y, &err), &err, "matmul_add", "t"); /* 192 elements, y 128 */
  expect_error(icl_op_matmul_add(g_be, &w, &x576, &y, &y, &err), &err, "matmul_add", "t"); /* t is y */
  CHECK(strstr(err.msg, "overlaps y"));
  expect_error(icl_op_rms_norm(g_be, &x, &y, 1e-5f, &x, &err), &err, "rms_norm", "w");
  /* the fused ops with a norm check what both halves would (issue 37) */
  icl_dt nw = mk(ICL_TYPE_F32, 576, 1, 1), h = mk(ICL_TYPE_F32, 576, 2, 1), gy2[2] = {y, y2};
  expect_error(icl_op_rms_matmul_group(g_be, &x576, NULL, 1e-5f, &h, 2, gw, gy2, &err), &err, "rms_matmul_group", "nw");
  expect_error(icl_op_rms_matmul_group(g_be, &x576, &nw, 1e-5f, &x576, 2, gw, gy2, &err), &err, "rms_matmul_group",
               "h"); /* h is x */
  expect_error(icl_op_rms_matmul_group(g_be, &x576, &y, 1e-5f, &h, 2, gw, gy2, &err), &err, "rms_matmul_group", "nw");
  expect_error(icl_op_rms_matmul_glu(g_be, &x576, &nw, 1e-5f, &h, &w, &w, &x576, &y2, ICL_GLU_SILU, &err), &err,
               "rms_matmul_glu", "y"); /* y is x */
  expect_error(icl_op_rms_norm_add(g_be, &x576, &nw, 1e-5f, &x576, &err), &err, "rms_norm_add", "y"); /* y is x */
  expect_error(icl_op_rms_norm_add(g_be, &x576, &y, 1e-5f, &h, &err), &err, "rms_norm_add", "w");
  /* the post-norm add folded in before them: t = x + rms_norm(o, pw), then the folded norm of t */
  icl_dt o = mk(ICL_TYPE_F32, 576, 2, 1), t = mk(ICL_TYPE_F32, 576, 2, 1), pw = mk(ICL_TYPE_F32, 576, 1, 1);
  icl_post_add pa = {&o, &pw, &t}, pa_tx = {&o, &pw, &x576}, pa_pw = {&o, &y, &t}, pa_o = {&x, &pw, &t};
  expect_error(icl_op_add_rms_matmul_group(g_be, &x576, NULL, &nw, 1e-5f, &h, 2, gw, gy2, &err), &err,
               "add_rms_matmul_group", "pa");
  expect_error(icl_op_add_rms_matmul_group(g_be, &x576, &pa_tx, &nw, 1e-5f, &h, 2, gw, gy2, &err), &err,
               "add_rms_matmul_group", "t"); /* t is x: the workgroups still read x */
  CHECK(strstr(err.msg, "overlaps x"));
  expect_error(icl_op_add_rms_matmul_group(g_be, &x576, &pa_pw, &nw, 1e-5f, &h, 2, gw, gy2, &err), &err,
               "add_rms_matmul_group", "pw"); /* 128 elements, x 576 */
  expect_error(icl_op_add_rms_matmul_group(g_be, &x576, &pa_o, &nw, 1e-5f, &h, 2, gw, gy2, &err), &err,
               "add_rms_matmul_group", "o"); /* 640 wide */
  expect_error(icl_op_add_rms_matmul_group(g_be, &x576, &pa, &nw, 1e-5f, &t, 2, gw, gy2, &err), &err,
               "add_rms_matmul_group", "h"); /* h is t */
  expect_error(icl_op_add_rms_matmul_glu(g_be, &x576, &pa, &nw, 1e-5f, &h, &w, &w, &y2, &y2, ICL_GLU_GELU, &err),
               &err, "add_rms_matmul_glu", "u"); /* u is y */
  expect_error(icl_op_add_rms_matmul_glu(g_be, &x576, &pa, &nw, 1e-5f, &h, &w, &w, &y, &y2, 7, &err), &err,
               "add_rms_matmul_glu", "unknown activation");
  icl_dt kk = mk(ICL_TYPE_F32, 64, 3, 2), qkw = mk(ICL_TYPE_F32, 64, 1, 1);
  expect_error(icl_op_rms_rope_pair(g_be, &q, &kk, &y, &qkw, 1e-5f, &i32, 64, 1e4f, ICL_ROPE_NEOX, &err), &err,
               "rms_rope_pair", "qw"); /* 128 elements, head_dim 64 */
  expect_error(icl_op_rms_rope_pair(g_be, &q, &kk, &qkw, NULL, 1e-5f, &i32, 64, 1e4f, ICL_ROPE_NEOX, &err), &err,
               "rms_rope_pair", "the norm weights");
  expect_error(icl_op_add(g_be, &x576, &y, &x576, &err), &err, "add", "b");
  expect_error(icl_op_rope(g_be, &q, &i32, 7, 1e4f, ICL_ROPE_NORMAL, &err), &err, "rope", "n_rot");
  expect_error(icl_op_get_rows(g_be, &w, &x, &y, &err), &err, "get_rows", "ids");
  expect_error(icl_op_copy2d(g_be, &y3, 0, 64, &y, 0, 64, 3, 64, &err), &err, "copy2d", "dst");
  expect_error(icl_op_copy2d(g_be, &y, 0, 64, &y3, 0, 32, 2, 64, &err), &err, "copy2d", "dst"); /* rows overlap */
  CHECK(strstr(err.msg, "overlap") && strstr(err.msg, "at least 64"));
  expect_error(icl_op_fill2d(g_be, &y3, 0, 0, 2, 8, 1.0f, &err), &err, "fill2d", "dst");
  expect_error(icl_op_rope(g_be, &q, &y, 64, 1e4f, ICL_ROPE_NORMAL, &err), &err, "rope", "pos");
  expect_error(icl_op_attention(g_be, &q, &x576, &x576, &(icl_attn_params){.scale = 1.0f}, NULL, &q, NULL, &err), &err,
               "attention", "k");
  icl_dt wk = w;
  wk.type = ICL_TYPE_Q4_K; /* 576 columns are not a whole number of 256-blocks */
  expect_error(icl_op_matmul(g_be, &wk, &x576, &y, &err), &err, "matmul", "w");
  icl_dt all[] = {w, x, y, y2, y3, x576, i32, q, nw, h, kk, qkw, o, t, pw};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) g_be->ops->buf_free(g_be, all[i].buf);
}

int main(void) {
  icl_error err;
  if (icl_ref_backend_new(&g_be, &err) == ICL_OK) test_shape_errors(), g_be->ops->destroy(g_be);
  else CHECKF(0, "ref backend: %s", err.msg);
  if (icl_cpu_backend_new(1, &g_be, &err) == ICL_OK) test_shape_errors(), g_be->ops->destroy(g_be);
  else CHECKF(0, "cpu backend: %s", err.msg);
  return t_done();
}
