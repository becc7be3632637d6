/* Checked op wrappers: validate operand types and shapes, then call the backend. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ops.h"
#include "ops_check.h"

const char *icl_dt_shape_str(const icl_dt *t, char *buf, size_t n) {
  snprintf(buf, n, "[%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]", t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
  return buf;
}

/* Weight matrix [cols, rows]: a weight type, 2-D, cols a whole number of blocks. */
static int chk_weight(const char *op, const icl_dt *w, icl_error *err) {
  int rc = chk_view(op, "w", w, err);
  if (rc) return rc;
  char s[96];
  if (!icl_type_is_weight(w->type))
    return icl_error_set(err, ICL_EINVAL, "%s: w: type %s is not a weight type", op, icl_type_name(w->type));
  if (w->ne[2] != 1 || w->ne[3] != 1)
    return icl_error_set(err, ICL_EINVAL, "%s: w: expected a 2-D matrix [cols, rows], got %s", op,
                         icl_dt_shape_str(w, s, sizeof s));
  if (w->ne[0] % icl_type_block_elems(w->type) != 0)
    return icl_error_set(err, ICL_EINVAL, "%s: w: %s rows need a multiple of %" PRId64 " columns, got %" PRId64, op,
                         icl_type_name(w->type), icl_type_block_elems(w->type), w->ne[0]);
  return ICL_OK;
}

int icl_op_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  TRY(chk_weight("get_rows", w, err));
  TRY(chk_type("get_rows", "ids", ids, ICL_TYPE_I32, err));
  TRY(chk_f32("get_rows", "out", out, err));
  TRY(chk_dim("get_rows", "out", out, "ne[0]", out->ne[0], w->ne[0], "w's columns", err));
  TRY(chk_dim("get_rows", "out", out, "rows", icl_dt_nrows(out), icl_dt_nelem(ids), "number of ids", err));
  return be->ops->get_rows(be, w, ids, out, err);
}

static int chk_matmul(const char *op, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_weight(op, w, err));
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "y", y, err));
  TRY(chk_dim(op, "x", x, "ne[0]", x->ne[0], w->ne[0], "w's columns", err));
  TRY(chk_dim(op, "y", y, "ne[0]", y->ne[0], w->ne[1], "w's rows", err));
  TRY(chk_dim(op, "y", y, "rows", icl_dt_nrows(y), icl_dt_nrows(x), "x's rows", err));
  return chk_no_alias(op, "x", x, "y", y, err);
}

int icl_op_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_matmul("matmul", w, x, y, err));
  return be->ops->matmul(be, w, x, y, err);
}

int icl_op_matmul_add(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *t, const icl_dt *y,
                      icl_error *err) {
  TRY(chk_matmul("matmul_add", w, x, y, err));
  TRY(chk_f32("matmul_add", "t", t, err)); /* checked on every backend, so a bad call fails the same everywhere */
  TRY(chk_dim("matmul_add", "t", t, "elements", icl_dt_nelem(t), icl_dt_nelem(y), "as many as y", err));
  TRY(chk_no_alias("matmul_add", "x", x, "t", t, err));
  TRY(chk_no_alias("matmul_add", "y", y, "t", t, err));
  if (be->ops->matmul_add) return be->ops->matmul_add(be, w, x, y, err);
  TRY(be->ops->matmul(be, w, x, t, err));
  return be->ops->add(be, y, t, y, err);
}

int icl_op_matmul_glu(icl_backend *be, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *x, const icl_dt *y,
                      const icl_dt *u, int act, icl_error *err) {
  if (act != ICL_GLU_SILU && act != ICL_GLU_GELU)
    return icl_error_set(err, ICL_EINVAL, "matmul_glu: unknown activation %d (expected SILU 0 or GELU 1)", act);
  TRY(chk_matmul("matmul_glu", w_gate, x, y, err));
  TRY(chk_matmul("matmul_glu", w_up, x, u, err));
  TRY(chk_no_alias("matmul_glu", "y", y, "u", u, err));
  if (be->ops->matmul_glu) return be->ops->matmul_glu(be, w_gate, w_up, x, y, u, act, err);
  icl_dt w[2] = {*w_gate, *w_up}, ys[2] = {*y, *u};
  TRY(icl_op_matmul_group(be, 2, w, x, ys, err));
  return act == ICL_GLU_GELU ? be->ops->geglu(be, y, u, y, err) : be->ops->swiglu(be, y, u, y, err);
}

