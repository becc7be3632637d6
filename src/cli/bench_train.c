/* icl bench train: training throughput of the CPU trainer on the two reference shapes of issue 12
 * (a 2-layer attention-only LM, d_model 256, ctx 256, batch 32; the meta-learning-sized model, 2 layers,
 * 1 head, d_model 128, 9 positions, batch 128), on repeated-segment data: steps/s, tokens/s, GFLOP/s
 * (matmuls and causal attention, forward + backward = 3x forward) beside this machine's f32 gemm rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cli.h"
#include "icl/train.h"

typedef struct bt_case {
  const char *name;
  icl_attn_config cfg;
  int64_t B, T;
} bt_case;

static const bt_case CASES[] = {
    {"attn2-d256-ctx256-b32", {.n_layer = 2, .n_head = 8, .d_model = 256, .n_ctx = 256, .vocab = 256,
                               .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .seed = 1}, 32, 256},
    {"meta-d128-h1-T9-b128", {.n_layer = 2, .n_head = 1, .d_model = 128, .n_ctx = 9, .vocab = 64,
                              .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .seed = 1}, 128, 9},
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Floating-point work of one step: 3x (2 N sum(K R) over matmuls + 4 B nh hd T(T+1)/2 attention). */
static double step_flops(const icl_attn_config *c, int64_t B, int64_t T) {
  double N = (double)(B * T), d = c->d_model, qd = (double)c->n_head * (c->d_head ? c->d_head : c->d_model / c->n_head);
  double mm = c->n_layer * (3 * d * qd + qd * d) + d * c->vocab;
  double att = c->n_layer * 4.0 * B * qd * (T * (T + 1) / 2.0);
  return 3.0 * (2.0 * N * mm + att);
}

/* GFLOP/s of a 512x512x512 f32 matmul on the CPU backend (the gemm kernel the trainer runs on). */
static double gemm_rate(int threads) {
  icl_backend *be;
  icl_error err;
  if (icl_cpu_backend_new(threads, &be, &err)) return 0.0;
  const int64_t n = 512;
  float *w = calloc((size_t)(n * n), 4), *x = calloc((size_t)(n * n), 4), *y = calloc((size_t)(n * n), 4);
  struct icl_buf *bw, *bx, *by;
  double rate = 0.0;
  if (w && x && y && !be->ops->buf_alloc(be, (size_t)(n * n) * 4, ICL_BUF_WEIGHT, &bw, &err) &&
      !be->ops->buf_alloc(be, (size_t)(n * n) * 4, ICL_BUF_ACT, &bx, &err) &&
      !be->ops->buf_alloc(be, (size_t)(n * n) * 4, ICL_BUF_ACT, &by, &err)) {
    icl_dt vw = {.buf = bw, .type = ICL_TYPE_F32, .ne = {n, n, 1, 1}}, vx = vw, vy = vw;
    vx.buf = bx, vy.buf = by;
    be->ops->write(be, bw, 0, w, (size_t)(n * n) * 4, &err); /* zeros: no NaN or denormal slow paths */
    be->ops->write(be, bx, 0, x, (size_t)(n * n) * 4, &err);
    be->ops->matmul(be, &vw, &vx, &vy, &err);
    double t0 = now_s();
    for (int i = 0; i < 10; i++) be->ops->matmul(be, &vw, &vx, &vy, &err);
    rate = 10 * 2.0 * n * n * n / (now_s() - t0) / 1e9;
    be->ops->buf_free(be, bw), be->ops->buf_free(be, bx), be->ops->buf_free(be, by);
  }
  free(w), free(x), free(y);
  be->ops->destroy(be);
  return rate;
}

/* Per-phase milliseconds per step (data, forward, backward, update = step - forward - backward), from a second
 * run of the same steps with the passes called one by one. */
