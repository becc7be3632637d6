/* Device errors propagate: a wrapping backend makes its N-th call fail (once, as a transient error would, or
 * with every later one, as a lost device would), and a hooked run with a knockout, an ablation and a capture must then fail with that error instead of
 * returning logits (before, a failed knockout-mask upload was read as "no knockout": un-ablated logits). */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "testutil.h"

#define NTOK 20

static const icl_backend_ops *real;   /* the wrapped backend's table */
static icl_backend_ops faulty;        /* real's table with the wrapped entries below */
static long calls, fail_at = -1;      /* calls so far; the first failing call (-1 = none) */
static int sticky;                    /* 1: every call after fail_at fails too */

static int fault(const char *what, icl_error *err) {
  long i = calls++;
  if (fail_at < 0 || i < fail_at || (!sticky && i > fail_at)) return ICL_OK;
  return icl_error_set(err, ICL_EDEVICE, "injected failure of %s (call %ld)", what, i);
}

static int f_write(icl_backend *be, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err) {
  return fault("write", err) ? err->code : real->write(be, b, off, src, n, err);
}
static int f_read(icl_backend *be, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err) {
  return fault("read", err) ? err->code : real->read(be, b, off, dst, n, err);
}
static int f_sync(icl_backend *be, icl_error *err) { return fault("sync", err) ? err->code : real->sync(be, err); }
static int f_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return fault("matmul", err) ? err->code : real->matmul(be, w, x, y, err);
}
static int f_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y,
                          icl_error *err) {
  return fault("matmul_group", err) ? err->code : real->matmul_group(be, count, w, x, y, err);
}
static int f_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                       const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  return fault("attention", err) ? err->code : real->attention(be, q, k, v, p, mask, out, pattern, err);
}
static int f_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                    float value, icl_error *err) {
  return fault("fill2d", err) ? err->code : real->fill2d(be, dst, off, stride, rows, cols, value, err);
}

static void wrap(icl_model *m) {
  real = m->be->ops;
  faulty = *real;
  faulty.write = f_write, faulty.read = f_read, faulty.sync = f_sync, faulty.matmul = f_matmul;
  faulty.attention = f_attention, faulty.fill2d = f_fill2d;
  if (real->matmul_group) faulty.matmul_group = f_matmul_group;
  m->be->ops = &faulty;
}

static int run(icl_model *m, const int32_t *toks, icl_run_result *r, icl_error *e) {
  static int64_t edges[] = {9, 3, 12, 12, 15, 0};
  static int heads[] = {1};
  icl_intervention iv[] = {{.kind = ICL_IV_KNOCKOUT, .layer = 1, .edges = edges, .n_edges = 3},
                           {.kind = ICL_IV_ZERO, .hook = "blocks.0.attn.hook_z", .heads = heads, .n_heads = 1}};
  icl_capture cap = {.pattern = "blocks.1.hook_resid_post"};
  icl_run_opts o = {.interventions = iv, .n_interventions = 2, .captures = &cap, .n_captures = 1,
                    .logits = ICL_LOGITS_ALL};
  return icl_model_run(m, toks, NTOK, &o, r, e);
}

static void test_backend(const char *backend, int sticky_) {
  sticky = sticky_;
  icl_error e = {0};
  icl_model *m = t_tiny_llama(backend, 5, 8);
  if (!m) return;
  int32_t toks[NTOK];
  for (int i = 0; i < NTOK; i++) toks[i] = (i * 37 + 11) % 256;
  wrap(m);
  icl_run_result good;
  calls = 0, fail_at = -1;
  CHECKF(run(m, toks, &good, &e) == 0, "%s: clean run: %s", backend, e.msg);
  long total = calls; /* the last call is the teardown sync, after the result is final */
  printf("  %s: %ld wrapped calls per run, each failing %s\n", backend, total, sticky ? "for good" : "once");
  int silent = 0;
  for (fail_at = 0; fail_at < total - 1; fail_at++) {
    icl_run_result r;
    calls = 0;
    int rc = run(m, toks, &r, &e);
    if (rc == 0) {
      silent++;
      fprintf(stderr, "%s: call %ld failed but the run succeeded%s\n", backend, fail_at,
              good.logits && r.logits && memcmp(good.logits->data, r.logits->data, (size_t)good.logits->numel * 4)
                  ? " with different logits" : "");
      icl_run_result_free(&r);
    } else {
      CHECKF(rc == ICL_EDEVICE && strstr(e.msg, "injected"), "%s: call %ld: code %d, message %s", backend, fail_at,
             rc, e.msg);
    }
  }
  CHECKF(silent == 0, "%s: %d injected failures were dropped", backend, silent);
  fail_at = -1;
  icl_run_result_free(&good);
  m->be->ops = real;
  icl_model_free(m);
}

int main(void) {
  test_backend("cpu", 0);
  test_backend("cpu", 1);
  test_backend("ref", 0);
  return t_done();
}