static int chk_group(int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  if (count < 1 || count > ICL_MATMUL_GROUP_MAX)
    return icl_error_set(err, ICL_EINVAL, "matmul_group: count %d outside 1..%d", count, ICL_MATMUL_GROUP_MAX);
  /* names for the messages, without formatting them on every call (decode makes two groups per layer) */
  static const char *const op[] = {"matmul_group[0]", "matmul_group[1]", "matmul_group[2]", "matmul_group[3]"};
  static const char *const yn[] = {"y[0]", "y[1]", "y[2]", "y[3]"};
  _Static_assert(sizeof op / sizeof op[0] == ICL_MATMUL_GROUP_MAX, "a name per member");
  for (int i = 0; i < count; i++) {
    TRY(chk_matmul(op[i], &w[i], x, &y[i], err));
    for (int j = 0; j < i; j++) TRY(chk_no_alias("matmul_group", yn[j], &y[j], yn[i], &y[i], err));
  }
  return ICL_OK;
}

int icl_op_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y,
                        icl_error *err) {
  TRY(chk_group(count, w, x, y, err));
  if (count > 1 && be->ops->matmul_group) return be->ops->matmul_group(be, count, w, x, y, err);
  for (int i = 0; i < count; i++) TRY(be->ops->matmul(be, &w[i], x, &y[i], err));
  return ICL_OK;
}

/* Optional per-channel f32 parameter of length d (norm weight or bias). */
static int chk_param(const char *op, const char *name, const icl_dt *p, int64_t d, icl_error *err) {
  if (!p) return ICL_OK;
  TRY(chk_f32(op, name, p, err));
  return chk_dim(op, name, p, "size", icl_dt_nelem(p), d, "x's ne[0]", err);
}

int icl_op_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err) {
  TRY(chk_f32("rms_norm", "x", x, err));
  TRY(chk_f32("rms_norm", "y", y, err));
  TRY(chk_same_shape("rms_norm", "x", x, "y", y, err));
  TRY(chk_param("rms_norm", "w", w, x->ne[0], err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "rms_norm: eps must be >= 0, got %g", eps);
  return be->ops->rms_norm(be, x, w, eps, y, err);
}

int icl_op_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y,
                      icl_error *err) {
  TRY(chk_f32("layer_norm", "x", x, err));
  TRY(chk_f32("layer_norm", "y", y, err));
  TRY(chk_same_shape("layer_norm", "x", x, "y", y, err));
  TRY(chk_param("layer_norm", "w", w, x->ne[0], err));
  TRY(chk_param("layer_norm", "b", b, x->ne[0], err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "layer_norm: eps must be >= 0, got %g", eps);
  return be->ops->layer_norm(be, x, w, b, eps, y, err);
}

/* The norm part of a folded norm (rms_matmul_group / glu): x and h f32 of one shape, nw present, h apart from x. */
static int chk_folded_norm(const char *op, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                           icl_error *err) {
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "h", h, err));
  TRY(chk_same_shape(op, "x", x, "h", h, err));
  if (!nw) return icl_error_set(err, ICL_EINVAL, "%s: nw: the norm weight is required", op);
  TRY(chk_param(op, "nw", nw, x->ne[0], err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "%s: eps must be >= 0, got %g", op, eps);
  return chk_no_alias(op, "x", x, "h", h, err);
}

