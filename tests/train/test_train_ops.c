/* The trainer's ops on the CPU backend against the float64 references (src/ref/ref_backward.c),
 * and the references against central finite differences of their own float64 forward. Each op
 * prints both relative errors: max |got - want| / max |want| over the checked elements.
 * Tolerances: CPU (f32) vs float64 reference 2e-5 (f32 rounding over sums of up to a few hundred
 * terms, measured ~1e-7..3e-6); finite differences (h = 1e-5, float64) 1e-6 (truncation error
 * ~h^2 times the third derivative, measured ~1e-10..1e-8). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "ref_backward.h"
#include "testutil.h"
#include "cpu_train_ops.h"
#include "train_internal.h"

#define TOL_CPU 2e-5
#define TOL_FD 1e-6
#define FD_H 1e-5

static cpu_backend *g_cb;
static uint64_t g_seed = 1;

static float *rnd(int64_t n, float lo, float hi) {
  float *x = malloc((size_t)n * sizeof *x);
  t_rand_fill(x, n, g_seed++, lo, hi);
  return x;
}
static double *dup_d(const float *x, int64_t n) {
  double *y = malloc((size_t)n * sizeof *y);
  for (int64_t i = 0; i < n; i++) y[i] = x[i];
  return y;
}
static double *zeros_d(int64_t n) { return calloc((size_t)n, sizeof(double)); }
static float *zeros_f(int64_t n) { return calloc((size_t)n, sizeof(float)); }

/* fd < 0: the case is too large for finite differences (the small case of the op ran them). */
static void report(const char *op, const char *what, double cpu, double fd) {
  if (fd < 0) printf("%-12s %-10s cpu-vs-ref %.2e   (finite differences on the small case)\n", op, what, cpu);
  else printf("%-12s %-10s cpu-vs-ref %.2e   ref-vs-fd %.2e\n", op, what, cpu, fd);
  CHECKF(cpu < TOL_CPU, "%s %s: cpu vs ref %.3e", op, what, cpu);
  CHECKF(fd < TOL_FD, "%s %s: ref vs fd %.3e", op, what, fd);
}

/* A float64 forward under test: fills y from the inputs it captured. */
typedef void (*fwd_fn)(void *ctx, double *y);

/* Loss sum(y * r) of the forward. */
static double fd_loss(fwd_fn f, void *ctx, double *y, const double *r, int64_t ny) {
  f(ctx, y);
  double s = 0.0;
  for (int64_t i = 0; i < ny; i++) s += y[i] * r[i];
  return s;
}

/* Relative error of the analytic gradient g of input x (n) against central differences. */
static double fd_check(fwd_fn f, void *ctx, double *x, int64_t n, const double *g, const double *r, int64_t ny) {
  double *y = zeros_d(ny), *fd = zeros_d(n);
  for (int64_t i = 0; i < n; i++) {
    double x0 = x[i];
    x[i] = x0 + FD_H;
    double lp = fd_loss(f, ctx, y, r, ny);
    x[i] = x0 - FD_H;
    double lm = fd_loss(f, ctx, y, r, ny);
    x[i] = x0;
    fd[i] = (lp - lm) / (2.0 * FD_H);
  }
  double e = t_rel_err_d(fd, g, n);
  free(y);
  free(fd);
  return e;
}

/* f32 host view wrapper for the backend's forward ops. */
static icl_dt hv(struct icl_buf *b, const void *p, int64_t n0, int64_t n1, int64_t n2, uint32_t type) {
  b->data = (void *)p;
  b->size = (size_t)(n0 * n1 * n2) * 4;
  return (icl_dt){.buf = b, .type = type, .ne = {n0, n1, n2, 1}};
}

/* ---- matmul -------------------------------------------------------------------------------------- */

typedef struct mm_case {
  double *W, *b, *x;
  int64_t K, R, n;
} mm_case;

static void mm_fwd(void *ctx, double *y) {
  mm_case *c = ctx;
  icl_refd_matmul(c->W, c->b, c->K, c->R, c->x, c->n, y);
}

static void test_matmul(int64_t K, int64_t R, int64_t n, int fd) {
  float *W = rnd(R * K, -1, 1), *b = rnd(R, -1, 1), *x = rnd(n * K, -1, 1), *dy = rnd(n * R, -1, 1);
  float *y = zeros_f(n * R), *dW = zeros_f(R * K), *db = zeros_f(R), *dx = zeros_f(n * K);
  mm_case c = {dup_d(W, R * K), dup_d(b, R), dup_d(x, n * K), K, R, n};
  double *yd = zeros_d(n * R), *rd = dup_d(dy, n * R);
  double *gW = zeros_d(R * K), *gb = zeros_d(R), *gx = zeros_d(n * K);
  struct icl_buf bw, bx, by;
  icl_dt vw = hv(&bw, W, K, R, 1, ICL_TYPE_F32), vx = hv(&bx, x, K, n, 1, ICL_TYPE_F32), vy = hv(&by, y, R, n, 1, ICL_TYPE_F32);
  icl_error err;
  CHECK(icl_op_matmul(&g_cb->be, &vw, &vx, &vy, &err) == ICL_OK);
  for (int64_t i = 0; i < n * R; i++) y[i] += b[i % R];
  mm_fwd(&c, yd);
  CHECK(cpu_tr_matmul_bwd(g_cb, W, K, R, x, n, dy, dW, dx, 0, &err) == ICL_OK);
  cpu_tr_sum_rows(g_cb, dy, R, 1, n, db);
  icl_refd_matmul_bwd(c.W, K, R, c.x, n, rd, gW, gb, gx);
  char what[64];
  snprintf(what, sizeof what, "%lldx%lldx%lld", (long long)K, (long long)R, (long long)n);
  printf("matmul       %-10s forward cpu-vs-ref %.2e\n", what, t_rel_err(y, yd, n * R));
  CHECK(t_rel_err(y, yd, n * R) < TOL_CPU);
  report("matmul dW", what, t_rel_err(dW, gW, R * K), fd ? fd_check(mm_fwd, &c, c.W, R * K, gW, rd, n * R) : -1);
  report("matmul db", what, t_rel_err(db, gb, R), fd ? fd_check(mm_fwd, &c, c.b, R, gb, rd, n * R) : -1);
  report("matmul dx", what, t_rel_err(dx, gx, n * K), fd ? fd_check(mm_fwd, &c, c.x, n * K, gx, rd, n * R) : -1);
  free(W), free(b), free(x), free(dy), free(y), free(dW), free(db), free(dx);
  free(c.W), free(c.b), free(c.x), free(yd), free(rd), free(gW), free(gb), free(gx);
}

/* matmul_bwd's write flags through the checked wrapper: a written dW / dx has the bits of accumulating into zeros
 * and never reads its old contents (NaN-filled here); accumulating onto nonzero contents adds the written sum; a
 * flag outside the two is rejected. K, R, n on both sides of the strided gemm's in-place limit (the dW reduction
 * runs over the n tokens). */
