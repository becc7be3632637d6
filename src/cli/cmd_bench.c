/* icl bench ops: throughput of the backend ops at SmolLM2-135M and Gemma 3 270M layer shapes,
 * prefill (512 tokens) and decode (1 token), next to this device's measured ceilings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bench_roofline.h"
#include "cli.h"
#include "ref.h"
#include "vk.h"

typedef struct bench_model {
  const char *name;
  int64_t d, ff, nh, nkv, hd;
} bench_model;

static const bench_model MODELS[] = {
    {"SmolLM2-135M", 576, 1536, 9, 3, 64},
    {"Gemma3-270M", 640, 2048, 4, 1, 256},
};
static const uint32_t TYPES[] = {ICL_TYPE_Q4_1, ICL_TYPE_Q8_0, ICL_TYPE_Q5_0, ICL_TYPE_F16};

typedef struct bench_ctx {
  icl_backend *be;
  icl_ceilings ceil;
  int quick;
  int64_t prefill; /* tokens of the prefill phase */
  icl_error err;
} bench_ctx;

/* One measured op: time per call and the work it does. */
typedef struct bench_row {
  const char *model, *op, *type, *phase;
  int64_t tokens;
  double sec, flops, bytes;
} bench_row;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_header(const bench_ctx *b) {
  const icl_device_info *d = icl_vk_backend_device(b->be);
  printf("device: %s (%s, subgroup %u)\n", d->name, d->type, d->subgroup_size);
  printf("ceilings: read bandwidth %.2f GB/s (contiguous per invocation %.2f, interleaved %.2f), "
         "FMA %.1f GFLOP/s\n\n",
         b->ceil.gbps, b->ceil.gbps_contig, b->ceil.gbps_strided, b->ceil.gflops);
  printf("%-13s %-10s %-5s %-8s %6s %10s %9s %8s %9s\n", "model", "op", "type", "phase", "tokens", "ms/layer",
         "GFLOP/s", "GB/s", "%ceiling");
}

/* The fraction of the ceiling that bounds the op: bandwidth when it does under ~4 flops per
 * byte read at this device's ratio, arithmetic otherwise. */
static void print_row(const bench_ctx *b, const bench_row *r) {
  double gf = r->flops / r->sec * 1e-9, gb = r->bytes / r->sec * 1e-9;
  int bw_bound = r->flops / r->bytes < b->ceil.gflops / b->ceil.gbps;
  double frac = bw_bound ? gb / b->ceil.gbps : gf / b->ceil.gflops;
  printf("%-13s %-10s %-5s %-8s %6lld %10.3f %9.2f %8.2f %7.1f%% %s\n", r->model, r->op, r->type, r->phase,
         (long long)r->tokens, r->sec * 1e3, gf, gb, 100 * frac, bw_bound ? "bw" : "fma");
  fflush(stdout);
}

static icl_buf *alloc_rand(bench_ctx *b, uint32_t type, int64_t n, uint64_t seed) {
  size_t bytes = icl_type_row_bytes(type, n);
  void *host = malloc(bytes);
  icl_buf *buf = NULL;
  if (!host) return NULL;
  if (type == ICL_TYPE_F32) {
    float *f = host;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) f[i] = (float)((s = s * 6364136223846793005ull + 1) >> 40) / 16777216.0f - 0.5f;
  } else {
    icl_ref_random_weights(type, host, n, seed);
  }
  if (b->be->ops->buf_alloc(b->be, bytes, ICL_BUF_WEIGHT, &buf, &b->err) ||
      b->be->ops->write(b->be, buf, 0, host, bytes, &b->err)) {
    if (buf) b->be->ops->buf_free(b->be, buf);
    buf = NULL;
  }
  free(host);
  return buf;
}

static icl_dt view(icl_buf *buf, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2) {
  icl_dt t = {buf, 0, type, {ne0, ne1, ne2, 1}};
  return t;
}

/* Times `reps` repetitions of fn recorded into one batch (one sync), after one warm-up call. */
typedef int (*bench_fn)(bench_ctx *b, void *arg);
static int time_op(bench_ctx *b, bench_fn fn, void *arg, int reps, double *sec) {
  if (fn(b, arg) || b->be->ops->sync(b->be, &b->err)) return 1;
  double t0 = now_s();
  for (int r = 0; r < reps; r++)
    if (fn(b, arg)) return 1;
  if (b->be->ops->sync(b->be, &b->err)) return 1;
  *sec = (now_s() - t0) / reps;
  return 0;
}

/* ---- matmul: the seven projections of one layer ---- */
typedef struct layer_mm {
  icl_dt w[7], x, y;
} layer_mm;

static int run_layer_mm(bench_ctx *b, void *arg) {
  layer_mm *l = arg;
  for (int i = 0; i < 7; i++) {
    icl_dt x = l->x, y = l->y;
    x.ne[0] = l->w[i].ne[0];
    y.ne[0] = l->w[i].ne[1];
    if (b->be->ops->matmul(b->be, &l->w[i], &x, &y, &b->err)) return 1;
  }
  return 0;
}