int icl_op_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                            int count, const icl_dt *w, const icl_dt *y, icl_error *err) {
  TRY(chk_folded_norm("rms_matmul_group", x, nw, eps, h, err));
  TRY(chk_group(count, w, h, y, err));
  for (int i = 0; i < count; i++) TRY(chk_no_alias("rms_matmul_group", "x", x, "y", &y[i], err));
  if (count > 1 && be->ops->rms_matmul_group) return be->ops->rms_matmul_group(be, x, nw, eps, h, count, w, y, err);
  TRY(be->ops->rms_norm(be, x, nw, eps, h, err));
  return icl_op_matmul_group(be, count, w, h, y, err);
}

int icl_op_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                          const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                          icl_error *err) {
  TRY(chk_folded_norm("rms_matmul_glu", x, nw, eps, h, err));
  TRY(chk_no_alias("rms_matmul_glu", "x", x, "y", y, err));
  TRY(chk_no_alias("rms_matmul_glu", "x", x, "u", u, err));
  if (act != ICL_GLU_SILU && act != ICL_GLU_GELU)
    return icl_error_set(err, ICL_EINVAL, "rms_matmul_glu: unknown activation %d (expected SILU 0 or GELU 1)", act);
  TRY(chk_matmul("rms_matmul_glu", w_gate, h, y, err));
  TRY(chk_matmul("rms_matmul_glu", w_up, h, u, err));
  TRY(chk_no_alias("rms_matmul_glu", "y", y, "u", u, err));
  if (be->ops->rms_matmul_glu) return be->ops->rms_matmul_glu(be, x, nw, eps, h, w_gate, w_up, y, u, act, err);
  TRY(be->ops->rms_norm(be, x, nw, eps, h, err));
  return icl_op_matmul_glu(be, w_gate, w_up, h, y, u, act, err);
}

int icl_op_rms_norm_add(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y,
                        icl_error *err) {
  TRY(chk_f32("rms_norm_add", "x", x, err));
  TRY(chk_f32("rms_norm_add", "y", y, err));
  TRY(chk_same_shape("rms_norm_add", "x", x, "y", y, err));
  TRY(chk_param("rms_norm_add", "w", w, x->ne[0], err));
  TRY(chk_no_alias("rms_norm_add", "x", x, "y", y, err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "rms_norm_add: eps must be >= 0, got %g", eps);
  if (be->ops->rms_norm_add) return be->ops->rms_norm_add(be, x, w, eps, y, err);
  TRY(be->ops->rms_norm(be, x, w, eps, x, err));
  return be->ops->add(be, y, x, y, err);
}

/* The post-norm add of add_rms_matmul_*: x, o, t f32 of one shape, the post-norm weight present, t apart from x and o
 * (every workgroup reads x and o while one writes t), o apart from x. */
static int chk_post_add(const char *op, const icl_dt *x, const icl_post_add *pa, float eps, icl_error *err) {
  if (!pa || !pa->o || !pa->w || !pa->t)
    return icl_error_set(err, ICL_EINVAL, "%s: pa: o, w and t are required", op);
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "o", pa->o, err));
  TRY(chk_f32(op, "t", pa->t, err));
  TRY(chk_same_shape(op, "x", x, "o", pa->o, err));
  TRY(chk_same_shape(op, "x", x, "t", pa->t, err));
  TRY(chk_param(op, "pw", pa->w, x->ne[0], err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "%s: eps must be >= 0, got %g", op, eps);
  TRY(chk_no_alias(op, "x", x, "o", pa->o, err));
  TRY(chk_no_alias(op, "x", x, "t", pa->t, err));
  return chk_no_alias(op, "o", pa->o, "t", pa->t, err);
}

