/* The CPU ceilings of `icl bench cpu`: each level's probe reports exactly the work it did, the measured
 * ceilings are positive and finite with the pool's thread count, and a non-CPU backend is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "ref.h"
#include "testutil.h"

/* Work (flops or bytes) one probe call must report for `iters` iterations at a level of `lanes` f32 lanes. */
static void check_probes(const cpu_kernels *k) {
  double lanes = !strcmp(k->name, "avx512") ? 16 : !strcmp(k->name, "avx2") ? 8 : 1;
  double chains = lanes == 1 ? 16 : 12, per_dot = lanes == 16 ? 64 : lanes == 8 ? 32 : 1;
  float sink = 0, *x = calloc(1024, sizeof *x);
  CHECKF(k->probe_fma(10, &sink) == 10 * chains * lanes * 2, "%s: probe_fma work", k->name);
  CHECKF(k->probe_dot8(10, &sink) == 10 * chains * per_dot * 2, "%s: probe_dot8 work", k->name);
  CHECKF(x && k->probe_read(x, 1024, &sink) == 4096 && sink == sink, "%s: probe_read bytes", k->name);
  free(x);
}

static void check_measure(icl_backend *be) {
  icl_cpu_ceilings c;
  icl_error err;
  int rc = icl_cpu_measure_ceilings(be, 1, &c, &err);
  CHECKF(rc == ICL_OK, "ceilings: %s", rc ? err.msg : "");
  CHECKF(rc == ICL_OK && isfinite(c.fma_gflops) && c.fma_gflops > 0 && c.int8_gops > 0 && c.read_gbps > 0 &&
             isfinite(c.read_gbps) && c.threads == cpu_of(be)->n_threads,
         "ceilings: fma %g int8 %g read %g threads %d", c.fma_gflops, c.int8_gops, c.read_gbps, c.threads);
}

static void check_refused(void) {
  icl_backend *ref = NULL;
  icl_cpu_ceilings c;
  icl_error err;
  CHECKF(icl_ref_backend_new(&ref, &err) == ICL_OK, "ref backend: %s", err.msg);
  if (!ref) return;
  CHECKF(icl_cpu_measure_ceilings(ref, 1, &c, &err) == ICL_EINVAL && strstr(err.msg, "not the CPU backend"),
         "ceilings on the ref backend: refused");
  ref->ops->destroy(ref);
}

int main(void) {
  static const char *levels[] = {"generic", "avx2", "avx512"};
  icl_backend *last = NULL;
  for (int i = 0; i < 3; i++) {
    setenv("ICL_CPU_SIMD", levels[i], 1);
    icl_error err;
    icl_backend *be;
    if (icl_cpu_backend_new(2, &be, &err)) {
      fprintf(stderr, "cpu backend: %s\n", err.msg);
      return 1;
    }
    if (strcmp(cpu_of(be)->k.name, levels[i]) != 0) { /* this CPU lacks the level */
      be->ops->destroy(be);
      continue;
    }
    printf("testing level %s\n", levels[i]);
    check_probes(&cpu_of(be)->k);
    if (last) last->ops->destroy(last);
    last = be;
  }
  unsetenv("ICL_CPU_SIMD");
  if (last) check_measure(last);
  check_refused();
  if (last) last->ops->destroy(last);
  return t_done();
}
