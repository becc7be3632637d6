/* SIGBUS guard: a per-thread jump target, armed only while a guarded read runs (see sigbus_guard.h). The handler
 * is installed once and chains to the previous one for faults it does not own. */
#include "sigbus_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

typedef struct guard {
  sigjmp_buf jb;
  uintptr_t lo, hi; /* [lo, hi) the guarded mapping */
} guard;

static _Thread_local guard *volatile current;
static struct sigaction previous;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  guard *g = current;
  uintptr_t a = (uintptr_t)si->si_addr;
  if (g && a >= g->lo && a < g->hi) siglongjmp(g->jb, 1);
  /* not ours: hand it to whoever was there before (the fault repeats on return) */
  if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction) {
    previous.sa_sigaction(sig, si, uc);
    return;
  }
  sigaction(SIGBUS, &previous, NULL);
}

static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous);
}

int icl_sigbus_guard(const void *base, size_t size, int (*fn)(void *ud, icl_error *err), void *ud, icl_error *err,
                     int *rc) {
  pthread_once(&once, install);
  guard g, *volatile outer = current;
  g.lo = (uintptr_t)base, g.hi = (uintptr_t)base + size;
  if (sigsetjmp(g.jb, 1)) {
    current = outer;
    return 1;
  }
  current = &g;
  *rc = fn(ud, err);
  current = outer;
  return 0;
}