int icl_op_add_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                                const icl_dt *h, int count, const icl_dt *w, const icl_dt *y, icl_error *err) {
  TRY(chk_post_add("add_rms_matmul_group", x, pa, eps, err));
  TRY(chk_folded_norm("add_rms_matmul_group", pa->t, nw, eps, h, err));
  TRY(chk_group(count, w, h, y, err));
  for (int i = 0; i < count; i++) {
    TRY(chk_no_alias("add_rms_matmul_group", "x", x, "y", &y[i], err));
    TRY(chk_no_alias("add_rms_matmul_group", "o", pa->o, "y", &y[i], err));
  }
  if (count > 1 && be->ops->add_rms_matmul_group)
    return be->ops->add_rms_matmul_group(be, x, pa, nw, eps, h, count, w, y, err);
  TRY(be->ops->rms_norm(be, pa->o, pa->w, eps, pa->o, err));
  TRY(be->ops->add(be, x, pa->o, pa->t, err));
  return icl_op_rms_matmul_group(be, pa->t, nw, eps, h, count, w, y, err);
}

int icl_op_add_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                              const icl_dt *h, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y,
                              const icl_dt *u, int act, icl_error *err) {
  TRY(chk_post_add("add_rms_matmul_glu", x, pa, eps, err));
  TRY(chk_folded_norm("add_rms_matmul_glu", pa->t, nw, eps, h, err));
  static const char *const out[] = {"y", "u"};
  const icl_dt *outs[] = {y, u};
  for (int i = 0; i < 2; i++) {
    TRY(chk_no_alias("add_rms_matmul_glu", "x", x, out[i], outs[i], err));
    TRY(chk_no_alias("add_rms_matmul_glu", "o", pa->o, out[i], outs[i], err));
    TRY(chk_no_alias("add_rms_matmul_glu", "t", pa->t, out[i], outs[i], err));
  }
  if (act != ICL_GLU_SILU && act != ICL_GLU_GELU)
    return icl_error_set(err, ICL_EINVAL, "add_rms_matmul_glu: unknown activation %d (expected SILU 0 or GELU 1)", act);
  TRY(chk_matmul("add_rms_matmul_glu", w_gate, h, y, err));
  TRY(chk_matmul("add_rms_matmul_glu", w_up, h, u, err));
  TRY(chk_no_alias("add_rms_matmul_glu", "y", y, "u", u, err));
  if (be->ops->add_rms_matmul_glu)
    return be->ops->add_rms_matmul_glu(be, x, pa, nw, eps, h, w_gate, w_up, y, u, act, err);
  TRY(be->ops->rms_norm(be, pa->o, pa->w, eps, pa->o, err));
  TRY(be->ops->add(be, x, pa->o, pa->t, err));
  return icl_op_rms_matmul_glu(be, pa->t, nw, eps, h, w_gate, w_up, y, u, act, err);
}

static int chk_rope(const char *op, const char *xn, const icl_dt *x, const icl_dt *pos, int n_rot, float base,
                    int mode, icl_error *err) {
  TRY(chk_f32(op, xn, x, err));
  TRY(chk_type(op, "pos", pos, ICL_TYPE_I32, err));
  TRY(chk_dim(op, "pos", pos, "size", icl_dt_nelem(pos), x->ne[2] * x->ne[3], "x's tokens, ne[2]", err));
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > x->ne[0])
    return icl_error_set(err, ICL_EINVAL, "%s: n_rot must be even and in 2..%" PRId64 " (head_dim), got %d", op,
                         x->ne[0], n_rot);
  if (mode != ICL_ROPE_NORMAL && mode != ICL_ROPE_NEOX)
    return icl_error_set(err, ICL_EINVAL, "%s: unknown mode %d (expected NORMAL 0 or NEOX 1)", op, mode);
  if (!(base > 0.0f) || !isfinite(base)) return icl_error_set(err, ICL_EINVAL, "%s: base must be > 0, got %g", op, base);
  return ICL_OK;
}

int icl_op_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err) {
  TRY(chk_rope("rope", "x", x, pos, n_rot, base, mode, err));
  return be->ops->rope(be, x, pos, n_rot, base, mode, err);
}