static void test_matmul_write(int64_t K, int64_t R, int64_t n) {
  float *W = rnd(R * K, -1, 1), *x = rnd(n * K, -1, 1), *dy = rnd(n * R, -1, 1), *y0W = rnd(R * K, -1, 1);
  float *y0x = rnd(n * K, -1, 1);
  float *aW = zeros_f(R * K), *ax = zeros_f(n * K);
  float *wW = malloc((size_t)(R * K) * 4), *wx = malloc((size_t)(n * K) * 4);
  float *cW = malloc((size_t)(R * K) * 4), *cx = malloc((size_t)(n * K) * 4);
  for (int64_t i = 0; i < R * K; i++) wW[i] = NAN, cW[i] = y0W[i];
  for (int64_t i = 0; i < n * K; i++) wx[i] = NAN, cx[i] = y0x[i];
  struct icl_buf b[9];
  icl_dt vw = hv(&b[0], W, K, R, 1, ICL_TYPE_F32), vx = hv(&b[1], x, K, n, 1, ICL_TYPE_F32);
  icl_dt vdy = hv(&b[2], dy, R, n, 1, ICL_TYPE_F32);
  icl_dt vaW = hv(&b[3], aW, K, R, 1, ICL_TYPE_F32), vax = hv(&b[4], ax, K, n, 1, ICL_TYPE_F32);
  icl_dt vwW = hv(&b[5], wW, K, R, 1, ICL_TYPE_F32), vwx = hv(&b[6], wx, K, n, 1, ICL_TYPE_F32);
  icl_dt vcW = hv(&b[7], cW, K, R, 1, ICL_TYPE_F32), vcx = hv(&b[8], cx, K, n, 1, ICL_TYPE_F32);
  icl_error err;
  icl_backend *be = &g_cb->be;
  CHECK(icl_op_matmul_bwd(be, &vw, &vx, &vdy, &vaW, &vax, 0, &err) == ICL_OK);
  CHECK(icl_op_matmul_bwd(be, &vw, &vx, &vdy, &vwW, &vwx, ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX, &err) == ICL_OK);
  CHECK(icl_op_matmul_bwd(be, &vw, &vx, &vdy, &vcW, &vcx, 0, &err) == ICL_OK);
  int64_t badW = 0, badx = 0, badcW = 0, badcx = 0;
  for (int64_t i = 0; i < R * K; i++) {
    badW += memcmp(&aW[i], &wW[i], 4) != 0;
    float s = y0W[i] + wW[i];
    badcW += memcmp(&s, &cW[i], 4) != 0;
  }
  for (int64_t i = 0; i < n * K; i++) {
    badx += memcmp(&ax[i], &wx[i], 4) != 0;
    float s = y0x[i] + wx[i];
    badcx += memcmp(&s, &cx[i], 4) != 0;
  }
  printf("matmul write %lldx%lldx%lld: dW %lld, dx %lld elements differ from accumulating into zeros; "
         "accumulated onto old contents: %lld, %lld differ from old + written\n", (long long)K, (long long)R,
         (long long)n, (long long)badW, (long long)badx, (long long)badcW, (long long)badcx);
  CHECK(badW == 0 && badx == 0 && badcW == 0 && badcx == 0);
  /* dx written alone: dW still accumulates (onto the written dW: twice the sum, exactly) */
  CHECK(icl_op_matmul_bwd(be, &vw, &vx, &vdy, &vwW, &vwx, ICL_BWD_WRITE_DX, &err) == ICL_OK);
  int64_t twice = 0;
  for (int64_t i = 0; i < R * K; i++) twice += wW[i] != 2.0f * aW[i];
  CHECKF(twice == 0, "dW accumulated when only dx is written: %lld elements differ", (long long)twice);
  CHECK(icl_op_matmul_bwd(be, &vw, &vx, &vdy, &vwW, &vwx, 4, &err) == ICL_EINVAL);
  CHECKF(strstr(err.msg, "write flags") != NULL, "bad write flag message: %s", err.msg);
  free(W), free(x), free(dy), free(y0W), free(y0x), free(aW), free(ax), free(wW), free(wx), free(cW), free(cx);
}

/* matmul_bwd_group (q, k, v on one input) against count matmul_bwd calls in turn, bit for bit: dW written (old
 * contents NaN), dx written by the first product or accumulated onto old contents; the CPU backend's group and the
 * wrapper's fallback (the entry removed). n on both sides of the strided gemm's in-place limit (dW's reduction). */
static void test_matmul_group(int count, int64_t K, int64_t R, int64_t n, int write) {
  enum { G = ICL_MATMUL_GROUP_MAX };
  float *W[G], *dy[G], *rW[G], *gW[G], *w0[G], *x = rnd(n * K, -1, 1), *x0 = rnd(n * K, -1, 1);
  float *rx = malloc((size_t)(n * K) * 4), *gx = malloc((size_t)(n * K) * 4);
  struct icl_buf b[4 * G + 3];
  icl_dt vw[G], vdy[G], vrW[G], vgW[G];
  for (int i = 0; i < count; i++) {
    W[i] = rnd(R * K, -1, 1), dy[i] = rnd(n * R, -1, 1), rW[i] = rnd(R * K, -1, 1), gW[i] = rnd(R * K, -1, 1);
    w0[i] = rnd(R * K, -1, 1);
    for (int64_t j = 0; j < R * K; j++) rW[i][j] = (write & ICL_BWD_WRITE_DW) ? NAN : w0[i][j];
    vw[i] = hv(&b[4 * i], W[i], K, R, 1, ICL_TYPE_F32), vdy[i] = hv(&b[4 * i + 1], dy[i], R, n, 1, ICL_TYPE_F32);
    vrW[i] = hv(&b[4 * i + 2], rW[i], K, R, 1, ICL_TYPE_F32), vgW[i] = hv(&b[4 * i + 3], gW[i], K, R, 1, ICL_TYPE_F32);
  }
  icl_dt vx = hv(&b[4 * G], x, K, n, 1, ICL_TYPE_F32), vrx = hv(&b[4 * G + 1], rx, K, n, 1, ICL_TYPE_F32);
  icl_dt vgx = hv(&b[4 * G + 2], gx, K, n, 1, ICL_TYPE_F32);
  icl_error err;
  icl_backend *be = &g_cb->be;
  const icl_backend_ops *ops = be->ops;
  icl_backend_ops no_group = *ops;
  no_group.matmul_bwd_group = NULL;
  for (int64_t j = 0; j < n * K; j++) rx[j] = (write & ICL_BWD_WRITE_DX) ? NAN : x0[j];
  for (int i = 0; i < count; i++)
    CHECK(icl_op_matmul_bwd(be, &vw[i], &vx, &vdy[i], &vrW[i], &vrx, i ? write & ICL_BWD_WRITE_DW : write, &err) == 0);
  for (int path = 0; path < 2; path++) { /* 0: the backend's group, 1: the wrapper's fallback */
    for (int64_t j = 0; j < n * K; j++) gx[j] = (write & ICL_BWD_WRITE_DX) ? NAN : x0[j];
    for (int i = 0; i < count; i++)
      for (int64_t j = 0; j < R * K; j++) gW[i][j] = (write & ICL_BWD_WRITE_DW) ? NAN : w0[i][j];
    be->ops = path ? &no_group : ops;
    CHECK(icl_op_matmul_bwd_group(be, count, vw, &vx, vdy, vgW, &vgx, write, &err) == ICL_OK);
    be->ops = ops;
    int64_t badW = 0, badx = 0;
    for (int i = 0; i < count; i++)
      for (int64_t j = 0; j < R * K; j++) badW += memcmp(&rW[i][j], &gW[i][j], 4) != 0;
    for (int64_t j = 0; j < n * K; j++) badx += memcmp(&rx[j], &gx[j], 4) != 0;
    printf("matmul group %d x %lldx%lldx%lld write %d (%s): dW %lld, dx %lld elements differ from matmul_bwd in turn\n",
           count, (long long)K, (long long)R, (long long)n, write, path ? "fallback" : "backend", (long long)badW,
           (long long)badx);
    CHECK(badW == 0 && badx == 0);
  }
  CHECK(icl_op_matmul_bwd_group(be, G + 1, vw, &vx, vdy, vgW, &vgx, write, &err) == ICL_EINVAL);
  for (int i = 0; i < count; i++) free(W[i]), free(dy[i]), free(rW[i]), free(gW[i]), free(w0[i]);
  free(x), free(x0), free(rx), free(gx);
}

/* ---- norms --------------------------------------------------------------------------------------- */

typedef struct norm_case {
  double *x, *w, *b;
  int64_t d, n;
  int rms;
} norm_case;

static void norm_fwd(void *ctx, double *y) {
  norm_case *c = ctx;
  if (c->rms) icl_refd_rms_norm(c->x, c->w, c->d, c->n, 1e-5, y);
  else icl_refd_layer_norm(c->x, c->w, c->b, c->d, c->n, 1e-5, y);
}

