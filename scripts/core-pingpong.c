/* How far apart the two cores this process runs on are: the mean round trip of one cache line bounced between two
 * threads, 200,000 times. On the 2-vCPU EPYC machines it reads 51-158 ns when the host places the vCPUs close and
 * 337-428 ns when it places them far apart, the state in which `icl bench train` runs meta ~20% slower
 * (docs/performance.md, session 32). Run it just before and after a timing to say which state the timing saw.
 *   cc -O2 -pthread -o /tmp/core-pingpong scripts/core-pingpong.c && /tmp/core-pingpong */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define ROUNDS 200000

static _Alignas(64) atomic_int turn; /* odd: the other thread's move, even: the main thread's */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void *answer(void *arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) {
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {
    }
    atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
  }
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, answer, NULL) != 0) return fprintf(stderr, "core-pingpong: no second thread\n"), 1;
  double t0 = now_s();
  for (int i = 0; i < ROUNDS; i++) {
    atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
    while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
    }
  }
  double dt = now_s() - t0;
  pthread_join(t, NULL);
  printf("%.0f ns round trip\n", dt / ROUNDS * 1e9);
  return 0;
}