int icl_op_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *pos, int n_rot, float base,
                     int mode, icl_error *err) {
  TRY(chk_rope("rope_pair", "q", q, pos, n_rot, base, mode, err));
  TRY(chk_rope("rope_pair", "k", k, pos, n_rot, base, mode, err));
  TRY(chk_dim("rope_pair", "k", k, "ne[0]", k->ne[0], q->ne[0], "q's head_dim", err));
  TRY(chk_no_alias("rope_pair", "q", q, "k", k, err));
  if (be->ops->rope_pair) return be->ops->rope_pair(be, q, k, pos, n_rot, base, mode, err);
  TRY(be->ops->rope(be, q, pos, n_rot, base, mode, err));
  return be->ops->rope(be, k, pos, n_rot, base, mode, err);
}

int icl_op_rms_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *qw, const icl_dt *kw,
                         float eps, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err) {
  TRY(chk_rope("rms_rope_pair", "q", q, pos, n_rot, base, mode, err));
  TRY(chk_rope("rms_rope_pair", "k", k, pos, n_rot, base, mode, err));
  TRY(chk_dim("rms_rope_pair", "k", k, "ne[0]", k->ne[0], q->ne[0], "q's head_dim", err));
  TRY(chk_no_alias("rms_rope_pair", "q", q, "k", k, err));
  if (!qw || !kw) return icl_error_set(err, ICL_EINVAL, "rms_rope_pair: the norm weights qw and kw are required");
  TRY(chk_param("rms_rope_pair", "qw", qw, q->ne[0], err));
  TRY(chk_param("rms_rope_pair", "kw", kw, q->ne[0], err));
  if (!(eps >= 0.0f)) return icl_error_set(err, ICL_EINVAL, "rms_rope_pair: eps must be >= 0, got %g", eps);
  if (be->ops->rms_rope_pair) return be->ops->rms_rope_pair(be, q, k, qw, kw, eps, pos, n_rot, base, mode, err);
  TRY(be->ops->rms_norm(be, q, qw, eps, q, err));
  TRY(be->ops->rms_norm(be, k, kw, eps, k, err));
  return icl_op_rope_pair(be, q, k, pos, n_rot, base, mode, err);
}

/* Mask or pattern: f32 [n_kv, n_q, n_head]. */
static int chk_scores(const char *name, const icl_dt *t, int64_t nkv, int64_t nq, int64_t nh, icl_error *err) {
  if (!t) return ICL_OK;
  TRY(chk_f32("attention", name, t, err));
  TRY(chk_dim("attention", name, t, "ne[0]", t->ne[0], nkv, "n_kv", err));
  TRY(chk_dim("attention", name, t, "ne[1]", t->ne[1], nq, "n_q", err));
  return chk_dim("attention", name, t, "ne[2]*ne[3]", t->ne[2] * t->ne[3], nh, "n_head", err);
}

int icl_op_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                     const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  const char *op = "attention";
  TRY(chk_f32(op, "q", q, err));
  TRY(chk_f32(op, "k", k, err));
  TRY(chk_f32(op, "v", v, err));
  TRY(chk_f32(op, "out", out, err));
  if (!p) return icl_error_set(err, ICL_EINVAL, "attention: missing params");
  int64_t hd = q->ne[0], nh = q->ne[1], nq = q->ne[2] * q->ne[3], nkvh = k->ne[1], nkv = k->ne[2] * k->ne[3];
  TRY(chk_dim(op, "k", k, "ne[0]", k->ne[0], hd, "q's head_dim", err));
  TRY(chk_same_shape(op, "k", k, "v", v, err));
  TRY(chk_same_shape(op, "q", q, "out", out, err));
  if (nh % nkvh != 0)
    return icl_error_set(err, ICL_EINVAL, "attention: k: n_kv_head %" PRId64 " must divide n_head %" PRId64, nkvh, nh);
  if (p->n_past < 0) return icl_error_set(err, ICL_EINVAL, "attention: n_past must be >= 0, got %d", p->n_past);
  TRY(chk_dim(op, "k", k, "n_kv (ne[2])", nkv, (int64_t)p->n_past + nq, "n_past + n_q", err));
  if (p->window < 0 || !(p->softcap >= 0.0f) || !isfinite(p->scale))
    return icl_error_set(err, ICL_EINVAL, "attention: bad params (window %d >= 0, softcap %g >= 0, finite scale %g)",
                         p->window, p->softcap, p->scale);
  TRY(chk_scores("mask", mask, nkv, nq, nh, err));
  TRY(chk_scores("pattern", pattern, nkv, nq, nh, err));
  TRY(chk_no_alias(op, "q", q, "out", out, err));
  return be->ops->attention(be, q, k, v, p, mask, out, pattern, err);
}

