/* run_split: independent op sequences at once, one per pool thread, each on a sub-backend of its own.
 *
 * The ops of one CPU backend share mutable state (per-thread and shared scratch, the matmul panel, RoPE tables,
 * repacked weights), so two threads cannot call ops on it at once. A sub-backend is a one-thread CPU backend
 * (no workers: its regions run inline on the calling thread) with all of that state its own; sub[ith] is used only
 * by pool thread ith, so no two items ever share one. Buffers are plain host memory, so the parent's are the
 * sub-backends' too. Sub-backends never repack weights (xw_off): their cache would outlive a buffer the parent
 * frees (the copies give identical results, so this changes no bit). */
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct split_ctx {
  cpu_backend *cb;
  icl_split_fn fn;
  void *ctx;
  int *rc;          /* [n] */
  icl_error *errs;  /* [n] */
} split_ctx;

static void split_item(void *arg, int64_t i, int ith) {
  split_ctx *c = arg;
  c->rc[i] = c->fn(c->ctx, (int)i, &c->cb->sub[ith]->be, &c->errs[i]);
}

/* The parent's settings on sub-backend s (they may have changed since it was made). */
static void sub_sync(const cpu_backend *cb, cpu_backend *s) {
  s->k = cb->k;
  s->be.precision = cb->be.precision;
  s->tile_min_tokens = cb->tile_min_tokens;
  s->qgemm_min_tokens = cb->qgemm_min_tokens;
  s->xw_off = 1;
}

int cpu_run_split(icl_backend *be, int n, icl_split_fn fn, void *ctx, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  if (!cb->sub && !(cb->sub = calloc((size_t)cb->n_threads, sizeof *cb->sub)))
    return icl_error_set(err, ICL_ENOMEM, "cpu: run_split: out of memory for %d sub-backends", cb->n_threads);
  for (int i = 0; i < cb->n_threads; i++) {
    if (!cb->sub[i]) {
      icl_backend *s;
      int rc = icl_cpu_backend_new(1, &s, err);
      if (rc) return rc; /* those made so far stay; the rest are made on the next call */
      cb->sub[i] = cpu_of(s);
    }
    sub_sync(cb, cb->sub[i]);
  }
  int *rcs = calloc((size_t)n, sizeof *rcs);
  icl_error *errs = calloc((size_t)n, sizeof *errs);
  if (!rcs || !errs) {
    free(rcs), free(errs);
    return icl_error_set(err, ICL_ENOMEM, "cpu: run_split: out of memory for %d items", n);
  }
  split_ctx c = {.cb = cb, .fn = fn, .ctx = ctx, .rc = rcs, .errs = errs};
  cpu_pool_for(cb->pool, n, split_item, &c);
  int rc = ICL_OK;
  for (int i = 0; !rc && i < n; i++)
    if ((rc = rcs[i]) && err) *err = errs[i];
  free(rcs), free(errs);
  return rc;
}

void cpu_split_free(cpu_backend *cb) {
  for (int i = 0; cb->sub && i < cb->n_threads; i++)
    if (cb->sub[i]) cb->sub[i]->be.ops->destroy(&cb->sub[i]->be);
  free(cb->sub);
  cb->sub = NULL;
}
