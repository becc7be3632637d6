/* The CPU thread pool's split loop (cpu_pool_split, decode's weight streams): every element exactly once, in
 * ranges of at most the chunk (one range on one thread) inside [0, n), for several thread counts, sizes and chunks; and the same when
 * thread 0 is slow, so the others take chunks from the back of its region (counted, and printed). */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_internal.h"
#include "testutil.h"

typedef struct visit {
  _Atomic int *seen;
  int64_t n, chunk;
  int slow0;                /* thread 0 sleeps 200 us per range */
  _Atomic int bad_ranges;   /* empty, too long or outside [0, n) */
  _Atomic int stolen;       /* ranges of region 0 run by another thread */
  int n_threads;
} visit;

static void visit_range(void *arg, int64_t lo, int64_t hi, int ith) {
  visit *v = arg;
  /* one thread: one range of everything */
  int64_t most = v->n_threads == 1 ? v->n : v->chunk;
  if (lo < 0 || hi > v->n || lo >= hi || hi - lo > most) atomic_fetch_add(&v->bad_ranges, 1);
  if (ith != 0 && lo < v->n / v->n_threads) atomic_fetch_add(&v->stolen, 1);
  for (int64_t i = lo < 0 ? 0 : lo; i < hi && i < v->n; i++) atomic_fetch_add(&v->seen[i], 1);
  if (v->slow0 && ith == 0) nanosleep(&(struct timespec){0, 200000}, NULL);
}

static void check_split(cpu_pool *p, int threads, int64_t n, int64_t chunk, int slow0) {
  visit v = {.n = n, .chunk = chunk, .slow0 = slow0, .n_threads = threads};
  v.seen = calloc((size_t)(n > 0 ? n : 1), sizeof *v.seen);
  if (!v.seen) return;
  cpu_pool_split(p, n, chunk, visit_range, &v);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += atomic_load(&v.seen[i]) != 1;
  CHECKF(wrong == 0, "threads %d, n %lld, chunk %lld%s: %lld elements not visited exactly once", threads,
         (long long)n, (long long)chunk, slow0 ? ", slow thread 0" : "", (long long)wrong);
  CHECKF(atomic_load(&v.bad_ranges) == 0, "threads %d, n %lld, chunk %lld: %d bad ranges", threads, (long long)n,
         (long long)chunk, atomic_load(&v.bad_ranges));
  if (slow0)
    printf("threads %d, n %lld, chunk %lld, thread 0 slow: %d ranges of its region taken by others\n", threads,
           (long long)n, (long long)chunk, atomic_load(&v.stolen));
  free(v.seen);
}

int main(void) {
  static const int threads[] = {1, 2, 3, 7};
  static const int64_t sizes[] = {0, 1, 5, 64, 1000, 100003};
  static const int64_t chunks[] = {1, 7, 64};
  for (int t = 0; t < 4; t++) {
    cpu_pool *p = cpu_pool_new(threads[t]);
    CHECKF(p != NULL, "pool of %d threads", threads[t]);
    if (!p) continue;
    for (int s = 0; s < 6; s++)
      for (int c = 0; c < 3; c++) check_split(p, cpu_pool_threads(p), sizes[s], chunks[c], 0);
    if (threads[t] > 1) check_split(p, cpu_pool_threads(p), 4000, 16, 1);
    cpu_pool_free(p);
  }
  return t_done();
}