/* a, b, y f32; b has a's ne[0] and either 1 row or a's row count; y has a's shape. */
static int chk_binary(const char *op, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  TRY(chk_f32(op, "a", a, err));
  TRY(chk_f32(op, "b", b, err));
  TRY(chk_f32(op, "y", y, err));
  TRY(chk_dim(op, "b", b, "ne[0]", b->ne[0], a->ne[0], "a's ne[0]", err));
  if (icl_dt_nrows(b) != 1) TRY(chk_dim(op, "b", b, "rows", icl_dt_nrows(b), icl_dt_nrows(a), "1 or a's rows", err));
  return chk_same_shape(op, "a", a, "y", y, err);
}

int icl_op_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  TRY(chk_binary("add", a, b, y, err));
  return be->ops->add(be, a, b, y, err);
}

int icl_op_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  TRY(chk_binary("mul", a, b, y, err));
  return be->ops->mul(be, a, b, y, err);
}

/* Elementwise f32 x -> y with the same element count. */
static int chk_unary(const char *op, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "y", y, err));
  return chk_dim(op, "y", y, "size", icl_dt_nelem(y), icl_dt_nelem(x), "x's size", err);
}

int icl_op_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err) {
  TRY(chk_unary("scale", x, y, err));
  return be->ops->scale(be, x, s, y, err);
}

int icl_op_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_unary("silu", x, y, err));
  return be->ops->silu(be, x, y, err);
}

int icl_op_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_unary("gelu", x, y, err));
  return be->ops->gelu(be, x, y, err);
}

int icl_op_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_unary("relu", x, y, err));
  return be->ops->relu(be, x, y, err);
}

static int chk_glu(const char *op, const icl_dt *g, const icl_dt *u, const icl_dt *y, icl_error *err) {
  TRY(chk_f32(op, "gate", g, err));
  TRY(chk_f32(op, "up", u, err));
  TRY(chk_f32(op, "y", y, err));
  TRY(chk_same_shape(op, "gate", g, "up", u, err));
  return chk_same_shape(op, "gate", g, "y", y, err);
}

int icl_op_swiglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err) {
  TRY(chk_glu("swiglu", gate, up, y, err));
  return be->ops->swiglu(be, gate, up, y, err);
}

int icl_op_geglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err) {
  TRY(chk_glu("geglu", gate, up, y, err));
  return be->ops->geglu(be, gate, up, y, err);
}

int icl_op_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_f32("softmax", "x", x, err));
  TRY(chk_f32("softmax", "y", y, err));
  TRY(chk_same_shape("softmax", "x", x, "y", y, err));
  return be->ops->softmax(be, x, y, err);
}

int icl_op_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  TRY(chk_view("convert", "x", x, err));
  TRY(chk_view("convert", "y", y, err));
  if ((x->type != ICL_TYPE_F32 && x->type != ICL_TYPE_F16) || (y->type != ICL_TYPE_F32 && y->type != ICL_TYPE_F16))
    return icl_error_set(err, ICL_EINVAL, "convert: expected F32 or F16 operands, got %s -> %s",
                         icl_type_name(x->type), icl_type_name(y->type));
  TRY(chk_dim("convert", "y", y, "size", icl_dt_nelem(y), icl_dt_nelem(x), "x's size", err));
  if (x->type != y->type) TRY(chk_no_alias("convert", "x", x, "y", y, err));
  return be->ops->convert(be, x, y, err);
}

