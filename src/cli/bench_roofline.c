/* Roofline lines of `icl bench model` and `icl bench cpu`. Prefill is compute: its FLOPs (matmuls
 * and attention) against the f32 FMA peak (exact precision) or the int8 dot-product peak (fast precision,
 * where the backend runs matmuls on int8 activations). Decode is bandwidth: the bytes it must read per
 * step (every weight once plus the visible K/V cache) against the measured read stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_roofline.h"
#include "model_internal.h" /* the weight views and per-layer windows of the loaded model */

static double elems(const icl_dt *t) { return t->buf ? (double)t->ne[0] * (double)t->ne[1] : 0; }
static double bytes(const icl_dt *t) { return t->buf ? (double)icl_type_row_bytes(t->type, t->ne[0]) * (double)t->ne[1] : 0; }

static void count_layers(const icl_model *m, bench_roof *r, int *window) {
  for (int l = 0; l < m->hp.n_layer; l++) {
    const icl_layer *L = &m->layers[l];
    const icl_dt *w[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    for (int i = 0; i < 7; i++) r->layer_macs += elems(w[i]), r->layer_bytes += bytes(w[i]);
    window[l] = L->window;
  }
}

int bench_roof_parse(const char *v, icl_cpu_ceilings *out) {
  char *end;
  double x[3];
  const char *p = v;
  for (int i = 0; i < 3; i++) {
    x[i] = strtod(p, &end);
    if (end == p || !(x[i] > 0) || !isfinite(x[i]) || *end != (i < 2 ? ',' : '\0')) return 1;
    p = end + 1;
  }
  *out = (icl_cpu_ceilings){.fma_gflops = x[0], .int8_gops = x[1], .read_gbps = x[2]};
  return 0;
}

int bench_roof_init(icl_model *m, int precision, const icl_cpu_ceilings *given, bench_roof *r) {
  *r = (bench_roof){.int8 = precision == ICL_PRECISION_FAST, .n_layer = m->hp.n_layer, .n_head = m->hp.n_head,
                    .head_dim = m->hp.head_dim, .n_kv_head = m->hp.n_head_kv};
  int *window = calloc((size_t)m->hp.n_layer + 1, sizeof *window);
  if (!window || strcmp(m->be->ops->name, "cpu") != 0) return free(window), 0;
  count_layers(m, r, window);
  r->window = window;
  r->head_macs = elems(&m->output);
  r->head_bytes = bytes(&m->output);
  icl_error e = {0};
  if (given ? icl_cpu_describe(m->be, &r->ceil, &e) : icl_cpu_measure_ceilings(m->be, 1, &r->ceil, &e)) {
    fprintf(stderr, "icl bench: %s\n", e.msg);
    return 0;
  }
  if (given) {
    r->ceil.fma_gflops = given->fma_gflops;
    r->ceil.int8_gops = given->int8_gops;
    r->ceil.read_gbps = given->read_gbps;
  }
  r->have = 1;
  printf("ceilings (%s, %d threads, %s): f32 FMA %.1f GFLOP/s, int8 dot %.1f GOP/s, read %.2f GB/s\n", r->ceil.simd,
         r->ceil.threads, given ? "given" : "measured now", r->ceil.fma_gflops, r->ceil.int8_gops, r->ceil.read_gbps);
  return 1;
}

void bench_roof_free(bench_roof *r) {
  free((void *)r->window);
  r->window = NULL;
}

/* Keys visible to the queries at positions p0..p1-1 of a layer with this window (0 = all before). */
static double visible_keys(long p0, long p1, int window) {
  double k = 0;
  for (long p = p0; p < p1; p++) k += window > 0 && p + 1 > window ? window : p + 1;
  return k;
}

/* q.k and p.v: 2 multiply-adds per head element per visible key. */
static double attn_flops(const bench_roof *r, long p0, long p1) {
  double f = 0;
  for (int l = 0; l < r->n_layer; l++) f += 4.0 * r->n_head * r->head_dim * visible_keys(p0, p1, r->window[l]);
  return f;
}

void bench_roof_prefill(const bench_roof *r, long n, long head_rows, double sec) {
  if (!r->have || sec <= 0) return;
  double mm = 2 * (r->layer_macs * (double)n + r->head_macs * (double)head_rows), at = attn_flops(r, 0, n);
  double gf = (mm + at) / sec * 1e-9;
  /* fast precision: the matmuls run on int8 products (the int8 gemm; not on the generic level), attention in
   * f32, so the bound is the sum of their times at the two peaks */
  if (r->int8 && strcmp(r->ceil.simd, "generic") != 0) {
    double bound = mm / (r->ceil.int8_gops * 1e9) + at / (r->ceil.fma_gflops * 1e9);
    printf("  roofline: %.1f GOP/s (%.0f%% matmul) = %.1f%% of the int8-dot peak for the matmuls and the f32 FMA peak "
           "for attention\n", gf, 100 * mm / (mm + at), 100 * bound / sec);
    return;
  }
  printf("  roofline: %.1f GFLOP/s (%.0f%% matmul) = %.1f%% of the f32 FMA peak\n", gf, 100 * mm / (mm + at),
         100 * gf / r->ceil.fma_gflops);
}

void bench_roof_decode(const bench_roof *r, long past, long steps, double sec) {
  if (!r->have || sec <= 0) return;
  double kv = 0;
  for (int l = 0; l < r->n_layer; l++) /* f32 K and V rows of every visible position */
    kv += 2.0 * 4 * r->n_kv_head * r->head_dim * visible_keys(past, past + steps, r->window[l]);
  double b = (r->layer_bytes + r->head_bytes) * (double)steps + kv, gb = b / sec * 1e-9;
  printf("  roofline: %.2f GB/s (weights %.1f MB + KV %.1f MB per step) = %.1f%% of the read bandwidth\n", gb,
         (r->layer_bytes + r->head_bytes) * 1e-6, kv / (double)steps * 1e-6, 100 * gb / r->ceil.read_gbps);
}

int bench_cpu(int argc, char **argv) {
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else return fprintf(stderr, "usage: icl bench cpu [--quick]   (threads: ICL_THREADS)\n"), 2;
  }
  icl_backend *be = NULL;
  icl_error e = {0};
  icl_cpu_ceilings c;
  int rc = icl_cpu_backend_new(0, &be, &e);
  if (!rc) rc = icl_cpu_measure_ceilings(be, quick, &c, &e);
  if (be) be->ops->destroy(be);
  if (rc) return fprintf(stderr, "icl bench cpu: %s\n", e.msg), 1;
  printf("cpu: %s kernels, %d threads (the backend's pool; best of %s rounds)\n", c.simd, c.threads,
         quick ? "3" : "7");
  printf("%-34s %10.1f GFLOP/s  (%.1f per thread)\n", "f32 FMA peak", c.fma_gflops, c.fma_gflops / c.threads);
  printf("%-34s %10.1f GOP/s    (%.1f per thread)\n", "int8 dot-product peak", c.int8_gops, c.int8_gops / c.threads);
  printf("%-34s %10.2f GB/s\n", "read bandwidth (stream)", c.read_gbps);
  return 0;
}