static void test_norm(int rms, int64_t d, int64_t n) {
  float *x = rnd(d * n, -2, 2), *w = rnd(d, 0.5f, 1.5f), *b = rnd(d, -1, 1), *dy = rnd(d * n, -1, 1);
  float *y = zeros_f(d * n), *dx = zeros_f(d * n), *dw = zeros_f(d), *db = zeros_f(d), *st = zeros_f(2 * n);
  norm_case c = {dup_d(x, d * n), dup_d(w, d), dup_d(b, d), d, n, rms};
  double *yd = zeros_d(d * n), *rd = dup_d(dy, d * n), *gx = zeros_d(d * n), *gw = zeros_d(d), *gb = zeros_d(d);
  struct icl_buf bx, bw, bb, by;
  icl_dt vx = hv(&bx, x, d, n, 1, ICL_TYPE_F32), vw = hv(&bw, w, d, 1, 1, ICL_TYPE_F32);
  icl_dt vb = hv(&bb, b, d, 1, 1, ICL_TYPE_F32), vy = hv(&by, y, d, n, 1, ICL_TYPE_F32);
  icl_error err;
  if (rms) CHECK(icl_op_rms_norm(&g_cb->be, &vx, &vw, 1e-5f, &vy, &err) == ICL_OK);
  else CHECK(icl_op_layer_norm(&g_cb->be, &vx, &vw, &vb, 1e-5f, &vy, &err) == ICL_OK);
  norm_fwd(&c, yd);
  const char *op = rms ? "rms_norm" : "layer_norm";
  printf("%-12s %-10s forward cpu-vs-ref %.2e\n", op, "", t_rel_err(y, yd, d * n));
  CHECK(t_rel_err(y, yd, d * n) < TOL_CPU);
  if (rms) {
    cpu_tr_rms_norm_bwd(g_cb, x, w, d, n, 1e-5f, dy, dx, dw, st, 0);
    icl_refd_rms_norm_bwd(c.x, c.w, d, n, 1e-5, rd, gx, gw);
  } else {
    cpu_tr_layer_norm_bwd(g_cb, x, w, d, n, 1e-5f, dy, dx, dw, db, st, 0);
    icl_refd_layer_norm_bwd(c.x, c.w, d, n, 1e-5, rd, gx, gw, gb);
    report(op, "db", t_rel_err(db, gb, d), fd_check(norm_fwd, &c, c.b, d, gb, rd, d * n));
  }
  report(op, "dx", t_rel_err(dx, gx, d * n), fd_check(norm_fwd, &c, c.x, d * n, gx, rd, d * n));
  report(op, "dw", t_rel_err(dw, gw, d), fd_check(norm_fwd, &c, c.w, d, gw, rd, d * n));
  /* the op's partial modes (the sliced backward's): dx alone, then dw and db alone, the bits of the full call, with
   * the statistics recomputed (stats_in 0) and read from the dx call's (stats_in 1, the trainer's way); and dx
   * again from those statistics */
  for (int given = 0; given < 2; given++) {
    float *dx1 = zeros_f(d * n), *dw1 = zeros_f(d), *db1 = zeros_f(d), *st1 = zeros_f(2 * n), *dx2 = zeros_f(d * n);
    struct icl_buf bdy, bdx, bdx2, bdw, bdb, bst;
    icl_dt vdy = hv(&bdy, dy, d, n, 1, ICL_TYPE_F32), vdx = hv(&bdx, dx1, d, n, 1, ICL_TYPE_F32);
    icl_dt vdw = hv(&bdw, dw1, d, 1, 1, ICL_TYPE_F32), vdb = hv(&bdb, db1, d, 1, 1, ICL_TYPE_F32);
    icl_dt vst = hv(&bst, st1, 2, n, 1, ICL_TYPE_F32), vdx2 = hv(&bdx2, dx2, d, n, 1, ICL_TYPE_F32);
    CHECK(icl_op_norm_bwd(&g_cb->be, rms, &vx, &vw, 1e-5f, &vdy, &vdx, NULL, NULL, &vst, 0, &err) == ICL_OK);
    CHECK(!memcmp(st1, st, (size_t)(2 * n) * 4));
    if (!given) memset(st1, 0xff, (size_t)(2 * n) * 4); /* NaN: recomputing must not read them */
    CHECK(icl_op_norm_bwd(&g_cb->be, rms, &vx, &vw, 1e-5f, &vdy, NULL, &vdw, rms ? NULL : &vdb, &vst, given, &err) ==
          ICL_OK);
    int same = !memcmp(dx1, dx, (size_t)(d * n) * 4) && !memcmp(dw1, dw, (size_t)d * 4);
    same = same && !memcmp(db1, db, (size_t)d * 4);
    if (given) {
      CHECK(icl_op_norm_bwd(&g_cb->be, rms, &vx, &vw, 1e-5f, &vdy, &vdx2, NULL, NULL, &vst, 1, &err) == ICL_OK);
      same = same && !memcmp(dx2, dx, (size_t)(d * n) * 4);
    }
    printf("%-12s dx alone, then dw and db alone (statistics %s): equal to the full call %d\n", op,
           given ? "given, and dx again from them" : "recomputed", same);
    CHECK(same);
    free(dx1), free(dw1), free(db1), free(st1), free(dx2);
  }
  /* the trainer's norm forward: the inference op's y and the backward's statistics, bit for bit, on the backend's
   * entry and on the wrapper's fallback (the inference op, then norm_bwd's statistics pass) */
  for (int fallback = 0; fallback < 2; fallback++) {
    float *y2 = zeros_f(d * n), *st2 = zeros_f(2 * n);
    struct icl_buf by2, bst2;
    icl_dt vy2 = hv(&by2, y2, d, n, 1, ICL_TYPE_F32), vst2 = hv(&bst2, st2, 2, n, 1, ICL_TYPE_F32);
    icl_backend_ops o = *g_cb->be.ops;
    const icl_backend_ops *saved = g_cb->be.ops;
    if (fallback) o.norm_fwd = NULL, g_cb->be.ops = &o;
    CHECK(icl_op_norm_fwd(&g_cb->be, rms, &vx, &vw, rms ? NULL : &vb, 1e-5f, &vy2, &vst2, &err) == ICL_OK);
    g_cb->be.ops = saved;
    int same = !memcmp(y2, y, (size_t)(d * n) * 4) && !memcmp(st2, st, (size_t)(2 * n) * 4);
    printf("%-12s norm_fwd%s: y and statistics equal to the inference op's and norm_bwd's %d\n", op,
           fallback ? " (the wrapper's fallback)" : "", same);
    CHECK(same);
    free(y2), free(st2);
  }
  struct icl_buf bst0;
  icl_dt vst0 = hv(&bst0, st, 2, n, 1, ICL_TYPE_F32);
  CHECK(icl_op_norm_bwd(&g_cb->be, rms, &vx, &vw, 1e-5f, &vx, NULL, &vw, NULL, &vst0, 2, &err) == ICL_EINVAL);
  printf("%-12s stats_in 2: %s\n", op, err.msg);
  free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db), free(st);
  free(c.x), free(c.w), free(c.b), free(yd), free(rd), free(gx), free(gw), free(gb);
}

/* The level's norm backward kernels (norm_bwd16 for the rows, norm_cols for dw and db) against the loops they
 * replace (the kernels removed from the table), and both with the statistics given: stats, dx, dw, db
 * bit-identical (dw and db added to non-zero values), for LayerNorm and RMSNorm, with and without a weight and dx,
 * row lengths that leave partial 8-column, 16-element and 64-column blocks or pass the columns it keeps (256), row
 * counts with a 4-row and 1-row remainder. */