int icl_op_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err) {
  TRY(chk_f32("argmax", "x", x, err));
  TRY(chk_type("argmax", "out", out, ICL_TYPE_I32, err));
  TRY(chk_dim("argmax", "out", out, "size", icl_dt_nelem(out), icl_dt_nrows(x), "x's rows", err));
  return be->ops->argmax(be, x, out, err);
}

int icl_op_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  TRY(chk_f32("lse_select", "x", x, err));
  TRY(chk_type("lse_select", "ids", ids, ICL_TYPE_I32, err));
  TRY(chk_f32("lse_select", "out", out, err));
  int64_t k = icl_dt_nelem(ids);
  if (k < 1) return icl_error_set(err, ICL_EINVAL, "lse_select: ids is empty, expected at least one id");
  TRY(chk_dim("lse_select", "out", out, "size", icl_dt_nelem(out), (k + 1) * icl_dt_nrows(x), "(k + 1) x rows", err));
  return be->ops->lse_select(be, x, ids, out, err);
}

/* The 2-D region off + r*stride + c (r < rows, c < cols) lies inside the view. */
static int chk_region(const char *op, const char *name, const icl_dt *t, int64_t off, int64_t stride, int64_t rows,
                      int64_t cols, icl_error *err) {
  if (off < 0 || stride < 0 || rows < 0 || cols < 0)
    return icl_error_set(err, ICL_EINVAL, "%s: %s: negative offset, stride or extent", op, name);
  if (rows == 0 || cols == 0) return ICL_OK;
  int64_t last = off + (rows - 1) * stride + cols;
  if (last > icl_dt_nelem(t)) {
    char s[96];
    return icl_error_set(err, ICL_EINVAL,
                         "%s: %s: region of %" PRId64 " x %" PRId64 " at offset %" PRId64 " stride %" PRId64
                         " ends at element %" PRId64 ", past the view's %" PRId64 " elements %s",
                         op, name, rows, cols, off, stride, last, icl_dt_nelem(t), icl_dt_shape_str(t, s, sizeof s));
  }
  return ICL_OK;
}

/* Written rows must not overlap: on a GPU two rows writing one element race. */
static int chk_no_overlap(const char *op, const char *name, int64_t stride, int64_t rows, int64_t cols,
                          icl_error *err) {
  if (rows > 1 && cols > 0 && stride < cols)
    return icl_error_set(err, ICL_EINVAL,
                         "%s: %s: %" PRId64 " rows of %" PRId64 " columns at stride %" PRId64
                         " overlap; expected a stride of at least %" PRId64,
                         op, name, rows, cols, stride, cols);
  return ICL_OK;
}

int icl_op_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
                  int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err) {
  TRY(chk_f32("copy2d", "src", src, err));
  TRY(chk_f32("copy2d", "dst", dst, err));
  TRY(chk_region("copy2d", "src", src, src_off, src_stride, rows, cols, err));
  TRY(chk_region("copy2d", "dst", dst, dst_off, dst_stride, rows, cols, err));
  TRY(chk_no_overlap("copy2d", "dst", dst_stride, rows, cols, err));
  if (rows == 0 || cols == 0) return ICL_OK;
  return be->ops->copy2d(be, src, src_off, src_stride, dst, dst_off, dst_stride, rows, cols, err);
}

int icl_op_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                  float value, icl_error *err) {
  TRY(chk_f32("fill2d", "dst", dst, err));
  TRY(chk_region("fill2d", "dst", dst, off, stride, rows, cols, err));
  TRY(chk_no_overlap("fill2d", "dst", stride, rows, cols, err));
  if (rows == 0 || cols == 0) return ICL_OK;
  return be->ops->fill2d(be, dst, off, stride, rows, cols, value, err);
}
