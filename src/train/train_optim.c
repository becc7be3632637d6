/* Optimizers (SGD with momentum, AdamW with decoupled weight decay), the warmup + cosine
 * schedule, gradient-norm clipping, and the public forward / backward / step entry points.
 * Updates are elementwise (thread-count independent); the gradient norm sums in a fixed order. */
#include <math.h>
#include <string.h>

#include "train_internal.h"

float icl_optim_lr(const icl_optim_config *o, int64_t step) {
  if (o->warmup > 0 && step < o->warmup) return o->lr * (float)(step + 1) / (float)o->warmup;
  if (o->decay_steps <= o->warmup) return o->lr;
  double t = (double)(step - o->warmup) / (double)(o->decay_steps - o->warmup);
  if (t > 1.0) t = 1.0;
  return (float)(o->lr * (o->min_lr + (1.0 - o->min_lr) * 0.5 * (1.0 + cos(3.141592653589793 * t))));
}

/* sqrt of the sum of squared gradients, parameter by parameter in order. */
static double grad_norm(const icl_trainer *tr) {
  double s = 0.0;
  for (int i = 0; i < tr->np; i++) {
    const float *g = tr_g(tr, i);
    int64_t n = tr->p[i].ne[0] * tr->p[i].ne[1];
    for (int64_t j = 0; j < n; j++) s += (double)g[j] * g[j];
  }
  return sqrt(s);
}

/* Whether none of w[0..n) is Inf or NaN (exponent bits all ones): an integer test per element that the compiler
 * vectorizes (the float test w - w != 0 it replaces did not). */
int tr_all_finite(const float *w, int64_t n) {
  uint32_t any = 0;
  for (int64_t j = 0; j < n; j++) {
    uint32_t u;
    memcpy(&u, &w[j], sizeof u);
    any |= (u & 0x7f800000u) == 0x7f800000u;
  }
  return !any;
}

/* "NaN", "+Inf" or "-Inf" (printf's spelling of NaN varies with its sign bit). */
static const char *nonfinite_name(double x) { return x != x ? "NaN" : x > 0 ? "+Inf" : "-Inf"; }

int tr_optim_update(icl_trainer *tr, const icl_optim_config *o, icl_error *err) {
  tr->grad_norm = grad_norm(tr);
  if (!isfinite(tr->grad_norm))
    return icl_error_set(err, ICL_EINVAL, "train: the gradient norm is %s; weights not updated",
                         nonfinite_name(tr->grad_norm));
  double t = (double)(tr->step + 1);
  icl_optim_args c = {.lr = icl_optim_lr(o, tr->step), .b1 = o->beta1 > 0 ? o->beta1 : 0.9f,
                      .b2 = o->beta2 > 0 ? o->beta2 : 0.999f, .eps = o->eps > 0 ? o->eps : 1e-8f, .mom = o->momentum,
                      .gscale = o->clip > 0 && tr->grad_norm > o->clip ? (float)(o->clip / tr->grad_norm) : 1.0f,
                      .adam = o->kind == ICL_OPTIM_ADAMW};
  c.c1 = (float)(1.0 - pow(c.b1, t));
  c.c2 = (float)(1.0 - pow(c.b2, t));
  for (int i = 0, j; i < tr->np; i = j) {
    /* one call for a run of tensors that lie end to end with the same decay (elementwise: the same bits as one call
     * per tensor, and one hand-off to the threads instead of one per tensor) */
    int64_t off = tr->p[i].off, n = tr->p[i].ne[0] * tr->p[i].ne[1];
    c.wd = tr->p[i].decay ? o->weight_decay : 0.0f;
    for (j = i + 1; j < tr->np && tr->p[j].off == off + n && (tr->p[j].decay ? o->weight_decay : 0.0f) == c.wd; j++)
      n += tr->p[j].ne[0] * tr->p[j].ne[1];
    tr_views v = {.tr = tr};
    int rc = icl_op_optim_update(tr->be, tr_v(&v, tr->w + off, n, 1), tr_v(&v, tr->g + off, n, 1),
                                 tr_v(&v, tr->m1 + off, n, 1), tr_v(&v, tr->m2 + off, n, 1), &c, err);
    if (rc) return rc;
  }
  tr->step++;
  tr->opt_kind = o->kind;
  for (int i = 0; i < tr->np; i++) /* a diverged update: the caller stops; its last checkpoint stays good */
    if (!tr_all_finite(tr_w(tr, i), tr->p[i].ne[0] * tr->p[i].ne[1]))
      return icl_error_set(err, ICL_EINVAL, "train: the update made %s non-finite (the net cannot be saved)",
                           tr->p[i].name);
  return ICL_OK;
}

/* Whether x is finite and in [lo, hi]. */
static int in(double x, double lo, double hi) { return isfinite(x) && x >= lo && x <= hi; }