static int bench_phases(const bt_case *c, int steps, icl_trainer *tr, int32_t *tok, int32_t *tgt, double step_s) {
  icl_error err;
  double td = 0, tf = 0, tb = 0, loss;
  for (int s = 0; s < steps; s++) {
    double t0 = now_s();
    icl_data_repeated_segments(c->B, c->T, c->cfg.vocab, 2, c->T / 2 > 2 ? (int)(c->T / 2) : 2, 0, 1, s, tok, tgt);
    double t1 = now_s();
    icl_train_batch b = {.B = c->B, .T = c->T, .tokens = tok, .targets = tgt};
    if (icl_trainer_forward(tr, &b, &loss, &err)) return fprintf(stderr, "icl bench train: %s\n", err.msg), 1;
    double t2 = now_s();
    if (icl_trainer_backward(tr, &err)) return fprintf(stderr, "icl bench train: %s\n", err.msg), 1;
    double t3 = now_s();
    td += t1 - t0, tf += t2 - t1, tb += t3 - t2;
  }
  double ms = 1e3 / steps, upd = step_s * 1e3 - (td + tf + tb) * ms;
  printf("  phases (ms/step): data %.3f  forward %.3f  backward %.3f  update %.3f (step minus the others)\n", td * ms,
         tf * ms, tb * ms, upd > 0 ? upd : 0.0);
  return 0;
}

static int bench_case(const bt_case *c, int steps, int threads, int phases) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(&c->cfg, threads, &tr, &err)) return fprintf(stderr, "icl bench train: %s\n", err.msg), 1;
  int32_t *tok = malloc((size_t)(c->B * c->T) * 4), *tgt = malloc((size_t)(c->B * c->T) * 4);
  icl_optim_config o = {.kind = ICL_OPTIM_ADAMW, .lr = 1e-3f, .warmup = 10, .clip = 1.0f};
  double loss = 0.0, t0 = 0.0;
  int rc = tok && tgt ? 0 : 1;
  for (int s = 0; !rc && s < steps + 2; s++) {
    if (s == 2) t0 = now_s(); /* two warm-up steps: buffers allocated, caches warm */
    icl_data_repeated_segments(c->B, c->T, c->cfg.vocab, 2, c->T / 2 > 2 ? (int)(c->T / 2) : 2, 0, 1, s, tok, tgt);
    icl_train_batch b = {.B = c->B, .T = c->T, .tokens = tok, .targets = tgt};
    if ((rc = icl_trainer_step(tr, &b, &o, &loss, &err))) fprintf(stderr, "icl bench train: %s\n", err.msg);
  }
  double dt = now_s() - t0, sps = steps / dt;
  if (!rc)
    printf("%-22s %6d steps %8.2f steps/s %10.0f tokens/s %7.2f GFLOP/s  final loss %.4f\n", c->name, steps, sps,
           sps * (double)(c->B * c->T), sps * step_flops(&c->cfg, c->B, c->T) / 1e9, loss);
  if (!rc && phases) rc = bench_phases(c, steps, tr, tok, tgt, dt / steps);
  free(tok), free(tgt);
  icl_trainer_free(tr);
  return rc;
}

int icl_bench_train(int argc, char **argv) {
  int steps = 20, threads = 0, phases = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) steps = 3;
    else if (!strcmp(argv[i], "--case") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--phases")) phases = 1;
    else {
      fprintf(stderr, "usage: icl bench train [--steps N (20)] [--threads N] [--quick] [--case NAME] [--phases]\n"
                      "  AdamW steps of the CPU trainer on the issue-12 shapes; steps/s, tokens/s, GFLOP/s;\n"
                      "  --phases: milliseconds per step in data, forward, backward and update\n");
      return strcmp(argv[i], "--help") && strcmp(argv[i], "-h") ? 2 : 0;
    }
  }
  if (steps < 1) return fprintf(stderr, "icl bench train: --steps must be >= 1\n"), 2;
  int found = !only;
  for (size_t i = 0; only && i < sizeof CASES / sizeof CASES[0]; i++) found |= !strcmp(only, CASES[i].name);
  if (!found) return fprintf(stderr, "icl bench train: --case %s: no such case (attn2-d256-ctx256-b32, meta-d128-h1-T9-b128)\n", only), 2;
  printf("f32 gemm 512^3 on the CPU backend: %.1f GFLOP/s (the trainer's matmul kernel)\n", gemm_rate(threads));
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if ((!only || !strcmp(only, CASES[i].name)) && bench_case(&CASES[i], steps, threads, phases)) return 1;
  return 0;
}
