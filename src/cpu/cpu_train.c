/* The CPU backend's training entries of the backend contract (backend.h, "training"): views unpacked to the
 * host pointers and sizes of the training ops (cpu_train_ops.h). Shapes were checked by the wrappers (ops.c). */
#include "cpu_internal.h"
#include "cpu_train_ops.h"

static float *f32_or_null(const icl_dt *t) { return t ? cpu_f32(t) : NULL; }
static const int32_t *i32(const icl_dt *t) { return (const int32_t *)cpu_ptr(t); }

int cpu_matmul_bwd(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                   const icl_dt *dx, int write, icl_error *err) {
  return cpu_tr_matmul_bwd(cpu_of(be), cpu_f32(w), w->ne[0], w->ne[1], cpu_f32(x), icl_dt_nrows(x), cpu_f32(dy),
                           f32_or_null(dw), f32_or_null(dx), write, err);
}

int cpu_matmul_bwd_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *dy,
                         const icl_dt *dw, const icl_dt *dx, int write, icl_error *err) {
  const float *pw[ICL_MATMUL_GROUP_MAX], *pdy[ICL_MATMUL_GROUP_MAX];
  float *pdw[ICL_MATMUL_GROUP_MAX];
  for (int i = 0; i < count && i < ICL_MATMUL_GROUP_MAX; i++)
    pw[i] = cpu_f32(&w[i]), pdy[i] = cpu_f32(&dy[i]), pdw[i] = dw ? cpu_f32(&dw[i]) : NULL;
  return cpu_tr_matmul_bwd_group(cpu_of(be), count, pw, w->ne[0], w->ne[1], cpu_f32(x), icl_dt_nrows(x), pdy,
                                 dw ? pdw : NULL, f32_or_null(dx), write, err);
}

int cpu_norm_fwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                 const icl_dt *y, const icl_dt *stats, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  int64_t d = x->ne[0], n = icl_dt_nrows(x);
  if (!rms) { /* the statistics from the forward's own sums (the same bits as norm_bwd's) */
    cpu_layer_norm_rows(cb, cpu_f32(x), f32_or_null(w), f32_or_null(b), d, n, eps, cpu_f32(y), cpu_f32(stats));
    return ICL_OK;
  }
  /* RMSNorm's forward sums in another order than norm_bwd: its statistics come from norm_bwd's own pass */
  int rc = cpu_rms_norm(be, x, w, eps, y, err);
  if (!rc) cpu_tr_rms_norm_bwd(cb, cpu_f32(x), f32_or_null(w), d, n, eps, cpu_f32(x), NULL, NULL, cpu_f32(stats), 0);
  return rc;
}

int cpu_norm_bwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *dy,
                 const icl_dt *dx, const icl_dt *dw, const icl_dt *db, const icl_dt *stats, int stats_in,
                 icl_error *err) {
  (void)err;
  cpu_backend *cb = cpu_of(be);
  int64_t d = x->ne[0], n = icl_dt_nrows(x);
  if (rms) cpu_tr_rms_norm_bwd(cb, cpu_f32(x), f32_or_null(w), d, n, eps, cpu_f32(dy), f32_or_null(dx), f32_or_null(dw),
                               cpu_f32(stats), stats_in);
  else cpu_tr_layer_norm_bwd(cb, cpu_f32(x), f32_or_null(w), d, n, eps, cpu_f32(dy), f32_or_null(dx), f32_or_null(dw),
                             f32_or_null(db), cpu_f32(stats), stats_in);
  return ICL_OK;
}

int cpu_attention_bwd(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *P,
                      const icl_dt *dz, float scale, const icl_dt *dq, const icl_dt *dk, const icl_dt *dv,
                      icl_error *err) {
  return cpu_tr_attention_bwd(cpu_of(be), cpu_f32(q), cpu_f32(k), cpu_f32(v), cpu_f32(P), cpu_f32(dz), q->ne[0],
                              q->ne[1], q->ne[2], q->ne[3], scale, cpu_f32(dq), cpu_f32(dk), cpu_f32(dv), err);
}

