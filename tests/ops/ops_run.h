/* Running one case of the op table on every target: upload, run through the wrappers, download
 * with guard checks, compare (ref against the float64 oracle, the others against ref's output). */
#ifndef ICL_OPS_RUN_H
#define ICL_OPS_RUN_H

#include "ops_harness.h"

/* The outputs of one target run: bytes per output. */
typedef struct ot_result {
  void *out[OT_MAX_OUT];
} ot_result;

static void ot_result_free(ot_result *r) {
  for (int i = 0; i < OT_MAX_OUT; i++) free(r->out[i]), r->out[i] = NULL;
}

/* Runs c on one backend into r; returns 0 (after reporting) when the op or a guard failed. */
static int ot_exec(const ot_target *t, const ot_case *c, ot_result *r, const char *what) {
  ot_dev din[OT_MAX_IN] = {0}, dout[OT_MAX_OUT] = {0};
  const icl_dt *vin[OT_MAX_IN] = {0}, *vout[OT_MAX_OUT] = {0};
  int unaligned = (c->s->flags & OT_UNALIGNED) != 0, ok = 1;
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].data) din[i] = ot_upload(t->be, &c->in[i], unaligned), vin[i] = &din[i].dt;
  for (int i = 0; i < c->n_out; i++) {
    int a = c->out[i].alias;
    if (a < 0) dout[i] = ot_upload(t->be, &c->out[i], unaligned);
    vout[i] = a >= 0 ? &din[a].dt : &dout[i].dt;
  }
  icl_error err = {0};
  double t0 = ot_now();
  int rc = c->e->op->run(t->be, c, vin, vout, &err);
  CHECKF(rc == ICL_OK, "%s on %s: %s", what, t->name, err.msg);
  for (int i = 0; rc == ICL_OK && i < c->n_out; i++) {
    const ot_dev *d = c->out[i].alias >= 0 ? &din[c->out[i].alias] : &dout[i];
    r->out[i] = ot_xmalloc(d->bytes);
    int g = ot_download(t->be, d, r->out[i]);
    CHECKF(g, "%s on %s: output %d: write outside the output view (guard bytes changed)", what, t->name, i);
    ok &= g;
  }
  ((ot_target *)t)->secs += ot_now() - t0;
  if (ot_verbose) printf("  %-72.72s %-26s %.3f s\n", what, t->name, ot_now() - t0);
  for (int i = 0; i < c->n_in; i++)
    if (vin[i]) {
      int g = rc != ICL_OK || ot_download(t->be, &din[i], NULL);
      CHECKF(g, "%s on %s: input %d: guard bytes changed", what, t->name, i);
      ok &= g;
      t->be->ops->buf_free(t->be, din[i].dt.buf);
    }
  for (int i = 0; i < c->n_out; i++)
    if (c->out[i].alias < 0) t->be->ops->buf_free(t->be, dout[i].dt.buf);
  return ok && rc == ICL_OK;
}

/* The tolerance of a target for this entry. */
static const ot_tol *ot_tol_of(const ot_target *t, const ot_entry *e) {
  if (t->kind == OT_REF) return &e->tol.f64;
  if (t->kind == OT_VK && !t->fast) return &e->tol.vk;
  return t->fast ? &e->tol.fast : &e->tol.cpu;
}

/* Compares output i of a target with want (the oracle, or ref's output decoded). */
static void ot_judge(const ot_target *t, const ot_case *c, int i, const void *got, const double *want,
                     const void *ref_bytes, const char *what) {
  const ot_host *h = &c->out[i];
  const ot_tol *tol = ot_tol_of(t, c->e);
  int kind = c->e->op->cmp[i];
  if (kind == OT_EXACT) {
    int same = ref_bytes ? memcmp(got, ref_bytes, ot_bytes(h)) == 0 : ot_exact(h, got, want);
    CHECKF(same, "%s on %s: output %d differs from %s (must be exact)", what, t->name, i,
           ref_bytes ? "ref" : "float64");
    return;
  }
  double e = kind == OT_LSE ? ot_lse_err(h, got, want, tol->v) : ot_nmse(h, got, want, kind == OT_PATTERN);
  double limit = kind == OT_LSE ? 1.0 : tol->v;
  if (ot_verbose) printf("  %-72.72s %-26s out %d %s %.3g (limit %.3g)\n", what, t->name, i,
                         kind == OT_LSE ? "err/tol" : "nmse", e, limit);
  CHECKF(e <= limit, "%s on %s: output %d: %s %.3g > %.3g vs %s (%s)", what, t->name, i,
         kind == OT_LSE ? "error/tolerance" : "nmse", e, limit, ref_bytes ? "ref" : "float64", tol->why);
}

