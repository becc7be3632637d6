/* The backward section of the op table: the backend contract's training entries (backend.h, through the checked
 * wrappers of src/core/ops_train.c; the CPU backend's today) on every CPU SIMD level against the float64
 * references of src/ref/ref_backward.c, and those references against central finite differences of their own
 * float64 forward (shapes flagged "fd"). Another backend's training entries get a target here when they exist.
 * Metric: max |got - want| / max |want| over each output. */
#ifndef ICL_OPS_BWD_H
#define ICL_OPS_BWD_H

#include "ops_harness.h"
#include "ref_backward.h"
#include "cpu_train_ops.h"

enum { OB_MAX = 5, OB_FD = 1 };

/* One backward case: float inputs, ids, the upstream gradient dy (also the finite-difference
 * weights: loss = sum(y * dy)), and the outputs (gradients) with the input each differentiates. */
typedef struct ob_case {
  const ot_shape *s;
  uint64_t seed;
  int n_in, n_out;
  float *in[OB_MAX];
  int64_t n_el[OB_MAX];
  int32_t *ids;
  float *dy;
  int64_t ny;
  int64_t n_g[OB_MAX];
  int g_of[OB_MAX]; /* the input an output is the gradient of; -1: not a gradient (no finite differences) */
  const char *g_name[OB_MAX];
} ob_case;

typedef struct ob_op {
  const char *name, *dims;
  void (*gen)(ob_case *c);
  /* the backend's entry on host memory (ob_views): outputs g[] start zeroed */
  int (*run)(icl_backend *be, const ob_case *c, float *g[], icl_error *err);
  /* the float64 reference from double copies xd of the inputs: outputs g[] start zeroed */
  void (*ref)(const ob_case *c, double *xd[], double *g[]);
  /* the float64 forward (ny values) for finite differences; NULL: none */
  void (*fwd)(const ob_case *c, double *xd[], double *y);
} ob_op;

typedef struct ob_entry {
  const ob_op *op;
  const ot_shape *shapes;
  size_t n_shapes;
  ot_tol cpu, fd;
} ob_entry;

static float *ob_in(ob_case *c, int64_t n, float lo, float hi) {
  float *x = ot_xmalloc((size_t)n * sizeof *x);
  t_rand_fill(x, n, c->seed + 101 * (uint64_t)c->n_in, lo, hi);
  c->n_el[c->n_in] = n;
  return c->in[c->n_in++] = x;
}
static void ob_out(ob_case *c, const char *name, int64_t n, int of) {
  c->g_name[c->n_out] = name, c->n_g[c->n_out] = n, c->g_of[c->n_out++] = of;
}
static void ob_dy(ob_case *c, int64_t n) {
  c->ny = n, c->dy = ot_xmalloc((size_t)n * sizeof *c->dy);
  t_rand_fill(c->dy, n, c->seed + 977, -1.0f, 1.0f);
}
/* Host memory as buffers of the backend under test (buf_wrap), for one run: ob_v a view [a, b, c, d] of p
 * (NULL for a NULL p), ob_views_free releases them. */
typedef struct ob_views {
  icl_backend *be;
  icl_buf *b[12];
  icl_dt t[12];
  int n;
} ob_views;
static const icl_dt *ob_v(ob_views *v, const void *p, uint32_t type, int64_t a, int64_t b, int64_t c, int64_t d) {
  if (!p) return NULL;
  icl_error err;
  int i = v->n++;
  CHECKF(v->be->ops->buf_wrap(v->be, (void *)p, (size_t)(a * b * c * d) * 4, &v->b[i], &err) == ICL_OK, "wrap: %s",
         err.msg);
  v->t[i] = (icl_dt){.buf = v->b[i], .type = type, .ne = {a, b, c, d}};
  return &v->t[i];
}
static const icl_dt *ob_f(ob_views *v, const float *p, int64_t a, int64_t b) { return ob_v(v, p, ICL_TYPE_F32, a, b, 1, 1); }
static int ob_views_free(ob_views *v, int rc) {
  for (int i = 0; i < v->n; i++) v->be->ops->buf_free(v->be, v->b[i]);
  return rc;
}
static double *ob_dyd(const ob_case *c) {
  double *d = ot_xmalloc((size_t)c->ny * sizeof *d);
  for (int64_t i = 0; i < c->ny; i++) d[i] = c->dy[i];
  return d;
}

#include "ops_bwd_defs.h"

/* "rms_norm d=12 rows=5 fd" into buf. */
static const char *ob_case_name(const ob_entry *e, const ob_case *c, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "%s %s", e->op->name, c->s->cls);
  const char *d = e->op->dims;
  for (int i = 0; *d && i < 7 && k < n; i++) {
    size_t len = strcspn(d, ",");
    if (*d == '-') (void)0; /* unused slot */
    else if (i < 6) k += (size_t)snprintf(buf + k, n - k, " %.*s=%" PRId64, (int)len, d, c->s->n[i]);
    else k += (size_t)snprintf(buf + k, n - k, " %.*s=%g", (int)len, d, c->s->f);
    d += len + (d[len] == ',');
  }
  if (k < n && (c->s->flags & OB_FD)) snprintf(buf + k, n - k, " fd");
  return buf;
}