int cpu_rope_bwd(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, icl_error *err) {
  (void)err;
  cpu_tr_rope_bwd(cpu_of(be), cpu_f32(x), x->ne[0], x->ne[1], x->ne[2] * x->ne[3], i32(pos), n_rot, base);
  return ICL_OK;
}

int cpu_gelu_bwd(icl_backend *be, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err) {
  (void)err;
  cpu_tr_gelu_bwd(cpu_of(be), cpu_f32(x), cpu_f32(dy), icl_dt_nelem(x), cpu_f32(dx));
  return ICL_OK;
}

int cpu_relu_bwd(icl_backend *be, const icl_dt *y, const icl_dt *dy, const icl_dt *dx, icl_error *err) {
  (void)err;
  cpu_tr_relu_bwd(cpu_of(be), cpu_f32(y), cpu_f32(dy), icl_dt_nelem(y), cpu_f32(dx));
  return ICL_OK;
}

int cpu_embed(icl_backend *be, const icl_dt *e, const icl_dt *ids, const icl_dt *x, icl_error *err) {
  (void)err;
  cpu_tr_embed_fwd(cpu_of(be), cpu_f32(e), e->ne[0], i32(ids), icl_dt_nelem(ids), cpu_f32(x));
  return ICL_OK;
}

int cpu_embed_bwd(icl_backend *be, const icl_dt *ids, const icl_dt *dx, const icl_dt *de, icl_error *err) {
  (void)err;
  cpu_tr_embed_bwd(cpu_of(be), i32(ids), cpu_f32(dx), dx->ne[0], icl_dt_nelem(ids), cpu_f32(de));
  return ICL_OK;
}

int cpu_sum_rows(icl_backend *be, const icl_dt *src, const icl_dt *dst, icl_error *err) {
  (void)err;
  cpu_tr_sum_rows(cpu_of(be), cpu_f32(src), src->ne[0], src->ne[1], src->ne[2] * src->ne[3], cpu_f32(dst));
  return ICL_OK;
}

int cpu_smear(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *ks, icl_error *err) {
  (void)err;
  cpu_tr_smear_fwd(cpu_of(be), cpu_f32(k), cpu_f32(alpha), k->ne[0], k->ne[1], k->ne[2], k->ne[3], cpu_f32(ks));
  return ICL_OK;
}

int cpu_smear_bwd(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *dks, const icl_dt *dk,
                  const icl_dt *dalpha, icl_error *err) {
  (void)err;
  cpu_tr_smear_bwd(cpu_of(be), cpu_f32(k), cpu_f32(alpha), k->ne[0], k->ne[1], k->ne[2], k->ne[3], cpu_f32(dks),
                   f32_or_null(dk), f32_or_null(dalpha));
  return ICL_OK;
}

int cpu_xent(icl_backend *be, const icl_dt *logits, const icl_dt *targets, const icl_dt *weights, const icl_dt *probs,
             const icl_dt *dlogits, double *loss, icl_error *err) {
  (void)err;
  *loss = cpu_tr_xent(cpu_of(be), cpu_f32(logits), logits->ne[0], icl_dt_nrows(logits), i32(targets),
                      f32_or_null(weights), cpu_f32(probs), f32_or_null(dlogits));
  return ICL_OK;
}

int cpu_optim_update(icl_backend *be, const icl_dt *w, const icl_dt *g, const icl_dt *m1, const icl_dt *m2,
                     const icl_optim_args *a, icl_error *err) {
  (void)err;
  cpu_tr_optim_update(cpu_of(be), cpu_f32(w), cpu_f32(g), cpu_f32(m1), cpu_f32(m2), icl_dt_nelem(w), a);
  return ICL_OK;
}