/* Whether target t runs case c: FAST targets only where FAST takes another path. */
static int ot_applies(const ot_target *t, const ot_case *c) {
  if (!t->fast) return 1;
  if (t->kind == OT_VK) /* Vulkan's FAST path differs in the several-token matmuls only */
    return c->fast_rows > 1 && (!strcmp(c->e->op->name, "matmul") || !strcmp(c->e->op->name, "matmul_add") ||
                                !strcmp(c->e->op->name, "matmul_group"));
  int64_t m = c->e->op->fast_max;
  if (m == 0) return 0;
  if (m < 0) m = cpu_of(t->be)->tile_min_tokens - 1;
  return c->fast_rows <= m;
}

static double *ot_decode(const ot_host *h, const void *bytes) {
  double *d = ot_xmalloc((size_t)ot_nelem(h) * sizeof *d);
  for (int64_t i = 0, n = ot_nelem(h); i < n; i++) d[i] = ot_value(h->type, bytes, i);
  return d;
}

/* Runs c on every target: ref against the oracle, then the others against ref's outputs. */
static void ot_run_case(ot_case *c, long *runs) {
  char what[200];
  ot_case_name(c, what, sizeof what);
  double *want[OT_MAX_OUT] = {0}, *refd[OT_MAX_OUT] = {0};
  for (int i = 0; i < c->n_out; i++) want[i] = ot_xmalloc((size_t)ot_nelem(&c->out[i]) * sizeof(double));
  c->e->op->oracle(c, want);
  ot_result ref = {{0}};
  int ref_ok = ot_exec(&ot_targets[0], c, &ref, what);
  for (int i = 0; ref_ok && i < c->n_out; i++) {
    ot_judge(&ot_targets[0], c, i, ref.out[i], want[i], NULL, what);
    refd[i] = ot_decode(&c->out[i], ref.out[i]);
  }
  for (int k = 1; ref_ok && k < ot_n_targets; k++) {
    if (!ot_applies(&ot_targets[k], c)) continue;
    ot_targets[k].be->precision = ot_targets[k].fast ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
    ot_result r = {{0}};
    if (ot_exec(&ot_targets[k], c, &r, what))
      for (int i = 0; i < c->n_out; i++) ot_judge(&ot_targets[k], c, i, r.out[i], refd[i], ref.out[i], what);
    ot_result_free(&r);
    ++*runs;
  }
  ++*runs;
  ot_result_free(&ref);
  for (int i = 0; i < c->n_out; i++) free(want[i]), free(refd[i]);
}

/* Frees what a generator allocated. */
static void ot_case_free(ot_case *c) {
  for (int i = 0; i < c->n_in; i++) free(c->in[i].data);
}

/* Every shape x type of an entry; returns the number of target runs. */
static long ot_run_entry(const ot_entry *e, uint64_t seed) {
  static const uint32_t f32_only[] = {ICL_TYPE_F32, ICL_TYPE_COUNT};
  const uint32_t *types = e->types ? e->types : f32_only;
  long runs = 0;
  for (size_t s = 0; s < e->n_shapes; s++) {
    if (ot_quick && strcmp(e->shapes[s].cls, "big") == 0) continue;
    for (const uint32_t *t = types; *t != ICL_TYPE_COUNT; t++) {
      ot_case c = {.e = e, .s = &e->shapes[s], .type = *t, .seed = seed + 1000 * s + 17 * *t};
      if (e->op->gen(&c)) ot_run_case(&c, &runs);
      ot_case_free(&c);
    }
  }
  return runs;
}

#endif
