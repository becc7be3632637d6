/* Roofline accounting of `icl bench model` rows (bench_roofline.c): the work each measure does and its
 * fraction of the CPU ceilings it is bound by. */
#ifndef ICL_BENCH_ROOFLINE_H
#define ICL_BENCH_ROOFLINE_H

#include "backend.h"
#include "icl/model.h"

typedef struct bench_roof {
  int have;                /* ceilings measured (CPU backend) */
  int int8;                /* fast precision: matmuls on int8 dot products where the backend uses them */
  icl_cpu_ceilings ceil;
  double layer_macs;       /* multiply-adds of one token through every layer's matmuls */
  double layer_bytes;      /* bytes of every layer's matmul weights */
  double head_macs, head_bytes; /* the LM head, one token */
  int n_layer, n_head, head_dim, n_kv_head;
  const int *window;       /* [n_layer] sliding window per layer, 0 = global */
} bench_roof;

/* Counts the model's work and, on the CPU backend, takes the ceilings from given (fma, int8 and read set) or
 * measures them (given NULL); returns 0 when it cannot. */
int bench_roof_init(icl_model *m, int precision, const icl_cpu_ceilings *given, bench_roof *r);
/* Parses --ceilings "FMA,INT8,READ" (GFLOP/s, GOP/s, GB/s as `icl bench cpu` prints them); 0 on success. */
int bench_roof_parse(const char *v, icl_cpu_ceilings *out);
void bench_roof_free(bench_roof *r);
/* `icl bench cpu`: prints the ceilings of a CPU backend with ICL_THREADS threads. */
int bench_cpu(int argc, char **argv);
/* The line under a prefill of n tokens (LM head: head_rows of them), taking sec seconds. */
void bench_roof_prefill(const bench_roof *r, long n, long head_rows, double sec);
/* The line under `steps` decode steps after `past` tokens, taking sec seconds. */
void bench_roof_decode(const bench_roof *r, long past, long steps, double sec);

#endif
