/* Checked wrappers of the backend contract's training entries (backend.h, "training"): operand types and shapes,
 * then the backend's op, or ICL_EUNSUPPORTED naming the op where the backend has none. */
#include "ops_check.h"

/* The backend's entry, or an error naming the op and the backend. */
#define NEED(be, op)                                                                                           \
  do {                                                                                                         \
    if (!(be)->ops->op)                                                                                        \
      return icl_error_set(err, ICL_EUNSUPPORTED, "%s: the %s backend has no training op %s", #op,            \
                           (be)->ops->name, #op);                                                              \
  } while (0)

/* An optional gradient output: absent, or f32 with n elements. */
static int chk_grad(const char *op, const char *name, const icl_dt *t, int64_t n, const char *what, icl_error *err) {
  if (!t) return ICL_OK;
  TRY(chk_f32(op, name, t, err));
  return chk_dim(op, name, t, "elements", icl_dt_nelem(t), n, what, err);
}

static int chk_i32_n(const char *op, const char *name, const icl_dt *t, int64_t n, const char *what, icl_error *err) {
  TRY(chk_type(op, name, t, ICL_TYPE_I32, err));
  return chk_dim(op, name, t, "elements", icl_dt_nelem(t), n, what, err);
}

int icl_op_attention_seqs(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                          const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  const char *names[] = {"q", "k", "v", "out"};
  const icl_dt *ts[] = {q, k, v, out};
  for (int i = 0; i < 4; i++) {
    TRY(chk_f32("attention_seqs", names[i], ts[i], err));
    TRY(chk_same_shape("attention_seqs", "q", q, names[i], ts[i], err));
  }
  int64_t hd = q->ne[0], nh = q->ne[1], T = q->ne[2], B = q->ne[3];
  TRY(chk_f32("attention_seqs", "pattern", pattern, err));
  TRY(chk_dim("attention_seqs", "pattern", pattern, "elements", icl_dt_nelem(pattern), T * T * nh * B,
              "[T, T, heads, sequences] of q", err));
  if (p->window || p->n_past || p->softcap != 0.0f)
    return icl_error_set(err, ICL_EINVAL, "attention_seqs: plain causal attention only (no window, offset, softcap)");
  if (be->ops->attention_seqs) return be->ops->attention_seqs(be, q, k, v, p, out, pattern, err);
  for (int64_t b = 0; b < B; b++) { /* one sequence at a time */
    icl_dt vs[5] = {*q, *k, *v, *out, *pattern};
    for (int i = 0; i < 5; i++) {
      int64_t per = i < 4 ? hd * nh * T : T * T * nh;
      vs[i].offset += (size_t)(b * per) * sizeof(float), vs[i].ne[3] = 1;
    }
    vs[4].ne[0] = T, vs[4].ne[1] = T, vs[4].ne[2] = nh;
    TRY(icl_op_attention(be, &vs[0], &vs[1], &vs[2], p, NULL, &vs[3], &vs[4], err));
  }
  return ICL_OK;
}

/* matmul_bwd's operands and flags (op names the product: "matmul_bwd" or "matmul_bwd_group[i]"). */
static int chk_matmul_bwd(const char *op, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                          const icl_dt *dx, int write, icl_error *err) {
  if (write & ~(ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX))
    return icl_error_set(err, ICL_EINVAL, "%s: write flags %#x: expected ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX", op,
                         (unsigned)write);
  TRY(chk_f32(op, "w", w, err));
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "dy", dy, err));
  TRY(chk_dim(op, "x", x, "ne[0]", x->ne[0], w->ne[0], "w's columns", err));
  TRY(chk_dim(op, "dy", dy, "ne[0]", dy->ne[0], w->ne[1], "w's rows", err));
  TRY(chk_dim(op, "dy", dy, "rows", icl_dt_nrows(dy), icl_dt_nrows(x), "x's rows", err));
  TRY(chk_grad(op, "dw", dw, icl_dt_nelem(w), "as many as w", err));
  return chk_grad(op, "dx", dx, icl_dt_nelem(x), "as many as x", err);
}

int icl_op_matmul_bwd(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                      const icl_dt *dx, int write, icl_error *err) {
  TRY(chk_matmul_bwd("matmul_bwd", w, x, dy, dw, dx, write, err));
  NEED(be, matmul_bwd);
  return be->ops->matmul_bwd(be, w, x, dy, dw, dx, write, err);
}

