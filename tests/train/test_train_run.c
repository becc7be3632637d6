/* Training runs on the CPU backend: bit-identical loss curves and weights for the same seed
 * (and across thread counts, which the ops are built for), exact resume from a checkpoint and
 * its optimizer sidecar, the schedule, clipping and weight-decay exclusions, the repeated-segment
 * data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "icl/train.h"
#include "testutil.h"

enum { B = 4, T = 12, V = 10, SEG = 4 };

static const icl_attn_config CFG = {.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = 12, .vocab = V,
                                    .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1,
                                    .smeared_key = 1, .d_ff = 8, .seed = 42};
static const icl_optim_config ADAM = {.kind = ICL_OPTIM_ADAMW, .lr = 3e-3f, .warmup = 5, .decay_steps = 40,
                                      .min_lr = 0.1f, .weight_decay = 0.1f, .clip = 1.0f};

static icl_trainer *mk(const icl_attn_config *c, int threads) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(c, threads, &tr, &err)) {
    fprintf(stderr, "trainer: %s\n", err.msg);
    exit(1);
  }
  return tr;
}

/* Steps [from, to) on repeated segments; losses[i] for step i. */
static void run(icl_trainer *tr, const icl_optim_config *o, int from, int to, double *losses) {
  int32_t tok[B * T], tgt[B * T];
  icl_error err;
  for (int s = from; s < to; s++) {
    icl_data_repeated_segments(B, T, V, SEG, SEG, 0, 7, s, tok, tgt);
    icl_train_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt};
    CHECKF(icl_trainer_step(tr, &b, o, &losses[s], &err) == ICL_OK, "step %d: %s", s, err.msg);
  }
}

/* Whether two trainers hold bit-identical weights. */
static int same_weights(icl_trainer *a, icl_trainer *b) {
  if (icl_trainer_n_params(a) != icl_trainer_n_params(b)) return 0;
  for (int i = 0; i < icl_trainer_n_params(a); i++) {
    float *wa, *wb;
    int64_t na, nb;
    icl_trainer_param(a, i, &wa, NULL, &na);
    icl_trainer_param(b, i, &wb, NULL, &nb);
    if (na != nb || memcmp(wa, wb, (size_t)na * sizeof(float))) return 0;
  }
  return 1;
}

static void test_determinism(void) {
  double l1[40], l2[40], l3[40];
  icl_trainer *a = mk(&CFG, 2), *b = mk(&CFG, 2), *c = mk(&CFG, 1);
  run(a, &ADAM, 0, 40, l1);
  run(b, &ADAM, 0, 40, l2);
  run(c, &ADAM, 0, 40, l3);
  CHECK(!memcmp(l1, l2, sizeof l1));
  CHECK(same_weights(a, b));
  CHECK(!memcmp(l1, l3, sizeof l1)); /* and across thread counts */
  CHECK(same_weights(a, c));
  printf("determinism: 40 AdamW steps, loss %.4f -> %.4f, identical twice and with 1 thread\n", l1[0], l1[39]);
  icl_trainer_free(a), icl_trainer_free(b), icl_trainer_free(c);
}

static void test_resume(const icl_optim_config *o, const char *label) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl_train_resume_%ld_%s.gguf", (long)getpid(), label);
  double la[30], lb[30];
  icl_trainer *a = mk(&CFG, 2), *b = mk(&CFG, 2), *c;
  icl_error err;
  run(a, o, 0, 30, la);
  run(b, o, 0, 13, lb);
  CHECK(icl_trainer_save(b, path, &err) == ICL_OK);
  icl_trainer_free(b);
  CHECKF(icl_trainer_load(path, 2, &c, &err) == ICL_OK, "%s", err.msg);
  CHECK(icl_trainer_steps(c) == 13);
  run(c, o, 13, 30, lb);
  CHECK(!memcmp(la, lb, sizeof la));
  CHECK(same_weights(a, c));
  printf("resume (%s): 13 steps, save, load, 17 more == 30 straight (final loss %.5f)\n", label, lb[29]);
  char side[300];
  snprintf(side, sizeof side, "%s.optim", path);
  unlink(path), unlink(side);
  icl_trainer_free(a), icl_trainer_free(c);
}

