/* A persistent thread pool running parallel-for loops over work items.
 *
 * Decode issues hundreds of small ops per token, so waking workers must cost microseconds:
 * idle workers spin on the task word for a short while, then sleep on a condition variable.
 *
 * Items are claimed from one 64-bit word holding (generation << 32 | next item), a shrinking share of the rest
 * at a time (guided, claim_items). The caller
 * works through items too and then waits only for items that were claimed and not yet done,
 * never for a worker that has not shown up: on a machine shared with other processes, a
 * descheduled worker then costs nothing instead of a whole scheduler time slice per op. A late
 * worker holding an old generation fails its compare-and-swap and never touches a task
 * descriptor that was reused (two descriptor slots alternate by generation). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_internal.h"


/* How long an idle worker keeps spinning before it sleeps. */
#define SPIN_NS 300000

typedef struct worker {
  cpu_pool *pool;
  int ith;
  pthread_t tid;
} worker;

/* One task: written by the caller before its generation is published. Fields are atomics
 * because a late worker may read a slot while it is being rewritten (it then discards it). */
typedef struct task_slot {
  _Atomic(cpu_item_fn) fn;
  _Atomic(void *) ctx;
  atomic_llong n_items;
  atomic_llong done;
} task_slot;

struct cpu_pool {
  int n;           /* threads including the caller */
  worker *workers; /* [n - 1] */
  _Atomic(uint64_t) claim; /* generation << 32 | next unclaimed item */
  task_slot slot[2];   /* slot[gen & 1] */
  atomic_int n_sleeping;
  atomic_int quit;
  pthread_mutex_t mu;
  pthread_cond_t cond;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t gen_of(uint64_t claim) { return (uint32_t)(claim >> 32); }

/* Claims the next items of generation g, if that generation is still current and has items: a share of what is
 * left (guided: 1/(4n) of it, at least one), so long loops of small items (the int8 gemm's, ~4 us each) pay the
 * two shared atomics per claim rather than per item, while the last items still go one at a time. Returns the
 * count claimed from *item. */
static int64_t claim_items(cpu_pool *p, uint32_t g, int64_t n_items, int64_t *item) {
  uint64_t v = atomic_load(&p->claim);
  for (;;) {
    int64_t next = (int64_t)(v & 0xffffffffu), want = (n_items - next) / (4 * p->n);
    if (gen_of(v) != g || next >= n_items) return 0;
    if (want < 1) want = 1;
    if (atomic_compare_exchange_weak(&p->claim, &v, v + (uint64_t)want)) {
      *item = next;
      return want;
    }
  }
}

static void run_items(cpu_pool *p, uint32_t g, int ith) {
  task_slot *s = &p->slot[g & 1];
  cpu_item_fn fn = atomic_load(&s->fn);
  void *ctx = atomic_load(&s->ctx);
  int64_t n = atomic_load(&s->n_items), it, k;
  while ((k = claim_items(p, g, n, &it)) > 0) {
    for (int64_t i = it; i < it + k; i++) fn(ctx, i, ith);
    atomic_fetch_add(&s->done, k);
  }
}

/* Waits until the generation differs from seen (or quit): spin first, then sleep. */
static uint32_t wait_task(cpu_pool *p, uint32_t seen) {
  int64_t t0 = now_ns();
  for (int i = 0;; i++) {
    uint32_t g = gen_of(atomic_load(&p->claim));
    if (g != seen || atomic_load(&p->quit)) return g;
    CPU_RELAX();
    if ((i & 255) == 255 && now_ns() - t0 > SPIN_NS) break;
  }
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->n_sleeping, 1); /* seq_cst: pairs with the publisher's claim store */
  uint32_t g;
  while ((g = gen_of(atomic_load(&p->claim))) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->cond, &p->mu);
  atomic_fetch_sub(&p->n_sleeping, 1);
  pthread_mutex_unlock(&p->mu);
  return g;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  cpu_pool *p = w->pool;
  uint32_t seen = 0;
  for (;;) {
    seen = wait_task(p, seen);
    if (atomic_load(&p->quit)) break;
    run_items(p, seen, w->ith);
  }
  return NULL;
}

cpu_pool *cpu_pool_new(int n_threads) {
  cpu_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n_threads < 1 ? 1 : n_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cond, NULL);
  p->workers = calloc((size_t)p->n, sizeof *p->workers);
  if (!p->workers) {
    cpu_pool_free(p);
    return NULL;
  }
  for (int i = 1; i < p->n; i++) {
    worker *w = &p->workers[i - 1];
    w->pool = p;
    w->ith = i;
    if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
      p->n = i; /* run with the workers we have; free joins those */
      break;
    }
  }
  return p;
}