int icl_op_matmul_bwd_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *dy,
                            const icl_dt *dw, const icl_dt *dx, int write, icl_error *err) {
  if (count < 1 || count > ICL_MATMUL_GROUP_MAX)
    return icl_error_set(err, ICL_EINVAL, "matmul_bwd_group: count %d outside 1..%d", count, ICL_MATMUL_GROUP_MAX);
  static const char *const op[] = {"matmul_bwd_group[0]", "matmul_bwd_group[1]", "matmul_bwd_group[2]",
                                   "matmul_bwd_group[3]"};
  for (int i = 0; i < count; i++) {
    TRY(chk_matmul_bwd(op[i], &w[i], x, &dy[i], dw ? &dw[i] : NULL, dx, write, err));
    if (i > 0) TRY(chk_same_shape(op[i], "w[0]", &w[0], "w", &w[i], err));
  }
  if (count > 1 && be->ops->matmul_bwd_group) return be->ops->matmul_bwd_group(be, count, w, x, dy, dw, dx, write, err);
  for (int i = 0; i < count; i++) /* dx: the first product written (per write), the others added */
    TRY(icl_op_matmul_bwd(be, &w[i], x, &dy[i], dw ? &dw[i] : NULL, dx, i ? write & ICL_BWD_WRITE_DW : write, err));
  return ICL_OK;
}

/* The checks norm_fwd and norm_bwd share: x and ot (y or dy) f32 and of one shape; w and b (b_name: b or db) absent
 * or one per column of x, no bias for RMSNorm; stats present, 2 per row of x. */
static int chk_norm(const char *op, int rms, const icl_dt *x, const char *ot_name, const icl_dt *ot, const icl_dt *w,
                    const char *b_name, const icl_dt *b, const icl_dt *stats, icl_error *err) {
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, ot_name, ot, err));
  TRY(chk_same_shape(op, "x", x, ot_name, ot, err));
  TRY(chk_grad(op, "w", w, x->ne[0], "x's row length", err));
  TRY(chk_grad(op, b_name, b, x->ne[0], "x's row length", err));
  if (rms && b) return icl_error_set(err, ICL_EINVAL, "%s: %s: RMSNorm has no bias", op, b_name);
  if (!stats) return icl_error_set(err, ICL_EINVAL, "%s: stats: missing tensor ([2, rows] of x)", op);
  return chk_grad(op, "stats", stats, 2 * icl_dt_nrows(x), "2 per row of x", err);
}

int icl_op_norm_fwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                    const icl_dt *y, const icl_dt *stats, icl_error *err) {
  TRY(chk_norm("norm_fwd", rms, x, "y", y, w, "b", b, stats, err));
  if (be->ops->norm_fwd) return be->ops->norm_fwd(be, rms, x, w, b, eps, y, stats, err);
  TRY(rms ? icl_op_rms_norm(be, x, w, eps, y, err) : icl_op_layer_norm(be, x, w, b, eps, y, err));
  return icl_op_norm_bwd(be, rms, x, w, eps, x, NULL, NULL, NULL, stats, 0, err); /* dy: not read without dx */
}

int icl_op_norm_bwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *dy,
                    const icl_dt *dx, const icl_dt *dw, const icl_dt *db, const icl_dt *stats, int stats_in,
                    icl_error *err) {
  TRY(chk_norm("norm_bwd", rms, x, "dy", dy, w, "db", db, stats, err));
  TRY(chk_grad("norm_bwd", "dx", dx, icl_dt_nelem(x), "as many as x", err));
  TRY(chk_grad("norm_bwd", "dw", dw, x->ne[0], "x's row length", err));
  if (stats_in != 0 && stats_in != 1)
    return icl_error_set(err, ICL_EINVAL, "norm_bwd: stats_in %d, expected 0 (computed) or 1 (given)", stats_in);
  NEED(be, norm_bwd);
  return be->ops->norm_bwd(be, rms, x, w, eps, dy, dx, dw, db, stats, stats_in, err);
}