/* A classifier with continuous inputs saves and loads to the same configuration and weights. */
static void test_roundtrip_config(void) {
  icl_attn_config rope = {.n_layer = 2, .n_head = 2, .d_model = 8, .n_ctx = 6, .vocab = 5, .position = ICL_POS_ROPE,
                          .rope_base = 123.0f, .w_o = 1, .d_ff = 4, .seed = 8};
  icl_trainer *r1 = mk(&rope, 1), *r2;
  icl_error e0;
  CHECK(icl_trainer_save(r1, "/tmp/icl_train_rope.gguf", &e0) == ICL_OK);
  CHECKF(icl_trainer_load("/tmp/icl_train_rope.gguf", 1, &r2, &e0) == ICL_OK, "%s", e0.msg);
  CHECK(!memcmp(icl_trainer_config(r1), icl_trainer_config(r2), sizeof rope) && same_weights(r1, r2));
  unlink("/tmp/icl_train_rope.gguf"), unlink("/tmp/icl_train_rope.gguf.optim");
  icl_trainer_free(r1), icl_trainer_free(r2);
  icl_attn_config cc = {.n_layer = 1, .n_head = 1, .d_model = 8, .n_ctx = 9, .input_len = 5, .inp_proj = 1,
                        .norm = ICL_NORM_RMS, .no_scale = 1, .w_o = 1, .qkv_bias = 1, .output = ICL_OUT_CLASSIFIER,
                        .n_classes = 4, .cls_hidden = 2, .seed = 3};
  icl_trainer *a = mk(&cc, 1), *b;
  icl_error err;
  const char *path = "/tmp/icl_train_cfg.gguf";
  CHECK(icl_trainer_save(a, path, &err) == ICL_OK);
  CHECKF(icl_trainer_load(path, 1, &b, &err) == ICL_OK, "%s", err.msg);
  const icl_attn_config *x = icl_trainer_config(a), *y = icl_trainer_config(b);
  CHECK(!memcmp(x, y, sizeof *x));
  CHECK(same_weights(a, b));
  icl_gguf *g;
  CHECK(icl_gguf_open(path, &g, &err) == ICL_OK);
  const char *js = icl_gguf_get_str(g, "icl-train.config");
  CHECKF(js && strstr(js, "\"norm\":\"rms\"") && strstr(js, "\"cls_hidden\":2") && strstr(js, "\"scale\":0"),
         "icl-train.config: %s", js ? js : "(absent)");
  icl_gguf_close(g);
  unlink(path);
  unlink("/tmp/icl_train_cfg.gguf.optim");
  icl_trainer_free(a), icl_trainer_free(b);
}

static void test_schedule(void) {
  icl_optim_config o = {.lr = 1.0f, .warmup = 10, .decay_steps = 110, .min_lr = 0.1f};
  CHECK(fabsf(icl_optim_lr(&o, 0) - 0.1f) < 1e-7f);
  CHECK(fabsf(icl_optim_lr(&o, 9) - 1.0f) < 1e-7f);
  CHECK(fabsf(icl_optim_lr(&o, 10) - 1.0f) < 1e-7f);
  CHECK(fabsf(icl_optim_lr(&o, 60) - 0.55f) < 1e-6f); /* half way down the cosine */
  CHECK(fabsf(icl_optim_lr(&o, 110) - 0.1f) < 1e-6f);
  CHECK(fabsf(icl_optim_lr(&o, 500) - 0.1f) < 1e-6f);
}

/* Plain SGD with a tiny clip and weight decay: each update is -lr (g * clip/|g| + wd w) for
 * matrices and -lr g * clip/|g| for norms, embeddings and biases (no decay). */