static int bench_matmul(bench_ctx *b, const bench_model *m, uint32_t type) {
  int64_t q = m->nh * m->hd, kv = m->nkv * m->hd, widest = m->ff > q ? m->ff : q;
  const int64_t shape[7][2] = {{m->d, q}, {m->d, kv}, {m->d, kv}, {q, m->d}, {m->d, m->ff}, {m->d, m->ff},
                               {m->ff, m->d}};
  layer_mm l;
  double wbytes = 0, macs = 0, io = 0;
  icl_buf *bufs[9] = {0};
  int rc = 0;
  for (int i = 0; i < 7 && !rc; i++) {
    bufs[i] = alloc_rand(b, type, shape[i][0] * shape[i][1], 7 + (uint64_t)i);
    rc = bufs[i] == NULL;
    l.w[i] = view(bufs[i], type, shape[i][0], shape[i][1], 1);
    wbytes += (double)icl_type_row_bytes(type, shape[i][0] * shape[i][1]);
    macs += (double)(shape[i][0] * shape[i][1]);
    io += (double)(shape[i][0] + shape[i][1]) * 4;
  }
  /* decode, prefill (EXACT: the f32 tiled kernel), and prefill again at FAST where the backend's FAST path differs
   * (Vulkan's intdot on the 32-element block types, coopmat on every type: rows "intdot x7", "coopmat x7";
   * ICL_VK_MATMUL picks the path) */
  const char *fast = icl_vk_backend_matmul_path(b->be, ICL_PRECISION_FAST);
  int other = strcmp(fast, "tiled") != 0 && (strcmp(fast, "intdot") != 0 || icl_type_block_elems(type) == 32);
  int n_phases = other ? 3 : 2;
  int64_t phases[3] = {1, b->prefill, b->prefill};
  char op[16];
  for (int p = 0; p < n_phases && !rc; p++) {
    int64_t n = phases[p];
    b->be->precision = p == 2 ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
    snprintf(op, sizeof op, "%s x7", p == 2 ? fast : "matmul");
    rc = !(bufs[7] = alloc_rand(b, ICL_TYPE_F32, widest * n, 3)) ||
         !(bufs[8] = alloc_rand(b, ICL_TYPE_F32, widest * n, 4));
    l.x = view(bufs[7], ICL_TYPE_F32, widest, n, 1);
    l.y = view(bufs[8], ICL_TYPE_F32, widest, n, 1);
    double sec = 0;
    int reps = n == 1 ? (b->quick ? 5 : 20) : (b->quick ? 1 : 2);
    if (!rc) rc = time_op(b, run_layer_mm, &l, reps, &sec);
    bench_row r = {m->name, op, icl_type_name(type), n == 1 ? "decode" : "prefill", n, sec,
                   2 * macs * (double)n, wbytes + io * (double)n};
    if (!rc) print_row(b, &r);
    for (int i = 7; i < 9; i++)
      if (bufs[i]) b->be->ops->buf_free(b->be, bufs[i]), bufs[i] = NULL;
  }
  b->be->precision = ICL_PRECISION_EXACT;
  for (int i = 0; i < 9; i++)
    if (bufs[i]) b->be->ops->buf_free(b->be, bufs[i]);
  return rc;
}

/* ---- attention and rms_norm ---- */
typedef struct attn_arg {
  icl_dt q, k, v, o;
  icl_attn_params p;
} attn_arg;

static int run_attn(bench_ctx *b, void *arg) {
  attn_arg *a = arg;
  return b->be->ops->attention(b->be, &a->q, &a->k, &a->v, &a->p, NULL, &a->o, NULL, &b->err);
}

static int bench_attention(bench_ctx *b, const bench_model *m) {
  int64_t n = b->prefill;
  icl_buf *q = alloc_rand(b, ICL_TYPE_F32, m->hd * m->nh * n, 1),
          *o = alloc_rand(b, ICL_TYPE_F32, m->hd * m->nh * n, 2);
  icl_buf *k = alloc_rand(b, ICL_TYPE_F32, m->hd * m->nkv * n, 3),
          *v = alloc_rand(b, ICL_TYPE_F32, m->hd * m->nkv * n, 4);
  int rc = !q || !o || !k || !v;
  for (int p = 0; p < 2 && !rc; p++) {
    int64_t nq = p == 0 ? 1 : n; /* decode: the last query against all n keys */
    attn_arg a = {view(q, ICL_TYPE_F32, m->hd, m->nh, nq), view(k, ICL_TYPE_F32, m->hd, m->nkv, n),
                  view(v, ICL_TYPE_F32, m->hd, m->nkv, n), view(o, ICL_TYPE_F32, m->hd, m->nh, nq),
                  {(int32_t)(n - nq), 1.0f / sqrtf((float)m->hd), 0, 0}};
    double sec = 0, pairs = p == 0 ? (double)n : (double)n * (double)(n + 1) / 2;
    rc = time_op(b, run_attn, &a, p == 0 ? (b->quick ? 5 : 20) : 1, &sec);
    bench_row r = {m->name, "attention", "F32", p == 0 ? "decode" : "prefill", nq, sec,
                   4.0 * (double)(m->nh * m->hd) * pairs,
                   4.0 * (double)(2 * m->nkv * m->hd * n + 2 * m->nh * m->hd * nq)};
    if (!rc) print_row(b, &r);
  }
  icl_buf *all[4] = {q, o, k, v};
  for (int i = 0; i < 4; i++)
    if (all[i]) b->be->ops->buf_free(b->be, all[i]);
  return rc;
}