int icl_op_attention_bwd(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *P,
                         const icl_dt *dz, float scale, const icl_dt *dq, const icl_dt *dk, const icl_dt *dv,
                         icl_error *err) {
  const char *names[] = {"q", "k", "v", "dz", "dq", "dk", "dv"};
  const icl_dt *ts[] = {q, k, v, dz, dq, dk, dv};
  TRY(chk_f32("attention_bwd", "q", q, err));
  for (int i = 1; i < 7; i++) {
    TRY(chk_f32("attention_bwd", names[i], ts[i], err));
    TRY(chk_same_shape("attention_bwd", "q", q, names[i], ts[i], err));
  }
  TRY(chk_f32("attention_bwd", "P", P, err));
  int64_t T = q->ne[2];
  TRY(chk_dim("attention_bwd", "P", P, "elements", icl_dt_nelem(P), T * T * q->ne[1] * q->ne[3],
              "[T, T, heads, sequences] of q", err));
  NEED(be, attention_bwd);
  return be->ops->attention_bwd(be, q, k, v, P, dz, scale, dq, dk, dv, err);
}

int icl_op_rope_bwd(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, icl_error *err) {
  TRY(chk_f32("rope_bwd", "x", x, err));
  TRY(chk_i32_n("rope_bwd", "pos", pos, x->ne[2] * x->ne[3], "one per token of x", err));
  if (n_rot < 2 || n_rot > x->ne[0] || n_rot % 2)
    return icl_error_set(err, ICL_EINVAL, "rope_bwd: n_rot %d: expected an even count in 2..%" PRId64, n_rot, x->ne[0]);
  NEED(be, rope_bwd);
  return be->ops->rope_bwd(be, x, pos, n_rot, base, err);
}

static int chk_act_bwd(const char *op, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err) {
  TRY(chk_f32(op, "x", x, err));
  TRY(chk_f32(op, "dy", dy, err));
  TRY(chk_f32(op, "dx", dx, err));
  TRY(chk_dim(op, "dy", dy, "elements", icl_dt_nelem(dy), icl_dt_nelem(x), "as many as x", err));
  return chk_dim(op, "dx", dx, "elements", icl_dt_nelem(dx), icl_dt_nelem(x), "as many as x", err);
}

int icl_op_gelu_bwd(icl_backend *be, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err) {
  TRY(chk_act_bwd("gelu_bwd", x, dy, dx, err));
  NEED(be, gelu_bwd);
  return be->ops->gelu_bwd(be, x, dy, dx, err);
}

int icl_op_relu_bwd(icl_backend *be, const icl_dt *y, const icl_dt *dy, const icl_dt *dx, icl_error *err) {
  TRY(chk_act_bwd("relu_bwd", y, dy, dx, err));
  NEED(be, relu_bwd);
  return be->ops->relu_bwd(be, y, dy, dx, err);
}

int icl_op_embed(icl_backend *be, const icl_dt *e, const icl_dt *ids, const icl_dt *x, icl_error *err) {
  TRY(chk_f32("embed", "e", e, err));
  TRY(chk_f32("embed", "x", x, err));
  TRY(chk_dim("embed", "x", x, "ne[0]", x->ne[0], e->ne[0], "e's row length", err));
  TRY(chk_i32_n("embed", "ids", ids, icl_dt_nrows(x), "one per row of x", err));
  NEED(be, embed);
  return be->ops->embed(be, e, ids, x, err);
}

int icl_op_embed_bwd(icl_backend *be, const icl_dt *ids, const icl_dt *dx, const icl_dt *de, icl_error *err) {
  TRY(chk_f32("embed_bwd", "dx", dx, err));
  TRY(chk_f32("embed_bwd", "de", de, err));
  TRY(chk_dim("embed_bwd", "de", de, "ne[0]", de->ne[0], dx->ne[0], "dx's row length", err));
  TRY(chk_i32_n("embed_bwd", "ids", ids, icl_dt_nrows(dx), "one per row of dx", err));
  NEED(be, embed_bwd);
  return be->ops->embed_bwd(be, ids, dx, de, err);
}