static void test_clip_and_decay(void) {
  icl_trainer *tr = mk(&CFG, 2);
  icl_optim_config o = {.kind = ICL_OPTIM_SGD, .lr = 0.5f, .clip = 1e-3f, .weight_decay = 0.2f};
  int32_t tok[B * T], tgt[B * T];
  icl_data_repeated_segments(B, T, V, SEG, SEG, 0, 1, 0, tok, tgt);
  icl_train_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt};
  icl_error err;
  double loss;
  int np = icl_trainer_n_params(tr);
  float **w0 = calloc((size_t)np, sizeof *w0), **g0 = calloc((size_t)np, sizeof *g0);
  CHECK(icl_trainer_forward(tr, &b, &loss, &err) == ICL_OK && icl_trainer_backward(tr, &err) == ICL_OK);
  double gn = 0.0;
  for (int i = 0; i < np; i++) {
    float *w, *g;
    int64_t n;
    icl_trainer_param(tr, i, &w, &g, &n);
    w0[i] = malloc((size_t)n * 4), g0[i] = malloc((size_t)n * 4);
    memcpy(w0[i], w, (size_t)n * 4), memcpy(g0[i], g, (size_t)n * 4);
    for (int64_t j = 0; j < n; j++) gn += (double)g[j] * g[j];
  }
  CHECK(icl_trainer_step(tr, &b, &o, &loss, &err) == ICL_OK);
  CHECK(fabs(icl_trainer_grad_norm(tr) - sqrt(gn)) < 1e-6 * sqrt(gn));
  double s = 1e-3 / sqrt(gn), worst = 0.0;
  for (int i = 0; i < np; i++) {
    float *w;
    int64_t n;
    const char *name = icl_trainer_param(tr, i, &w, NULL, &n);
    int decay = strstr(name, ".weight") && !strstr(name, "norm") && !strstr(name, "embd");
    for (int64_t j = 0; j < n; j++) {
      double want = w0[i][j] - 0.5 * (g0[i][j] * s + (decay ? 0.2 * w0[i][j] : 0.0));
      worst = fabs(w[j] - want) > worst ? fabs(w[j] - want) : worst;
    }
    free(w0[i]), free(g0[i]);
  }
  printf("sgd clip+decay: max |w - expected| %.2e\n", worst);
  CHECK(worst < 1e-6);
  free(w0), free(g0);
  icl_trainer_free(tr);
}

static void test_data(void) {
  int32_t tok[3 * 10], tgt[3 * 10], tok2[3 * 10], tgt2[3 * 10];
  icl_data_repeated_segments(3, 10, 50, 4, 4, 1, 9, 5, tok, tgt);
  icl_data_repeated_segments(3, 10, 50, 4, 4, 1, 9, 5, tok2, tgt2);
  CHECK(!memcmp(tok, tok2, sizeof tok));
  int ok = 1;
  for (int b = 0; b < 3; b++)
    for (int t = 0; t < 10; t++) {
      const int32_t *x = tok + b * 10, *y = tgt + b * 10;
      ok &= x[t] >= 0 && x[t] < 50 && (t < 4 || x[t] == x[t - 4]);
      ok &= y[t] == (t < 3 || t == 9 ? -1 : x[t + 1]);
    }
  CHECK(ok);
  icl_data_repeated_segments(3, 10, 50, 4, 4, 1, 9, 6, tok2, tgt2);
  CHECK(memcmp(tok, tok2, sizeof tok)); /* another step, other segments */
  int32_t tk[64 * 20], tg[64 * 20];
  icl_data_repeated_segments(64, 20, 1000, 3, 6, 1, 2, 0, tk, tg);
  int seen[7] = {0}, good = 1;
  for (int b = 0; b < 64; b++) { /* the period is the first t whose target is scored, plus one */
    int p = 0;
    while (p < 20 && tg[b * 20 + p] < 0) p++;
    p++;
    good &= p >= 3 && p <= 6;
    if (p >= 3 && p <= 6) seen[p] = 1;
    for (int t = p; t < 20; t++) good &= tk[b * 20 + t] == tk[b * 20 + t - p];
  }
  CHECK(good && seen[3] && seen[4] && seen[5] && seen[6]);
}

int main(void) {
  test_schedule();
  test_data();
  test_determinism();
  test_resume(&ADAM, "adamw");
  icl_optim_config sgd = {.kind = ICL_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .warmup = 3, .weight_decay = 0.01f};
  test_resume(&sgd, "sgd");
  test_roundtrip_config();
  test_clip_and_decay();
  return t_done();
}