void cpu_pool_free(cpu_pool *p) {
  if (!p) return;
  if (p->workers) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->workers[i - 1].tid, NULL);
    free(p->workers);
  }
  pthread_cond_destroy(&p->cond);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int cpu_pool_threads(const cpu_pool *p) { return p->n; }

void cpu_pool_for(cpu_pool *p, int64_t n_items, cpu_item_fn fn, void *ctx) {
  if (n_items <= 0) return;
  if (p->n == 1 || n_items == 1) {
    for (int64_t i = 0; i < n_items; i++) fn(ctx, i, 0);
    return;
  }
  uint32_t g = gen_of(atomic_load(&p->claim)) + 1;
  task_slot *s = &p->slot[g & 1];
  atomic_store(&s->fn, fn);
  atomic_store(&s->ctx, ctx);
  atomic_store(&s->n_items, n_items);
  atomic_store(&s->done, 0);
  atomic_store(&p->claim, (uint64_t)g << 32); /* publish */
  if (atomic_load(&p->n_sleeping) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
  }
  run_items(p, g, 0);
  /* only items already claimed by a worker can be outstanding here */
  for (int i = 0; atomic_load(&s->done) < n_items; i++) {
    CPU_RELAX();
    if ((i & 1023) == 1023) sched_yield();
  }
}

typedef struct range_ctx {
  cpu_range_fn fn;
  void *ctx;
  int64_t n, grain;
} range_ctx;

static void range_item(void *arg, int64_t item, int ith) {
  range_ctx *r = arg;
  int64_t lo = item * r->grain, hi = lo + r->grain < r->n ? lo + r->grain : r->n;
  r->fn(r->ctx, lo, hi, ith);
}

void cpu_pool_range(cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (n <= grain || p->n == 1) {
    fn(ctx, 0, n, 0);
    return;
  }
  range_ctx r = {fn, ctx, n, grain};
  cpu_pool_for(p, (n + grain - 1) / grain, range_item, &r);
}

/* cpu_pool_split: region r's remaining [front, back) packed as front << 32 | back. */
typedef struct split_ctx {
  cpu_range_fn fn;
  void *ctx;
  int64_t chunk;
  int n_reg;
  _Atomic uint64_t reg[256];
} split_ctx;

/* Claims up to chunk elements from the front (owner) or the back (others) of a region; 0 when it is empty. */
static int split_claim(_Atomic uint64_t *reg, int64_t chunk, int back, int64_t *lo, int64_t *hi) {
  uint64_t s = atomic_load(reg), ns;
  int64_t f, b;
  do {
    f = (int64_t)(s >> 32), b = (int64_t)(s & 0xFFFFFFFFu);
    if (f >= b) return 0;
    if (back) *lo = b - chunk > f ? b - chunk : f, *hi = b, ns = (uint64_t)f << 32 | (uint64_t)*lo;
    else *lo = f, *hi = f + chunk < b ? f + chunk : b, ns = (uint64_t)*hi << 32 | (uint64_t)b;
  } while (!atomic_compare_exchange_weak(reg, &s, ns));
  return 1;
}

/* Item r: region r from its front, then the other regions from their backs. */
static void split_item(void *arg, int64_t r, int ith) {
  split_ctx *c = arg;
  int64_t lo, hi;
  while (split_claim(&c->reg[r], c->chunk, 0, &lo, &hi)) c->fn(c->ctx, lo, hi, ith);
  for (int k = 1; k < c->n_reg; k++)
    while (split_claim(&c->reg[(r + k) % c->n_reg], c->chunk, 1, &lo, &hi)) c->fn(c->ctx, lo, hi, ith);
}

void cpu_pool_split(cpu_pool *p, int64_t n, int64_t chunk, cpu_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (chunk < 1) chunk = 1;
  if (p->n == 1 || n <= chunk) {
    fn(ctx, 0, n, 0);
    return;
  }
  if (n >= (int64_t)1 << 31) { /* beyond the packed 32-bit bounds: plain ranges */
    cpu_pool_range(p, n, chunk, fn, ctx);
    return;
  }
  split_ctx c = {.fn = fn, .ctx = ctx, .chunk = chunk, .n_reg = p->n};
  for (int r = 0; r < c.n_reg; r++)
    atomic_init(&c.reg[r], (uint64_t)(n * r / c.n_reg) << 32 | (uint64_t)(n * (r + 1) / c.n_reg));
  cpu_pool_for(p, c.n_reg, split_item, &c);
}