int icl_optim_check(const icl_optim_config *o, icl_error *err) {
  const char *bad = NULL;
  double v = 0;
  if (o->kind != ICL_OPTIM_ADAMW && o->kind != ICL_OPTIM_SGD) bad = "kind", v = o->kind;
  else if (!in(o->lr, 0, 1e3) || !(o->lr > 0)) bad = "lr", v = o->lr;
  else if (!in(o->min_lr, 0, 1)) bad = "min_lr", v = o->min_lr;
  else if (o->warmup < 0) bad = "warmup", v = (double)o->warmup;
  else if (o->decay_steps < 0) bad = "decay_steps", v = (double)o->decay_steps;
  else if (!in(o->beta1, 0, 1) || o->beta1 == 1) bad = "beta1", v = o->beta1;
  else if (!in(o->beta2, 0, 1) || o->beta2 == 1) bad = "beta2", v = o->beta2;
  else if (!in(o->eps, 0, 1)) bad = "eps", v = o->eps;
  else if (!in(o->momentum, 0, 1) || o->momentum == 1) bad = "momentum", v = o->momentum;
  else if (!in(o->weight_decay, 0, 1e3) || o->lr * o->weight_decay > 1) bad = "weight_decay", v = o->weight_decay;
  else if (!in(o->clip, 0, 1e30)) bad = "clip", v = o->clip;
  if (!bad) return ICL_OK;
  return icl_error_set(err, ICL_EINVAL, "optimizer: %s = %g is out of range (lr in (0, 1000], min_lr in [0, 1], "
                       "warmup and decay_steps >= 0, beta1, beta2, momentum in [0, 1), eps in [0, 1], "
                       "weight_decay >= 0 with lr * weight_decay <= 1, clip >= 0, all finite)", bad, v);
}

/* ---- batches and the public passes ---------------------------------------------------------------- */

/* Checks a batch against the model and copies it into the trainer's buffers. */
static int load_batch(icl_trainer *tr, const icl_train_batch *b, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  if (b->B < 1 || b->T < 1 || !b->targets)
    return icl_error_set(err, ICL_EINVAL, "train: batch needs B, T >= 1 and targets (got B %lld, T %lld)",
                         (long long)b->B, (long long)b->T);
  int rc = tr_reserve(tr, b->B, b->T, err);
  if (rc) return rc;
  int64_t N = tr->N, nout = tr_n_out(c);
  for (int64_t i = 0; i < N; i++) {
    int32_t t = b->tokens ? b->tokens[i] : -1, y = b->targets[i];
    if (t >= c->vocab || t < -1 || (t >= 0 && tr->tok < 0))
      return icl_error_set(err, ICL_EINVAL, "train: token %d at %lld is outside -1..%d", t, (long long)i, c->vocab - 1);
    if (y < -1 || y >= nout)
      return icl_error_set(err, ICL_EINVAL, "train: target %d at %lld is outside -1..%lld", y, (long long)i, (long long)nout - 1);
    tr->tokens[i] = t, tr->targets[i] = y, tr->mask[i] = b->mask ? b->mask[i] : 1.0f;
  }
  if (b->mask)
    for (int64_t i = 0; i < N; i++)
      if (!(b->mask[i] >= 0) || !isfinite(b->mask[i]))
        return icl_error_set(err, ICL_EINVAL, "train: mask %g at %lld, expected a finite weight >= 0",
                             (double)b->mask[i], (long long)i);
  if (c->input_len > 0 && b->inputs) memcpy(tr->inputs, b->inputs, (size_t)(N * c->input_len) * sizeof(float));
  else if (c->input_len > 0) memset(tr->inputs, 0, (size_t)(N * c->input_len) * sizeof(float));
  return ICL_OK;
}

int icl_trainer_forward(icl_trainer *tr, const icl_train_batch *batch, double *loss, icl_error *err) {
  int rc = load_batch(tr, batch, err);
  if (!rc) rc = tr_forward(tr, err);
  if (loss) *loss = rc ? 0.0 : tr->loss;
  return rc;
}

int icl_trainer_backward(icl_trainer *tr, icl_error *err) {
  if (tr->N == 0) return icl_error_set(err, ICL_EINVAL, "train: backward before any forward");
  return tr_backward(tr, err);
}

int icl_trainer_step(icl_trainer *tr, const icl_train_batch *batch, const icl_optim_config *opt, double *loss,
                     icl_error *err) {
  int rc = icl_optim_check(opt, err);
  if (rc) return rc;
  if (tr->opt_kind >= 0 && tr->opt_kind != opt->kind)
    return icl_error_set(err, ICL_EINVAL, "train: the net's optimizer state is %s, optim is %s (moments of one "
                         "optimizer do not mean anything to the other)", tr->opt_kind == ICL_OPTIM_SGD ? "sgd" : "adamw",
                         opt->kind == ICL_OPTIM_SGD ? "sgd" : "adamw");
  rc = icl_trainer_forward(tr, batch, loss, err);
  if (!rc && !isfinite(tr->loss))
    rc = icl_error_set(err, ICL_EINVAL, "train: the loss is %s; weights not updated", nonfinite_name(tr->loss));
  if (!rc) rc = tr_backward(tr, err);
  if (!rc) tr_run_model_drop(tr); /* the weights change below */
  if (!rc) rc = tr_optim_update(tr, opt, err);
  return rc;
}
