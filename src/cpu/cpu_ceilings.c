/* The machine's ceilings measured through the CPU backend's own thread pool: f32 FMA peak, int8
 * dot-product peak and streaming read bandwidth. `icl bench cpu` prints them and `icl bench model`
 * states every row as a fraction of the one that bounds it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_internal.h"

#define GEN_CHAINS 16
/* Items per thread of one timed loop (dynamic claiming balances a descheduled thread). */
#define ITEMS_PER_THREAD 8
/* The read stream: larger than any L3 here (260 MiB on the machine of docs/performance.md). */
#define READ_BYTES ((size_t)768 << 20)
#define READ_ITEM_BYTES ((size_t)4 << 20)

static double gen_fma(int64_t iters, float *sink) {
  float acc[GEN_CHAINS];
  for (int i = 0; i < GEN_CHAINS; i++) acc[i] = (float)i;
  for (int64_t it = 0; it < iters; it++)
    for (int i = 0; i < GEN_CHAINS; i++) acc[i] = acc[i] * 0.999999f + 1e-6f;
  for (int i = 1; i < GEN_CHAINS; i++) acc[0] += acc[i];
  *sink = acc[0];
  return (double)iters * GEN_CHAINS * 2;
}

static double gen_dot8(int64_t iters, float *sink) {
  int32_t acc[GEN_CHAINS];
  volatile int8_t one = 1; /* not folded into a constant */
  uint8_t u = (uint8_t)one;
  int8_t s = one;
  for (int i = 0; i < GEN_CHAINS; i++) acc[i] = i;
  for (int64_t it = 0; it < iters; it++)
    for (int i = 0; i < GEN_CHAINS; i++) acc[i] += (int32_t)u * s;
  for (int i = 1; i < GEN_CHAINS; i++) acc[0] += acc[i];
  *sink = (float)acc[0];
  return (double)iters * GEN_CHAINS * 2;
}

static double gen_read(const float *x, int64_t n, float *sink) {
  float s[GEN_CHAINS] = {0};
  for (int64_t i = 0; i + GEN_CHAINS <= n; i += GEN_CHAINS)
    for (int j = 0; j < GEN_CHAINS; j++) s[j] += x[i + j];
  for (int j = 1; j < GEN_CHAINS; j++) s[0] += s[j];
  *sink += s[0];
  return (double)(n / GEN_CHAINS * GEN_CHAINS) * sizeof(float);
}

void cpu_probes_generic(cpu_kernels *k) {
  k->probe_fma = gen_fma;
  k->probe_dot8 = gen_dot8;
  k->probe_read = gen_read;
}

typedef struct probe_ctx {
  const cpu_kernels *k;
  int which; /* 0 fma, 1 dot8, 2 read */
  int64_t iters;
  const float *buf;
  float sink[256];
  double ops[256], busy[256]; /* busy: the thread's CPU seconds in compute items */
} probe_ctx;

static double thread_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void probe_item(void *arg, int64_t item, int ith) {
  probe_ctx *c = arg;
  float s = 0;
  double t0 = c->which < 2 ? thread_seconds() : 0;
  if (c->which == 0) c->ops[ith] += c->k->probe_fma(c->iters, &s);
  else if (c->which == 1) c->ops[ith] += c->k->probe_dot8(c->iters, &s);
  else c->ops[ith] += c->k->probe_read(c->buf + (size_t)item * (READ_ITEM_BYTES / sizeof(float)),
                                       (int64_t)(READ_ITEM_BYTES / sizeof(float)), &s);
  if (c->which < 2) c->busy[ith] += thread_seconds() - t0;
  c->sink[ith] += s;
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best rate (operations or bytes per second) of reps timed loops of n_items items. The compute peaks are the
 * threads' operations per CPU second of their own, times the thread count: a core's rate times the cores, whatever
 * the scheduler did (two pool threads placed on one core for a short loop, or a sleeping thread joining it late,
 * made the wall-clock rate one core's: 117 of 234 GFLOP/s in about half the runs beside other work). The read
 * stream shares the memory system, so it stays bytes per wall second. */
static double probe_best(cpu_backend *cb, probe_ctx *c, int64_t n_items, int reps) {
  double best = 0;
  for (int r = 0; r < reps; r++) {
    memset(c->ops, 0, sizeof c->ops);
    memset(c->busy, 0, sizeof c->busy);
    double t0 = seconds();
    cpu_pool_for(cb->pool, n_items, probe_item, c);
    double dt = seconds() - t0, ops = 0, busy = 0;
    for (int i = 0; i < cb->n_threads; i++) ops += c->ops[i], busy += c->busy[i];
    double rate = c->which < 2 ? (busy > 0 ? ops / busy * cb->n_threads : 0) : (dt > 0 ? ops / dt : 0);
    if (rate > best) best = rate;
  }
  return best;
}

int icl_cpu_describe(icl_backend *be, icl_cpu_ceilings *out, icl_error *err) {
  if (!be || strcmp(be->ops->name, "cpu") != 0)
    return icl_error_set(err, ICL_EINVAL, "cpu ceilings: backend '%s' is not the CPU backend", be ? be->ops->name : "");
  cpu_backend *cb = cpu_of(be);
  *out = (icl_cpu_ceilings){.threads = cb->n_threads, .simd = cb->k.name};
  return ICL_OK;
}

int icl_cpu_measure_ceilings(icl_backend *be, int quick, icl_cpu_ceilings *out, icl_error *err) {
  if (!be || strcmp(be->ops->name, "cpu") != 0)
    return icl_error_set(err, ICL_EINVAL, "cpu ceilings: backend '%s' is not the CPU backend", be ? be->ops->name : "");
  cpu_backend *cb = cpu_of(be);
  probe_ctx *c = calloc(1, sizeof *c);
  size_t bytes = quick ? READ_BYTES / 2 : READ_BYTES;
  cpu_chunk *chunk = NULL; /* the weights' memory (huge pages where allowed): the stream decode reads */
  float *buf = cpu_mem_alloc(&cb->mem, bytes, &chunk);
  if (!c || !buf) {
    free(c);
    if (buf) cpu_mem_free(&cb->mem, buf, chunk);
    return icl_error_set(err, ICL_ENOMEM, "cpu ceilings: cannot allocate %zu bytes for the read stream", bytes);
  }
  /* fault the pages in before timing; distinct values rather than zeros, a precaution against page sharing (a
   * host or kernel serving identical pages from one copy) */
  for (size_t i = 0; i < bytes / sizeof(float); i++) buf[i] = (float)(i & 0xFFFFF);
  int reps = quick ? 3 : 7;
  int64_t items = (int64_t)ITEMS_PER_THREAD * cb->n_threads;
  *out = (icl_cpu_ceilings){.threads = cb->n_threads, .simd = cb->k.name};
  c->k = &cb->k;
  c->iters = quick ? 200000 : 1000000;
  out->fma_gflops = probe_best(cb, c, items, reps) * 1e-9;
  c->which = 1;
  out->int8_gops = probe_best(cb, c, items, reps) * 1e-9;
  c->which = 2;
  c->buf = buf;
  out->read_gbps = probe_best(cb, c, (int64_t)(bytes / READ_ITEM_BYTES), quick ? 2 : 4) * 1e-9;
  cpu_mem_free(&cb->mem, buf, chunk);
  free(c);
  return ICL_OK;
}