static void test_norm_kernel(int rms, int64_t d, int64_t n, int with_w, int with_dx) {
  if (!g_cb->k.norm_bwd16) {
    printf("norm_bwd16  d=%lld: the %s level has no kernel; nothing to compare\n", (long long)d, g_cb->k.name);
    return;
  }
  float *x = rnd(d * n, -2, 2), *w = with_w ? rnd(d, 0.5f, 1.5f) : NULL, *dy = rnd(d * n, -1, 1);
  float *dx0 = rnd(d * n, -1, 1), *dw0 = rnd(d, -1, 1), *db0 = rnd(d, -1, 1), *out[4][4];
  for (int k = 0; k < 4; k++) { /* kernel, loop; then each again with the statistics given (the kernel's) */
    int given = k >= 2;
    out[k][0] = with_dx ? malloc((size_t)(d * n) * 4) : NULL, out[k][1] = zeros_f(d), out[k][2] = zeros_f(d);
    out[k][3] = zeros_f(2 * n);
    if (with_dx) memcpy(out[k][0], dx0, (size_t)(d * n) * 4);
    memcpy(out[k][1], dw0, (size_t)d * 4), memcpy(out[k][2], db0, (size_t)d * 4);
    if (given) memcpy(out[k][3], out[0][3], (size_t)(2 * n) * 4);
    cpu_kernels saved = g_cb->k;
    if (k & 1) g_cb->k.norm_bwd16 = NULL, g_cb->k.norm_cols = NULL;
    if (rms) cpu_tr_rms_norm_bwd(g_cb, x, w, d, n, 1e-5f, dy, out[k][0], out[k][1], out[k][3], given);
    else cpu_tr_layer_norm_bwd(g_cb, x, w, d, n, 1e-5f, dy, out[k][0], out[k][1], out[k][2], out[k][3], given);
    g_cb->k = saved;
  }
  const int64_t len[4] = {with_dx ? d * n : 0, d, d, 2 * n};
  for (int k = 1; k < 4; k++) {
    int64_t bad[4] = {0};
    for (int i = 0; i < 4; i++)
      for (int64_t j = 0; j < len[i]; j++) bad[i] += memcmp(&out[0][i][j], &out[k][i][j], 4) != 0;
    printf("norm_bwd16  %s d=%lld n=%lld w=%d dx=%d, %s: dx %lld, dw %lld, db %lld, stats %lld elements differ\n",
           rms ? "rms  " : "layer", (long long)d, (long long)n, with_w, with_dx,
           k == 1 ? "the loop" : k == 2 ? "kernel, stats given" : "loop, stats given", (long long)bad[0],
           (long long)bad[1], (long long)bad[2], (long long)bad[3]);
    CHECK(bad[0] == 0 && bad[1] == 0 && bad[2] == 0 && bad[3] == 0);
  }
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 4; i++) free(out[k][i]);
  free(x), free(w), free(dy), free(dx0), free(dw0), free(db0);
}

/* The level's optimizer kernel (optim_upd) against the loop it replaces (the kernel removed from the table): w, m1,
 * m2 bit-identical after three AdamW or SGD steps with weight decay and a gradient scale, over a length that leaves
 * a partial register at the end of each thread's range. */
static void test_optim_kernel(int adam) {
  if (!g_cb->k.optim_upd) {
    printf("optim_upd: the %s level has no kernel; nothing to compare\n", g_cb->k.name);
    return;
  }
  const int64_t n = 9001;
  float *g = rnd(n, -1, 1), *st0[3] = {rnd(n, -1, 1), rnd(n, -0.1f, 0.1f), rnd(n, 0, 0.01f)}, *st[2][3];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++) st[k][i] = malloc((size_t)n * 4), memcpy(st[k][i], st0[i], (size_t)n * 4);
    cpu_kernels saved = g_cb->k;
    if (k) g_cb->k.optim_upd = NULL;
    for (int step = 1; step <= 3; step++) {
      icl_optim_args a = {.lr = 1e-2f, .wd = 0.1f, .b1 = 0.9f, .b2 = 0.999f, .eps = 1e-8f, .mom = 0.9f, .gscale = 0.7f,
                          .c1 = (float)(1.0 - pow(0.9, step)), .c2 = (float)(1.0 - pow(0.999, step)), .adam = adam};
      cpu_tr_optim_update(g_cb, st[k][0], g, st[k][1], st[k][2], n, &a);
    }
    g_cb->k = saved;
  }
  int64_t bad = 0;
  for (int i = 0; i < 3; i++)
    for (int64_t j = 0; j < n; j++) bad += memcmp(&st[0][i][j], &st[1][i][j], 4) != 0;
  printf("optim_upd   %s: w, m1, m2 %lld elements differ from the loop\n", adam ? "adamw" : "sgd  ", (long long)bad);
  CHECK(bad == 0);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 3; i++) free(st[k][i]);
  for (int i = 0; i < 3; i++) free(st0[i]);
  free(g);
}

/* The level's sixteen-row LayerNorm forward kernel (layer_norm16, the inference op's) against the four-row loop
 * it replaces (the kernel removed from the table): y bit-identical, with and without weight and bias, row lengths
 * with partial blocks or past the kept columns, row counts with a 4-row and 1-row remainder. */
static void test_layer_norm_kernel(int64_t d, int64_t n, int with_w, int with_b) {
  if (!g_cb->k.layer_norm16) {
    printf("layer_norm16 d=%lld: the %s level has no kernel; nothing to compare\n", (long long)d, g_cb->k.name);
    return;
  }
  float *x = rnd(d * n, -2, 2), *w = rnd(d, 0.5f, 1.5f), *b = rnd(d, -1, 1), *y[2] = {zeros_f(d * n), zeros_f(d * n)};
  x[0] = -0.0f; /* a zero product: 0 + -0 gives +0, as the loop's added 0 does */
  for (int64_t j = 0; j < d; j++) x[j] = x[0];
  struct icl_buf bx, bw, bb, by;
  icl_dt vx = hv(&bx, x, d, n, 1, ICL_TYPE_F32), vw = hv(&bw, w, d, 1, 1, ICL_TYPE_F32);
  icl_dt vb = hv(&bb, b, d, 1, 1, ICL_TYPE_F32);
  icl_error err;
  for (int k = 0; k < 2; k++) {
    icl_dt vy = hv(&by, y[k], d, n, 1, ICL_TYPE_F32);
    cpu_kernels saved = g_cb->k;
    if (k == 1) g_cb->k.layer_norm16 = NULL;
    CHECK(icl_op_layer_norm(&g_cb->be, &vx, with_w ? &vw : NULL, with_b ? &vb : NULL, 1e-5f, &vy, &err) == ICL_OK);
    g_cb->k = saved;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < d * n; i++) bad += memcmp(&y[0][i], &y[1][i], 4) != 0;
  printf("layer_norm16 d=%lld n=%lld w=%d b=%d: %lld elements differ\n", (long long)d, (long long)n, with_w, with_b,
         (long long)bad);
  CHECK(bad == 0);
  free(x), free(w), free(b), free(y[0]), free(y[1]);
}

/* The level's strided copy for the gemm's packs (copy_cols) against the loop it stands for, for each width and row
 * counts with a remainder of the unrolled four; then the matmul backward (dW packs both operands through it, B in
 * pairs of token groups) with the kernel and without it, bit for bit, over sizes with an odd and a partial group. */