typedef struct norm_arg {
  icl_dt x, w;
} norm_arg;

static int run_norm(bench_ctx *b, void *arg) {
  norm_arg *a = arg;
  return b->be->ops->rms_norm(b->be, &a->x, &a->w, 1e-5f, &a->x, &b->err);
}

static int bench_norm(bench_ctx *b, const bench_model *m) {
  icl_buf *x = alloc_rand(b, ICL_TYPE_F32, m->d * b->prefill, 1), *w = alloc_rand(b, ICL_TYPE_F32, m->d, 2);
  int rc = !x || !w;
  for (int p = 0; p < 2 && !rc; p++) {
    int64_t n = p == 0 ? 1 : b->prefill;
    norm_arg a = {view(x, ICL_TYPE_F32, m->d, n, 1), view(w, ICL_TYPE_F32, m->d, 1, 1)};
    double sec = 0;
    rc = time_op(b, run_norm, &a, b->quick ? 5 : 20, &sec);
    bench_row r = {m->name, "rms_norm", "F32", p == 0 ? "decode" : "prefill", n, sec, 4.0 * (double)(m->d * n),
                   4.0 * (double)(2 * m->d * n + m->d)};
    if (!rc) print_row(b, &r);
  }
  if (x) b->be->ops->buf_free(b->be, x);
  if (w) b->be->ops->buf_free(b->be, w);
  return rc;
}

static int bench_ops(bench_ctx *b) {
  if (icl_vk_ceilings(b->be, b->quick, &b->ceil, &b->err)) return 1;
  print_header(b);
  for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++) {
    const bench_model *m = &MODELS[mi];
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
      if (bench_matmul(b, m, TYPES[t])) return 1;
    if (bench_attention(b, m) || bench_norm(b, m)) return 1;
  }
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: icl bench ops [--quick] [--backend vulkan]\n"
             "       icl bench cpu [--quick]   this machine's f32 FMA, int8 dot-product and read-bandwidth ceilings\n"
             "       icl bench model -m MODEL [--backend B] [--tokens N] [--decode D] [--once prefill|decode]   prefill 128/512/N, decode D\n"
             "       icl bench hooks -m MODEL [--backend B] [--tokens N] [--layer L]   capture overhead\n"
             "  ops       matmul (Q4_1, Q8_0, Q5_0, F16), attention and rms_norm at SmolLM2-135M and\n"
             "            Gemma 3 270M layer shapes, decode (1 token) and prefill (512 tokens), with\n"
             "            this device's measured bandwidth and FMA ceilings; matmul rows at EXACT (the f32\n"
             "            kernels), plus a FAST prefill row per quantized type where the device's FAST path\n"
             "            differs (\"intdot x7\", \"coopmat x7\": ICL_VK_MATMUL; %%ceiling against the f32 FMA rate)\n"
             "  --quick   64-token prefill, fewer repetitions (a smoke run)\n");
}

int icl_cmd_bench(int argc, char **argv) {
  bench_ctx b = {0};
  b.prefill = 512;
  int ops = 0;
  if (argc > 1 && !strcmp(argv[1], "model")) return icl_bench_model(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "hooks")) return icl_bench_hooks(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "train")) return icl_bench_train(argc - 1, argv + 1);
  if (argc > 1 && !strcmp(argv[1], "cpu")) return bench_cpu(argc - 1, argv + 1);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "ops")) ops = 1;
    else if (!strcmp(argv[i], "--quick")) b.quick = 1, b.prefill = 64;
    else if (!strcmp(argv[i], "--backend") && i + 1 < argc && !strcmp(argv[i + 1], "vulkan")) i++;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
    else return usage(stderr), fprintf(stderr, "icl bench: unexpected argument '%s'\n", argv[i]), 2;
  }
  if (!ops) return usage(stderr), 2;
  if (icl_vk_backend_new(-1, &b.be, &b.err)) {
    fprintf(stderr, "icl bench: %s\n", b.err.msg);
    return 1;
  }
  int rc = bench_ops(&b);
  if (rc) fprintf(stderr, "icl bench: %s\n", b.err.msg);
  b.be->ops->destroy(b.be);
  return rc ? 1 : 0;
}