int icl_op_sum_rows(icl_backend *be, const icl_dt *src, const icl_dt *dst, icl_error *err) {
  TRY(chk_f32("sum_rows", "src", src, err));
  TRY(chk_f32("sum_rows", "dst", dst, err));
  TRY(chk_dim("sum_rows", "dst", dst, "elements", icl_dt_nelem(dst), src->ne[0] * src->ne[1],
              "src's [d, T] (summed over the rest)", err));
  NEED(be, sum_rows);
  return be->ops->sum_rows(be, src, dst, err);
}

int icl_op_smear(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *ks, icl_error *err) {
  TRY(chk_f32("smear", "k", k, err));
  TRY(chk_f32("smear", "ks", ks, err));
  TRY(chk_same_shape("smear", "k", k, "ks", ks, err));
  TRY(chk_grad("smear", "alpha", alpha, k->ne[1], "one per head of k", err));
  NEED(be, smear);
  return be->ops->smear(be, k, alpha, ks, err);
}

int icl_op_smear_bwd(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *dks, const icl_dt *dk,
                     const icl_dt *dalpha, icl_error *err) {
  TRY(chk_f32("smear_bwd", "k", k, err));
  TRY(chk_f32("smear_bwd", "dks", dks, err));
  if (dk) TRY(chk_f32("smear_bwd", "dk", dk, err));
  TRY(chk_same_shape("smear_bwd", "k", k, "dks", dks, err));
  if (dk) TRY(chk_same_shape("smear_bwd", "k", k, "dk", dk, err));
  TRY(chk_f32("smear_bwd", "alpha", alpha, err));
  if (dalpha) TRY(chk_f32("smear_bwd", "dalpha", dalpha, err));
  TRY(chk_grad("smear_bwd", "alpha", alpha, k->ne[1], "one per head of k", err));
  TRY(chk_grad("smear_bwd", "dalpha", dalpha, k->ne[1], "one per head of k", err));
  if (!dk && !dalpha) return icl_error_set(err, ICL_EINVAL, "smear_bwd: dk and dalpha both NULL: nothing to compute");
  NEED(be, smear_bwd);
  return be->ops->smear_bwd(be, k, alpha, dks, dk, dalpha, err);
}

int icl_op_xent(icl_backend *be, const icl_dt *logits, const icl_dt *targets, const icl_dt *weights,
                const icl_dt *probs, const icl_dt *dlogits, double *loss, icl_error *err) {
  TRY(chk_f32("xent", "logits", logits, err));
  int64_t nv = logits->ne[0], n = icl_dt_nrows(logits);
  TRY(chk_i32_n("xent", "targets", targets, n, "one per row of logits", err));
  TRY(chk_grad("xent", "weights", weights, n, "one per row of logits", err));
  TRY(chk_f32("xent", "probs", probs, err));
  TRY(chk_dim("xent", "probs", probs, "elements", icl_dt_nelem(probs), nv * n + n, "logits plus one per row", err));
  TRY(chk_grad("xent", "dlogits", dlogits, nv * n, "as many as logits", err));
  NEED(be, xent);
  return be->ops->xent(be, logits, targets, weights, probs, dlogits, loss, err);
}

int icl_op_optim_update(icl_backend *be, const icl_dt *w, const icl_dt *g, const icl_dt *m1, const icl_dt *m2,
                        const icl_optim_args *a, icl_error *err) {
  TRY(chk_f32("optim_update", "w", w, err));
  TRY(chk_grad("optim_update", "g", g, icl_dt_nelem(w), "as many as w", err));
  TRY(chk_grad("optim_update", "m1", m1, icl_dt_nelem(w), "as many as w", err));
  TRY(chk_grad("optim_update", "m2", m2, icl_dt_nelem(w), "as many as w", err));
  if (!g || !m1 || !m2) return icl_error_set(err, ICL_EINVAL, "optim_update: g, m1 and m2 are required");
  NEED(be, optim_update);
  return be->ops->optim_update(be, w, g, m1, m2, a, err);
}

int icl_op_run_split(icl_backend *be, int n, icl_split_fn fn, void *ctx, icl_error *err) {
  if (n < 1) return icl_error_set(err, ICL_EINVAL, "run_split: %d items, expected at least 1", n);
  if (be->ops->run_split) return be->ops->run_split(be, n, fn, ctx, err);
  int rc = ICL_OK;
  for (int i = 0; !rc && i < n; i++) rc = fn(ctx, i, be, err);
  return rc;
}