static void test_copy_cols(void) {
  if (!g_cb->k.copy_cols) {
    printf("copy_cols: the %s level has no kernel; nothing to compare\n", g_cb->k.name);
    return;
  }
  const int64_t K = 23, cs = 53;
  float *p = rnd(K * cs, -1, 1), *d = zeros_f(2 * 32 * K), *want = zeros_f(2 * 32 * K);
  const int ws[3] = {32, 16, 8};
  int64_t bad = 0;
  for (int i = 0; i < 3; i++) {
    int w = ws[i], dw = w == 32 ? 32 : 8; /* w = 16: two 8-wide outputs, the second 8 K floats on */
    memset(d, 0, 2 * 32 * K * 4), memset(want, 0, 2 * 32 * K * 4);
    g_cb->k.copy_cols(p + 1, cs, K, w, d, w == 16 ? d + 8 * K : NULL);
    for (int64_t c = 0; c < K; c++)
      for (int j = 0; j < w; j++) want[(j >= dw ? 8 * K : 0) + c * dw + j % dw] = p[1 + c * cs + j];
    for (int64_t j = 0; j < 2 * 32 * K; j++) bad += memcmp(&d[j], &want[j], 4) != 0;
  }
  printf("copy_cols   widths 32, 16, 8, K=%lld: %lld elements differ\n", (long long)K, (long long)bad);
  CHECK(bad == 0);
  free(p), free(d), free(want);
  const int64_t sz[3][3] = {{70, 40, 50}, {128, 96, 600}, {40, 33, 1152}}; /* K, R, n: dy's R rows, 5 whole groups, 12, 4 and a part */
  for (int s = 0; s < 3; s++) {
    int64_t k = sz[s][0], r = sz[s][1], n = sz[s][2];
    float *W = rnd(k * r, -1, 1), *x = rnd(k * n, -1, 1), *dy = rnd(r * n, -1, 1), *out[2][2];
    for (int v = 0; v < 2; v++) {
      out[v][0] = zeros_f(k * r), out[v][1] = zeros_f(k * n);
      cpu_kernels saved = g_cb->k;
      if (v == 1) g_cb->k.copy_cols = NULL;
      icl_error err;
      CHECK(cpu_tr_matmul_bwd(g_cb, W, k, r, x, n, dy, out[v][0], out[v][1], 0, &err) == ICL_OK);
      g_cb->k = saved;
    }
    int64_t nb = 0;
    for (int64_t j = 0; j < k * r; j++) nb += memcmp(&out[0][0][j], &out[1][0][j], 4) != 0;
    for (int64_t j = 0; j < k * n; j++) nb += memcmp(&out[0][1][j], &out[1][1][j], 4) != 0;
    printf("copy_cols   matmul_bwd K=%lld R=%lld n=%lld: dW, dx %lld elements differ\n", (long long)k, (long long)r,
           (long long)n, (long long)nb);
    CHECK(nb == 0);
    free(W), free(x), free(dy), free(out[0][0]), free(out[0][1]), free(out[1][0]), free(out[1][1]);
  }
}

/* ---- attention ------------------------------------------------------------------------------------- */

/* The strided gemm's causal modes (cpu_gemm_args.causal: the attention backward's products) against the full
 * products on the same operands, bit for bit: B zero past or before the diagonal (its terms left out), and y used
 * on and below the diagonal only (the tiles past it not computed); A with negative values, so that left-out terms
 * would have been -0. Square T x T (the attention's shape), row counts with a partial tile. */
static void test_gemm_causal(int64_t R, int64_t T) {
  float *a = rnd(R * T, -1, 1), *b = rnd(T * T, -1, 1), *y[2] = {zeros_f(T * R), zeros_f(T * R)};
  float *ws = aligned_alloc(64, (size_t)(cpu_gemm_ws(&g_cb->k, T, T) + 16) * sizeof(float));
  const char *name[4] = {"", "B lower", "B upper", "y lower"};
  for (int mode = 1; mode <= 3; mode++) {
    float *bz = malloc((size_t)(T * T) * sizeof(float)), *bt = malloc((size_t)(T * T) * sizeof(float));
    for (int64_t t = 0; t < T; t++) /* B(t, c) = bz[t*T + c] */
      for (int64_t c = 0; c < T; c++)
        bz[t * T + c] = (mode == 1 && c > t) || (mode == 2 && c < t) ? 0.0f : b[t * T + c];
    int64_t bad = 0;
    for (int lay = 0; lay < 4; lay++) { /* A row-major (packed) or transposed (read in place); B likewise */
      cpu_mat am = lay & 1 ? (cpu_mat){a, 1, R} : (cpu_mat){a, T, 1};
      cpu_mat bm = lay & 2 ? (cpu_mat){bt, 1, T} : (cpu_mat){bz, T, 1};
      for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < T; c++) bt[c * T + t] = bz[t * T + c];
      for (int v = 0; v < 2; v++) {
        for (int64_t i = 0; i < T * R; i++) y[v][i] = 7.0f;
        cpu_gemm_args g = {.a = am, .b = bm, .R = R, .n = T, .K = T, .y = y[v], .ldy = R, .causal = v == 0 ? mode : 0};
        cpu_gemm_serial(&g_cb->k, &g, ws);
      }
      for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < R; j++)
          if (mode != 3 || j <= t) bad += memcmp(&y[0][t * R + j], &y[1][t * R + j], 4) != 0;
    }
    printf("gemm causal %-7s R=%lld T=%lld: %lld elements differ\n", name[mode], (long long)R, (long long)T,
           (long long)bad);
    CHECK(bad == 0);
    free(bz), free(bt);
  }
  free(a), free(b), free(y[0]), free(y[1]), free(ws);
}

/* Elements of dq, dk, dv that differ between the attention backward on the level's kernels and on the level with
 * strip's kernels removed, for random inputs (P with its causal zeros when causal). */
static int64_t attb_kernels_diff(int64_t T, int64_t hd, int64_t B, int causal, float scale,
                                 void (*strip)(cpu_kernels *)) {
  const int64_t nh = 2, n = hd * nh * T * B;
  float *q = rnd(n, -1, 1), *k = rnd(n, -1, 1), *v = rnd(n, -1, 1), *dz = rnd(n, -1, 1), *P = rnd(T * T * nh * B, 0, 1);
  for (int64_t m = 0; causal && m < nh * B; m++) /* a pattern's zeros above the diagonal */
    for (int64_t i = 0; i < T; i++)
      for (int64_t j = i + 1; j < T; j++) P[(m * T + i) * T + j] = 0.0f;
  float *out[2][3];
  for (int w = 0; w < 2; w++) {
    for (int i = 0; i < 3; i++) out[w][i] = zeros_f(n);
    cpu_kernels saved = g_cb->k;
    if (w == 1) strip(&g_cb->k);
    icl_error err;
    CHECK(cpu_tr_attention_bwd(g_cb, q, k, v, P, dz, hd, nh, T, B, scale, out[w][0], out[w][1], out[w][2], &err) ==
          ICL_OK);
    g_cb->k = saved;
  }
  int64_t bad = 0;
  for (int i = 0; i < 3; i++)
    for (int64_t j = 0; j < n; j++) bad += memcmp(&out[0][i][j], &out[1][i][j], 4) != 0;
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 3; i++) free(out[w][i]);
  free(q), free(k), free(v), free(dz), free(P);
  return bad;
}

static void strip_row_dots(cpu_kernels *k) { k->row_dots8 = NULL; }
static void strip_attb_small(cpu_kernels *k) { k->attb_dp16 = NULL, k->attb_grads16 = NULL; }

/* The level's eight-row sums of the attention backward (row_dots8) against the four-row loop (the kernel removed
 * from the table): dq, dk, dv bit-identical for sequence lengths below eight, with a remainder of 1 and of 3, and
 * past a whole 8-column block of the common keys. */
static void test_row_dots_kernel(int64_t T) {
  if (!g_cb->k.row_dots8) {
    printf("row_dots8: the %s level has no kernel; nothing to compare\n", g_cb->k.name);
    return;
  }
  int64_t bad = attb_kernels_diff(T, 16, 2, 0, 0.25f, strip_row_dots);
  printf("row_dots8   T=%lld: dq, dk, dv %lld elements differ\n", (long long)T, (long long)bad);
  CHECK(bad == 0);
}

/* The level's few-key attention backward kernels (attb_dp16, attb_grads16) against the strided-gemm calls they
 * replace (removed from the table): dq, dk, dv bit-identical for T from 1 to 16 (one and two token groups, a group's
 * remainder), past the kernel (17 keys, where both run the gemm), head sizes of one and of nine sixteen-float
 * vectors (two 128-dim chunks). P's causal zeros and dz's signs as the forward leaves them. */
static void test_attb_small_kernel(int64_t T, int64_t hd) {
  if (!g_cb->k.attb_dp16) {
    printf("attb_dp16: the %s level has no kernel; nothing to compare\n", g_cb->k.name);
    return;
  }
  int64_t bad = attb_kernels_diff(T, hd, 3, 1, 0.125f, strip_attb_small);
  printf("attb_small  T=%lld hd=%lld: dq, dk, dv %lld elements differ from the gemm path\n", (long long)T,
         (long long)hd, (long long)bad);
  CHECK(bad == 0);
}