/* sum(fwd(xd) * dy). */
static double ob_loss(const ob_op *op, const ob_case *c, double *xd[], double *y, const double *dy) {
  op->fwd(c, xd, y);
  double s = 0.0;
  for (int64_t i = 0; i < c->ny; i++) s += y[i] * dy[i];
  return s;
}

/* The reference's gradient of output i against central differences of the float64 forward. */
static double ob_fd(const ob_op *op, const ob_case *c, double *xd[], int i, const double *want) {
  const double h = 1e-5;
  int j = c->g_of[i];
  double *y = ot_xmalloc((size_t)c->ny * sizeof *y), *dy = ob_dyd(c), worst = 0.0, m = 1e-30;
  for (int64_t k = 0; k < c->n_el[j]; k++) {
    double x0 = xd[j][k];
    xd[j][k] = x0 + h;
    double lp = ob_loss(op, c, xd, y, dy);
    xd[j][k] = x0 - h;
    double lm = ob_loss(op, c, xd, y, dy);
    xd[j][k] = x0;
    double fd = (lp - lm) / (2.0 * h);
    worst = fabs(fd - want[k]) > worst ? fabs(fd - want[k]) : worst;
    m = fabs(want[k]) > m ? fabs(want[k]) : m;
  }
  free(y), free(dy);
  return worst / m;
}

/* Runs one case on every CPU target (exact precision) and, for fd shapes, the finite differences. */
static void ob_run_case(const ob_entry *e, ob_case *c) {
  char what[160];
  ob_case_name(e, c, what, sizeof what);
  double *xd[OB_MAX] = {0}, *want[OB_MAX] = {0};
  float *got[OB_MAX] = {0};
  for (int j = 0; j < c->n_in; j++) {
    xd[j] = ot_xmalloc((size_t)c->n_el[j] * sizeof(double));
    for (int64_t k = 0; k < c->n_el[j]; k++) xd[j][k] = c->in[j][k];
  }
  for (int i = 0; i < c->n_out; i++) want[i] = calloc((size_t)c->n_g[i], sizeof(double));
  e->op->ref(c, xd, want);
  for (int t = 1; t < ot_n_targets; t++) {
    if (ot_targets[t].kind != OT_CPU || ot_targets[t].fast) continue;
    for (int i = 0; i < c->n_out; i++) free(got[i]), got[i] = calloc((size_t)c->n_g[i], sizeof(float));
    icl_error err = {0};
    ot_targets[t].be->precision = ICL_PRECISION_EXACT; /* targets share backends; the trainer runs EXACT */
    int rc = e->op->run(ot_targets[t].be, c, got, &err);
    CHECKF(rc == ICL_OK, "%s on %s: %s", what, ot_targets[t].name, err.msg);
    for (int i = 0; rc == ICL_OK && i < c->n_out; i++) {
      double r = t_rel_err(got[i], want[i], c->n_g[i]);
      if (ot_verbose) printf("  %-44s %-8s %-26s rel %.3g\n", what, c->g_name[i], ot_targets[t].name, r);
      CHECKF(r <= e->cpu.v, "%s: %s on %s: rel error %.3g > %.3g vs float64 (%s)", what, c->g_name[i],
             ot_targets[t].name, r, e->cpu.v, e->cpu.why);
    }
  }
  for (int i = 0; e->op->fwd && (c->s->flags & OB_FD) && i < c->n_out; i++) {
    if (c->g_of[i] < 0) continue;
    double r = ob_fd(e->op, c, xd, i, want[i]);
    if (ot_verbose) printf("  %-44s %-8s %-26s rel %.3g\n", what, c->g_name[i], "float64 vs finite diff.", r);
    CHECKF(r <= e->fd.v, "%s: %s: float64 reference vs finite differences %.3g > %.3g (%s)", what, c->g_name[i], r,
           e->fd.v, e->fd.why);
  }
  for (int i = 0; i < OB_MAX; i++) free(xd[i]), free(want[i]), free(got[i]);
}

static void ob_case_free(ob_case *c) {
  for (int j = 0; j < c->n_in; j++) free(c->in[j]);
  free(c->ids), free(c->dy);
}

static void ot_bwd_run(void) {
  for (size_t k = 0; k < sizeof OB_TABLE / sizeof OB_TABLE[0]; k++) {
    const ob_entry *e = &OB_TABLE[k];
    if (ot_only_op && strcmp(ot_only_op, e->op->name) != 0) continue;
    double t0 = ot_now();
    for (size_t s = 0; s < e->n_shapes; s++) {
      if (ot_quick && strcmp(e->shapes[s].cls, "big") == 0) continue;
      ob_case c = {.s = &e->shapes[s], .seed = 5000 + 100 * k + s};
      e->op->gen(&c);
      ob_run_case(e, &c);
      ob_case_free(&c);
    }
    printf("%-11s backward entry %2zu: %6.2f s\n", e->op->name, k, ot_now() - t0);
  }
}

static void ot_bwd_list(void) {
  for (size_t k = 0; k < sizeof OB_TABLE / sizeof OB_TABLE[0]; k++) {
    const ob_entry *e = &OB_TABLE[k];
    printf("%-11s (backward) f32\n", e->op->name);
    for (size_t s = 0; s < e->n_shapes; s++) {
      ob_case c = {.s = &e->shapes[s]};
      char buf[160];
      ob_case_name(e, &c, buf, sizeof buf);
      printf("    %s\n", strchr(buf, ' ') + 1);
    }
  }
}

#endif