/* The trainer's attention forward of few keys on the level's kernels (attb_dp16 for the scores, pv_gemm_row) against the
 * blocked path it replaces (the kernels removed from the table): z and the pattern bit-identical for T from 1 to 16,
 * past the kernels (17), head sizes of one and nine sixteen-float vectors. */
static void test_attn_small_fwd(int64_t T, int64_t hd) {
  if (!g_cb->k.pv_gemm_row) {
    printf("pv_gemm_row: the %s level has no kernel; nothing to compare\n", g_cb->k.name);
    return;
  }
  const int64_t nh = 2, B = 3, n = hd * nh * T * B, np = T * T * nh * B;
  float *q = rnd(n, -2, 2), *k = rnd(n, -2, 2), *v = rnd(n, -1, 1), *out[2][2];
  for (int w = 0; w < 2; w++) {
    out[w][0] = zeros_f(n), out[w][1] = zeros_f(np);
    struct icl_buf bq, bk, bv, bz, bp;
    icl_dt vq = hv(&bq, q, hd, nh, T * B, ICL_TYPE_F32), vk = hv(&bk, k, hd, nh, T * B, ICL_TYPE_F32);
    icl_dt vv = hv(&bv, v, hd, nh, T * B, ICL_TYPE_F32), vz = hv(&bz, out[w][0], hd, nh, T * B, ICL_TYPE_F32);
    icl_dt vp = hv(&bp, out[w][1], T, T, nh * B, ICL_TYPE_F32);
    icl_dt *four[4] = {&vq, &vk, &vv, &vz};
    for (int i = 0; i < 4; i++) four[i]->ne[2] = T, four[i]->ne[3] = B;
    vp.ne[2] = nh, vp.ne[3] = B;
    icl_attn_params ap = {.scale = 0.125f};
    cpu_kernels saved = g_cb->k;
    if (w == 1) g_cb->k.pv_gemm_row = NULL;
    icl_error err;
    CHECK(icl_op_attention_seqs(&g_cb->be, &vq, &vk, &vv, &ap, &vz, &vp, &err) == ICL_OK);
    g_cb->k = saved;
  }
  int64_t bad = 0;
  for (int64_t j = 0; j < n; j++) bad += memcmp(&out[0][0][j], &out[1][0][j], 4) != 0;
  for (int64_t j = 0; j < np; j++) bad += memcmp(&out[0][1][j], &out[1][1][j], 4) != 0;
  printf("attn_small  T=%lld hd=%lld: z and pattern %lld elements differ from the blocked path\n", (long long)T,
         (long long)hd, (long long)bad);
  CHECK(bad == 0);
  for (int w = 0; w < 2; w++) free(out[w][0]), free(out[w][1]);
  free(q), free(k), free(v);
}

typedef struct attn_case {
  double *q, *k, *v;
  int64_t hd, nh, T, B;
  double scale;
} attn_case;

static void attn_fwd(void *ctx, double *z) {
  attn_case *c = ctx;
  icl_refd_attention(c->q, c->k, c->v, c->hd, c->nh, c->T, c->B, c->scale, z, NULL);
}

/* The backend's causal attention per sequence, with the pattern saved as the trainer does. */
static void cpu_attn(const float *q, const float *k, const float *v, int64_t hd, int64_t nh, int64_t T, int64_t B,
                     float scale, float *z, float *P) {
  icl_attn_params p = {.scale = scale};
  icl_error err;
  for (int64_t b = 0; b < B; b++) {
    int64_t o = b * T * nh * hd;
    struct icl_buf bq, bk, bv, bz, bp;
    icl_dt vq = hv(&bq, q + o, hd, nh, T, ICL_TYPE_F32), vk = hv(&bk, k + o, hd, nh, T, ICL_TYPE_F32);
    icl_dt vv = hv(&bv, v + o, hd, nh, T, ICL_TYPE_F32), vz = hv(&bz, z + o, hd, nh, T, ICL_TYPE_F32);
    icl_dt vp = hv(&bp, P + b * nh * T * T, T, T, nh, ICL_TYPE_F32);
    CHECK(icl_op_attention(&g_cb->be, &vq, &vk, &vv, &p, NULL, &vz, &vp, &err) == ICL_OK);
  }
}

static void test_attention(int64_t hd, int64_t nh, int64_t T, int64_t B, int scaled, int fd) {
  int64_t n = hd * nh * T * B;
  float scale = scaled ? 1.0f / sqrtf((float)hd) : 1.0f;
  float *q = rnd(n, -1, 1), *k = rnd(n, -1, 1), *v = rnd(n, -1, 1), *dz = rnd(n, -1, 1);
  float *z = zeros_f(n), *P = zeros_f(nh * T * T * B), *dq = zeros_f(n), *dk = zeros_f(n), *dv = zeros_f(n);
  attn_case c = {dup_d(q, n), dup_d(k, n), dup_d(v, n), hd, nh, T, B, scale};
  double *zd = zeros_d(n), *Pd = zeros_d(nh * T * T * B), *rd = dup_d(dz, n);
  double *gq = zeros_d(n), *gk = zeros_d(n), *gv = zeros_d(n);
  cpu_attn(q, k, v, hd, nh, T, B, scale, z, P);
  icl_refd_attention(c.q, c.k, c.v, hd, nh, T, B, scale, zd, Pd);
  char what[64];
  snprintf(what, sizeof what, "%lldx%lldx%lldx%lld%s", (long long)hd, (long long)nh, (long long)T, (long long)B,
           scaled ? "" : " s=1");
  printf("attention    %-10s forward cpu-vs-ref z %.2e pattern %.2e\n", what, t_rel_err(z, zd, n),
         t_rel_err(P, Pd, nh * T * T * B));
  CHECK(t_rel_err(z, zd, n) < TOL_CPU && t_rel_err(P, Pd, nh * T * T * B) < TOL_CPU);
  icl_error err;
  CHECK(cpu_tr_attention_bwd(g_cb, q, k, v, P, dz, hd, nh, T, B, scale, dq, dk, dv, &err) == ICL_OK);
  icl_refd_attention_bwd(c.q, c.k, c.v, hd, nh, T, B, scale, rd, gq, gk, gv);
  report("attn dq", what, t_rel_err(dq, gq, n), fd ? fd_check(attn_fwd, &c, c.q, n, gq, rd, n) : -1);
  report("attn dk", what, t_rel_err(dk, gk, n), fd ? fd_check(attn_fwd, &c, c.k, n, gk, rd, n) : -1);
  report("attn dv", what, t_rel_err(dv, gv, n), fd ? fd_check(attn_fwd, &c, c.v, n, gv, rd, n) : -1);
  free(q), free(k), free(v), free(dz), free(z), free(P), free(dq), free(dk), free(dv);
  free(c.q), free(c.k), free(c.v), free(zd), free(Pd), free(rd), free(gq), free(gk), free(gv);
}

/* ---- smeared key --------------------------------------------------------------------------------- */

typedef struct smear_case {
  double *k, *alpha;
  int64_t hd, nh, T, B;
} smear_case;

static void smear_fwd(void *ctx, double *y) {
  smear_case *c = ctx;
  icl_refd_smear(c->k, c->alpha, c->hd, c->nh, c->T, c->B, y);
}

static void test_smear(int64_t hd, int64_t nh, int64_t T, int64_t B) {
  int64_t n = hd * nh * T * B;
  float *k = rnd(n, -1, 1), *al = rnd(nh, -2, 2), *dks = rnd(n, -1, 1);
  float *ks = zeros_f(n), *dk = zeros_f(n), *da = zeros_f(nh);
  smear_case c = {dup_d(k, n), dup_d(al, nh), hd, nh, T, B};
  double *ksd = zeros_d(n), *rd = dup_d(dks, n), *gk = zeros_d(n), *ga = zeros_d(nh);
  cpu_tr_smear_fwd(g_cb, k, al, hd, nh, T, B, ks);
  smear_fwd(&c, ksd);
  printf("smear        forward cpu-vs-ref %.2e\n", t_rel_err(ks, ksd, n));
  CHECK(t_rel_err(ks, ksd, n) < TOL_CPU);
  cpu_tr_smear_bwd(g_cb, k, al, hd, nh, T, B, dks, dk, da);
  icl_refd_smear_bwd(c.k, c.alpha, hd, nh, T, B, rd, gk, ga);
  report("smear dk", "", t_rel_err(dk, gk, n), fd_check(smear_fwd, &c, c.k, n, gk, rd, n));
  report("smear dalpha", "", t_rel_err(da, ga, nh), fd_check(smear_fwd, &c, c.alpha, nh, ga, rd, n));
  /* the op's partial modes (the sliced backward's): dk alone and dalpha alone, the bits of the full call */
  float *dk1 = rnd(n, -1, 1), *da1 = zeros_f(nh);
  struct icl_buf bk, ba, bd, bdk, bda;
  icl_dt vk = hv(&bk, k, hd * nh, T, B, ICL_TYPE_F32), va = hv(&ba, al, nh, 1, 1, ICL_TYPE_F32);
  icl_dt vd = hv(&bd, dks, hd * nh, T, B, ICL_TYPE_F32), vdk = hv(&bdk, dk1, hd * nh, T, B, ICL_TYPE_F32);
  icl_dt vda = hv(&bda, da1, nh, 1, 1, ICL_TYPE_F32);
  icl_dt *v4[3] = {&vk, &vd, &vdk}; /* [hd, nh, T, B] */
  for (int i = 0; i < 3; i++) v4[i]->ne[0] = hd, v4[i]->ne[1] = nh, v4[i]->ne[2] = T, v4[i]->ne[3] = B;
  icl_error err;
  CHECK(icl_op_smear_bwd(&g_cb->be, &vk, &va, &vd, &vdk, NULL, &err) == ICL_OK);
  CHECK(icl_op_smear_bwd(&g_cb->be, &vk, &va, &vd, NULL, &vda, &err) == ICL_OK);
  CHECK(icl_op_smear_bwd(&g_cb->be, &vk, &va, &vd, NULL, NULL, &err) == ICL_EINVAL);
  int dk_same = !memcmp(dk1, dk, (size_t)n * 4), da_same = !memcmp(da1, da, (size_t)nh * 4);
  printf("smear_bwd    dk alone equal %d, dalpha alone equal %d\n", dk_same, da_same);
  CHECK(dk_same && da_same);
  free(dk1), free(da1);
  free(k), free(al), free(dks), free(ks), free(dk), free(da);
  free(c.k), free(c.alpha), free(ksd), free(rd), free(gk), free(ga);
}

/* ---- rope -------------------------------------------------------------------------------------------- */

typedef struct rope_case {
  double *x;
  int64_t hd, nh, T, B;
} rope_case;

static void rope_fwd(void *ctx, double *y) {
  rope_case *c = ctx;
  icl_refd_rope(c->x, c->hd, c->nh, c->T, c->B, (int)c->hd, 10000.0, y);
}

static void test_rope(int64_t hd, int64_t nh, int64_t T, int64_t B) {
  int64_t n = hd * nh * T * B;
  float *x = rnd(n, -1, 1), *dy = rnd(n, -1, 1), *dx = malloc((size_t)n * sizeof *dx);
  int32_t *pos = malloc((size_t)(T * B) * sizeof *pos);
  for (int64_t i = 0; i < T * B; i++) pos[i] = (int32_t)(i % T);
  rope_case c = {dup_d(x, n), hd, nh, T, B};
  double *yd = zeros_d(n), *rd = dup_d(dy, n), *gx = zeros_d(n);
  rope_fwd(&c, yd);
  struct icl_buf bx, bp;
  icl_dt vx = hv(&bx, x, hd, nh, T * B, ICL_TYPE_F32), vp = hv(&bp, pos, T * B, 1, 1, ICL_TYPE_I32);
  icl_error err;
  CHECK(icl_op_rope(&g_cb->be, &vx, &vp, (int)hd, 10000.0f, ICL_ROPE_NEOX, &err) == ICL_OK); /* in place */
  printf("rope         forward cpu-vs-ref %.2e\n", t_rel_err(x, yd, n));
  CHECK(t_rel_err(x, yd, n) < TOL_CPU);
  memcpy(dx, dy, (size_t)n * sizeof *dx);
  cpu_tr_rope_bwd(g_cb, dx, hd, nh, T * B, pos, (int)hd, 10000.0f);
  icl_refd_rope_bwd(rd, hd, nh, T, B, (int)hd, 10000.0, gx);
  report("rope dx", "", t_rel_err(dx, gx, n), fd_check(rope_fwd, &c, c.x, n, gx, rd, n));
  free(x), free(dy), free(dx), free(pos), free(c.x), free(yd), free(rd), free(gx);
}

/* ---- activations, embedding, loss ---------------------------------------------------------------- */

typedef struct act_case {
  double *x;
  int64_t n;
  int relu;
} act_case;

static void act_fwd(void *ctx, double *y) {
  act_case *c = ctx;
  if (c->relu) icl_refd_relu(c->x, c->n, y);
  else icl_refd_gelu(c->x, c->n, y);
}

static void test_act(int relu, int64_t n) {
  float *x = rnd(n, -3, 3), *dy = rnd(n, -1, 1), *y = zeros_f(n), *dx = zeros_f(n);
  for (int64_t i = 0; i < n; i++)
    if (fabsf(x[i]) < 1e-3f) x[i] = 0.5f; /* relu's kink is not differentiable */
  act_case c = {dup_d(x, n), n, relu};
  double *yd = zeros_d(n), *rd = dup_d(dy, n), *gx = zeros_d(n);
  struct icl_buf bx, by;
  icl_dt vx = hv(&bx, x, n, 1, 1, ICL_TYPE_F32), vy = hv(&by, y, n, 1, 1, ICL_TYPE_F32);
  icl_error err;
  if (relu) CHECK(icl_op_relu(&g_cb->be, &vx, &vy, &err) == ICL_OK);
  else CHECK(icl_op_gelu(&g_cb->be, &vx, &vy, &err) == ICL_OK);
  act_fwd(&c, yd);
  const char *op = relu ? "relu" : "gelu";
  printf("%-12s forward cpu-vs-ref %.2e\n", op, t_rel_err(y, yd, n));
  CHECK(t_rel_err(y, yd, n) < TOL_CPU);
  if (relu) cpu_tr_relu_bwd(g_cb, y, dy, n, dx);
  else cpu_tr_gelu_bwd(g_cb, x, dy, n, dx);
  (relu ? icl_refd_relu_bwd : icl_refd_gelu_bwd)(c.x, n, rd, gx);
  report(op, "dx", t_rel_err(dx, gx, n), fd_check(act_fwd, &c, c.x, n, gx, rd, n));
  free(x), free(dy), free(y), free(dx), free(c.x), free(yd), free(rd), free(gx);
}

typedef struct emb_case {
  double *E;
  const int32_t *ids;
  int64_t d, n;
} emb_case;

static void emb_fwd(void *ctx, double *y) {
  emb_case *c = ctx;
  icl_refd_embed(c->E, c->d, c->ids, c->n, y);
}

static void test_embed(int64_t d, int64_t rows, int64_t n) {
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  uint64_t s = 99;
  for (int64_t i = 0; i < n; i++) ids[i] = i % 5 == 3 ? -1 : (int32_t)(t_rand_u64(&s) % (uint64_t)rows);
  float *E = rnd(d * rows, -1, 1), *dx = rnd(d * n, -1, 1), *x = zeros_f(d * n), *dE = zeros_f(d * rows);
  emb_case c = {dup_d(E, d * rows), ids, d, n};
  double *xd = zeros_d(d * n), *rd = dup_d(dx, d * n), *gE = zeros_d(d * rows);
  cpu_tr_embed_fwd(g_cb, E, d, ids, n, x);
  emb_fwd(&c, xd);
  CHECK(t_rel_err(x, xd, d * n) == 0.0);
  cpu_tr_embed_bwd(g_cb, ids, dx, d, n, dE);
  icl_refd_embed_bwd(ids, rd, d, n, gE);
  report("embed dE", "", t_rel_err(dE, gE, d * rows), fd_check(emb_fwd, &c, c.E, d * rows, gE, rd, d * n));
  free(ids), free(E), free(dx), free(x), free(dE), free(c.E), free(xd), free(rd), free(gE);
}

typedef struct xent_case {
  double *logits, *w;
  const int32_t *t;
  int64_t nv, n;
} xent_case;

/* The loss as a one-element output (r = 1). */
static void xent_fwd(void *ctx, double *y) {
  xent_case *c = ctx;
  y[0] = icl_refd_xent(c->logits, c->nv, c->n, c->t, c->w, NULL);
}

static void test_xent(int64_t nv, int64_t n, int weighted) {
  int32_t *t = malloc((size_t)n * sizeof *t);
  uint64_t s = 7;
  for (int64_t i = 0; i < n; i++) t[i] = i % 4 == 1 ? -1 : (int32_t)(t_rand_u64(&s) % (uint64_t)nv);
  float *lg = rnd(nv * n, -4, 4), *w = weighted ? rnd(n, 0, 2) : NULL, *pr = zeros_f(nv * n + n), *g = zeros_f(nv * n);
  xent_case c = {dup_d(lg, nv * n), weighted ? dup_d(w, n) : NULL, t, nv, n};
  double *gd = zeros_d(nv * n), one = 1.0, yd;
  double loss = cpu_tr_xent(g_cb, lg, nv, n, t, w, pr, g);
  double want = icl_refd_xent(c.logits, nv, n, t, c.w, gd);
  double le = fabs(loss - want) / fabs(want);
  printf("xent         %-10s loss cpu-vs-ref %.2e\n", weighted ? "weighted" : "", le);
  CHECK(le < TOL_CPU);
  double e = t_rel_err(g, gd, nv * n), f = 0.0;
  double *fd = zeros_d(nv * n);
  for (int64_t i = 0; i < nv * n; i++) {
    double x0 = c.logits[i];
    c.logits[i] = x0 + FD_H;
    double lp = fd_loss(xent_fwd, &c, &yd, &one, 1);
    c.logits[i] = x0 - FD_H;
    double lm = fd_loss(xent_fwd, &c, &yd, &one, 1);
    c.logits[i] = x0;
    fd[i] = (lp - lm) / (2 * FD_H);
  }
  f = t_rel_err_d(fd, gd, nv * n);
  report("xent dlogit", weighted ? "weighted" : "", e, f);
  free(t), free(lg), free(w), free(pr), free(g), free(c.logits), free(c.w), free(gd), free(fd);
}

/* The update's finite check (tr_all_finite, integer exponent bits) against the float test it replaced (w - w != 0
 * for Inf and NaN), every special value at every position of runs of 0..70 floats and of one long run. */
static void test_all_finite(void) {
  const float special[] = {INFINITY, -INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e-45f, -1e-45f, 1.17549435e-38f, 3.4028235e38f,
                           -3.4028235e38f, 1.0f};
  uint32_t snan = 0x7f800001u, nan_payload = 0xffc12345u;
  float extra[2];
  memcpy(&extra[0], &snan, 4), memcpy(&extra[1], &nan_payload, 4);
  int checked = 0, bad = 0;
  float *w = rnd(5000, -2.0f, 2.0f);
  bad += tr_all_finite(w, 0) != 1, checked++;
  for (int64_t k = 1; k <= 71; k++) {
    int64_t n = k <= 70 ? k : 5000;
    for (int64_t at = 0; at < n; at = n <= 70 || at < 40 ? at + 1 : at + 997) {
      bad += tr_all_finite(w, n) != 1, checked++;
      for (int s = 0; s < 14; s++) {
        float keep = w[at];
        w[at] = s < 12 ? special[s] : extra[s - 12];
        int old = 0;
        for (int64_t j = 0; j < n; j++) old |= w[j] - w[j] != 0.0f;
        bad += tr_all_finite(w, n) != !old, checked++;
        w[at] = keep;
      }
    }
  }
  free(w);
  CHECKF(!bad, "tr_all_finite: %d of %d runs disagree with w - w != 0", bad, checked);
  printf("tr_all_finite: %d runs agree with the float test\n", checked);
}

int main(void) {
  icl_backend *be;
  icl_error err;
  if (icl_cpu_backend_new(2, &be, &err)) {
    fprintf(stderr, "cpu backend: %s\n", err.msg);
    return 1;
  }
  g_cb = cpu_of(be);
  test_all_finite();
  test_matmul(6, 5, 4, 1);
  test_matmul(70, 33, 50, 0);
  test_matmul(256, 256, 300, 0);
  test_matmul_write(6, 5, 4);
  test_matmul_write(70, 33, 50);
  test_matmul_write(128, 96, 600);
  test_matmul_write(40, 64, 3000);
  test_matmul_group(3, 6, 5, 4, ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX);
  test_matmul_group(3, 70, 33, 50, ICL_BWD_WRITE_DW);
  test_matmul_group(2, 70, 33, 50, 0);
  test_matmul_group(3, 128, 128, 1152, ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX); /* the meta model's q, k, v */
  test_matmul_group(4, 40, 64, 3000, ICL_BWD_WRITE_DX);
  icl_backend *be1; /* one thread: the gemm group packs every product into one half of its scratch */
  CHECK(icl_cpu_backend_new(1, &be1, &err) == ICL_OK);
  g_cb = cpu_of(be1);
  test_matmul_group(3, 128, 128, 1152, ICL_BWD_WRITE_DW | ICL_BWD_WRITE_DX);
  test_matmul_group(4, 40, 64, 3000, 0);
  be1->ops->destroy(be1);
  g_cb = cpu_of(be);
  test_norm(0, 12, 5);
  test_norm(1, 12, 5);
  test_norm(0, 200, 40);
  test_norm(1, 200, 40);
  const int64_t nd[] = {1, 5, 8, 13, 16, 37, 128};
  for (int i = 0; i < 7; i++)
    for (int rms = 0; rms < 2; rms++) test_norm_kernel(rms, nd[i], 37, 1, 1);
  test_norm_kernel(0, 128, 53, 0, 1);
  test_norm_kernel(1, 29, 48, 0, 0);
  test_norm_kernel(0, 29, 48, 1, 0);
  test_norm_kernel(0, 300, 20, 1, 1); /* past the kernel's kept columns: transposed again per pass */
  test_norm_kernel(1, 257, 16, 1, 1);
  test_optim_kernel(1);
  test_optim_kernel(0);
  for (int i = 0; i < 7; i++) test_layer_norm_kernel(nd[i], 37, 1, 1);
  test_layer_norm_kernel(128, 1152, 1, 1); /* the meta model's rows: several parallel ranges */
  test_layer_norm_kernel(29, 53, 0, 1);
  test_layer_norm_kernel(29, 53, 1, 0);
  test_layer_norm_kernel(16, 20, 0, 0);
  test_layer_norm_kernel(300, 20, 1, 1);
  test_copy_cols();
  const int64_t nT[] = {5, 9, 19, 70};
  for (int i = 0; i < 4; i++) test_row_dots_kernel(nT[i]);
  const int64_t sT[] = {1, 5, 8, 9, 15, 16, 17};
  for (int i = 0; i < 7; i++) test_attb_small_kernel(sT[i], 16), test_attb_small_kernel(sT[i], 144);
  for (int i = 0; i < 7; i++) test_attn_small_fwd(sT[i], 16), test_attn_small_fwd(sT[i], 144);
  test_gemm_causal(16, 70);
  test_gemm_causal(40, 37);
  test_gemm_causal(70, 70);
  test_attention(4, 2, 5, 2, 1, 1);
  test_attention(4, 2, 5, 2, 0, 1);
  test_attention(16, 3, 70, 3, 1, 0);
  test_smear(3, 2, 5, 2);
  test_rope(6, 2, 7, 2);
  test_act(0, 50);
  test_act(1, 50);
  test_embed(6, 7, 9);
  test_xent(7, 9, 0);
  test_xent(7, 9, 1);
  be->ops->destroy(be);
  return t_done();
}
