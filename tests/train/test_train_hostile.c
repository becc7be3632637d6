/* issue 44, the trainer under hostile input: sizes that would overflow, impossible hyperparameters, non-finite
 * losses, corrupt or foreign checkpoints and sidecars (NaN weights or moments, a bad icl-train.step, a FIFO, SGD
 * state into AdamW), configurations the icl-attn reader must reject for icl.load and the trainer alike, and an
 * overwrite killed between its renames. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_edit.h"
#include "icl/gguf.h"
#include "icl/model.h"
#include "icl/train.h"
#include "testutil.h"

enum { B = 2, T = 8, V = 10 };

static const icl_attn_config CFG = {.n_layer = 2, .n_head = 2, .d_model = 8, .n_ctx = 8, .vocab = V,
                                    .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .seed = 4};
static const icl_optim_config ADAM = {.kind = ICL_OPTIM_ADAMW, .lr = 1e-2f, .clip = 1.0f};
static char dir[64];

static icl_trainer *mk(const icl_attn_config *c) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(c, 1, &tr, &err)) {
    fprintf(stderr, "trainer: %s\n", err.msg);
    exit(1);
  }
  return tr;
}

static int steps(icl_trainer *tr, const icl_optim_config *o, int n) {
  int32_t tok[B * T], tgt[B * T];
  icl_error err;
  for (int i = 0; i < n; i++) {
    icl_data_repeated_segments(B, T, V, 3, 3, 0, 9, icl_trainer_steps(tr), tok, tgt);
    icl_train_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt};
    if (icl_trainer_step(tr, &b, o, NULL, &err)) return fprintf(stderr, "step: %s\n", err.msg), 1;
  }
  return 0;
}

static const char *path(const char *name) {
  static char buf[8][256];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 256, "%s/%s", dir, name);
  return p;
}

static int copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  int c, ok = a && b;
  while (ok && (c = fgetc(a)) != EOF) fputc(c, b);
  if (a) fclose(a);
  if (b) fclose(b);
  return ok ? 0 : -1;
}

/* icl_trainer_load of p: 0 and the trainer (step in *step), or the error message in msg. */
static int load(const char *p, int64_t *step, char *msg) {
  icl_trainer *tr;
  icl_error err;
  msg[0] = 0;
  if (icl_trainer_load(p, 1, &tr, &err)) return snprintf(msg, 1024, "%s", err.msg), -1;
  if (step) *step = icl_trainer_steps(tr);
  icl_trainer_free(tr);
  return 0;
}

static int fails_with(int rc, const char *msg, const char *want) {
  if (rc == 0) return fprintf(stderr, "  expected an error naming '%s', got success\n", want), 0;
  if (!strstr(msg, want)) return fprintf(stderr, "  expected '%s' in: %s\n", want, msg), 0;
  return 1;
}

static void test_sizes(void) {
  icl_trainer *tr;
  icl_error err;
  icl_attn_config c = CFG;
  c.d_model = 1 << 30, c.vocab = 2147483645;
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "d_model"), "%s", err.msg);
  c = CFG, c.d_model = 1 << 16, c.vocab = 1 << 24, c.n_layer = 64; /* every size in range, the product not */
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "parameters"), "%s", err.msg);
  c = CFG, c.d_head = -4;
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "d_head = -4"), "%s", err.msg);
  c = CFG, c.n_head = 1024, c.d_head = 4096, c.w_o = 0; /* n_head * d_head fits, != d_model */
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "heads*d_head"), "%s", err.msg);
  c = CFG, c.init_std = NAN;
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "init_std"), "%s", err.msg);
  c = CFG, c.norm_eps = INFINITY;
  CHECKF(icl_trainer_new(&c, 1, &tr, &err) && strstr(err.msg, "eps"), "%s", err.msg);
  tr = mk(&CFG); /* a batch too large for int64 products is refused, not allocated */
  int32_t tgt[1] = {0};
  icl_train_batch b = {.B = (int64_t)1 << 40, .T = 8, .targets = tgt};
  CHECKF(icl_trainer_forward(tr, &b, NULL, &err) && strstr(err.msg, "batch"), "%s", err.msg);
  icl_trainer_free(tr);
}

static void test_optim(void) {
  struct { const char *field; icl_optim_config o; } bad[] = {
      {"lr", {.lr = NAN}}, {"lr", {.lr = INFINITY}}, {"lr", {.lr = 1e30f}}, {"lr", {.lr = -1e-3f}}, {"lr", {.lr = 0}},
      {"beta1", {.lr = 1e-3f, .beta1 = 1}}, {"beta2", {.lr = 1e-3f, .beta2 = NAN}},
      {"weight_decay", {.lr = 1e-3f, .weight_decay = NAN}}, {"momentum", {.kind = ICL_OPTIM_SGD, .lr = 1e-3f, .momentum = NAN}},
      {"min_lr", {.lr = 1e-3f, .min_lr = NAN}}, {"eps", {.lr = 1e-3f, .eps = NAN}}, {"clip", {.lr = 1e-3f, .clip = -1}},
      {"warmup", {.lr = 1e-3f, .warmup = -5}}, {"kind", {.kind = 7, .lr = 1e-3f}}};
  icl_trainer *tr = mk(&CFG);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    icl_error err;
    int rc = icl_optim_check(&bad[i].o, &err);
    CHECKF(rc && strstr(err.msg, bad[i].field), "%s: %s", bad[i].field, rc ? err.msg : "accepted");
  }
  icl_optim_config nan_lr = {.lr = NAN};
  CHECK(steps(tr, &nan_lr, 1) && icl_trainer_steps(tr) == 0);
  icl_trainer_free(tr);
}

/* A NaN input gives a NaN loss: the step fails naming it and leaves the weights as they were. */
static void test_nonfinite_step(void) {
  icl_attn_config c = CFG;
  c.input_len = 4, c.inp_proj = 1;
  icl_trainer *tr = mk(&c);
  int32_t tgt[B * T];
  float in[B * T * 4], mask[B * T];
  for (int i = 0; i < B * T; i++) tgt[i] = i % V, mask[i] = 1;
  for (int i = 0; i < B * T * 4; i++) in[i] = (float)(i % 7) * 0.1f;
  in[5] = NAN;
  float *w0;
  icl_trainer_param(tr, 0, &w0, NULL, NULL);
  float before = w0[0];
  icl_train_batch b = {.B = B, .T = T, .targets = tgt, .inputs = in};
  icl_error err;
  CHECKF(icl_trainer_step(tr, &b, &ADAM, NULL, &err) && strstr(err.msg, "loss is NaN"), "%s", err.msg);
  CHECK(icl_trainer_steps(tr) == 0 && w0[0] == before);
  in[5] = 0, mask[3] = -1, b.mask = mask;
  CHECKF(icl_trainer_step(tr, &b, &ADAM, NULL, &err) && strstr(err.msg, "mask"), "%s", err.msg);
  mask[3] = NAN;
  CHECKF(icl_trainer_step(tr, &b, &ADAM, NULL, &err) && strstr(err.msg, "mask"), "%s", err.msg);
  w0[1] = INFINITY; /* a net with non-finite weights is never saved */
  CHECKF(icl_trainer_save(tr, path("inf.gguf"), &err) && strstr(err.msg, "non-finite"), "%s", err.msg);
  CHECK(access(path("inf.gguf"), F_OK) != 0 && access(path("inf.gguf.optim"), F_OK) != 0);
  icl_trainer_free(tr);
}

/* Corrupt checkpoints: each edit of a good one fails at load with the file and the tensor or key named. */
static void test_corrupt(void) {
  icl_trainer *tr = mk(&CFG);
  icl_error err;
  CHECK(steps(tr, &ADAM, 2) == 0);
  const char *good = path("good.gguf"), *bad = path("bad.gguf");
  CHECKF(icl_trainer_save(tr, good, &err) == ICL_OK, "%s", err.msg);
  char msg[1024];
  int64_t st = 0;
  CHECKF(load(good, &st, msg) == 0 && st == 2, "%s", msg);
  struct { t_edit e; const char *want; int model_too; } cases[] = {
      {{.key = "blk.0.attn_q.weight", .nan = 1}, "blk.0.attn_q.weight has non-finite", 0},
      {{.key = "icl-train.step", .type = ICL_GGUF_I32, .ival = -3}, "icl-train.step' = -3", 0},
      {{.key = "icl-train.step", .type = ICL_GGUF_STRING, .sval = "4"}, "icl-train.step' is a string", 0},
      {{.key = "icl-train.step", .type = ICL_GGUF_F32, .fval = 1e30}, "icl-train.step' is a f32", 0},
      {{.key = "icl-attn.attention.scale", .type = ICL_GGUF_F32, .fval = 0.3}, "attention.scale' = 0.3", 0},
      {{.key = "icl-attn.norm", .type = ICL_GGUF_STRING, .sval = "batch"}, "icl-attn.norm' = 'batch'", 1},
      {{.key = "icl-attn.norm", .type = ICL_GGUF_STRING, .sval = "rms"}, "attn_norm.bias' cannot be used", 1},
      {{.key = "icl-attn.position", .type = ICL_GGUF_STRING, .sval = "rope"}, "position_embd.weight' cannot be used", 1},
      {{.key = "icl-attn.position", .type = ICL_GGUF_STRING, .sval = "sinus"}, "icl-attn.position' = 'sinus'", 1},
      {{.key = "icl-attn.block_count", .type = ICL_GGUF_U32, .ival = 1}, "blk.1.", 1},
      {{.key = "blk.0.extra.weight", .tensor_copy = "output_norm.weight"}, "blk.0.extra.weight' cannot be used", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    t_edit e = cases[i].e;
    if (!e.tensor_copy && !e.nan) e.index = -1;
    CHECKF(t_gguf_edit(good, bad, &e, 1, &err) == ICL_OK, "edit %zu: %s", i, err.msg);
    int rc = load(bad, NULL, msg);
    CHECKF(fails_with(rc, msg, cases[i].want) && strstr(msg, "bad.gguf"), "trainer, edit %zu", i);
    icl_model *m = NULL;
    rc = icl_model_load(bad, &(icl_load_opts){.backend = "cpu", .n_threads = 1}, &m, &err);
    if (cases[i].model_too) CHECKF(fails_with(rc, err.msg, cases[i].want), "icl_model_load, edit %zu", i);
    if (!rc) icl_model_free(m);
  }
  unlink(bad);
  unlink(good), unlink(path("good.gguf.optim")); /* else the folder stays behind (rmdir needs it empty) */
  icl_trainer_free(tr);
}

/* Sidecars: a FIFO, a folder, another run's state, NaN moments, SGD state into AdamW: all fail loudly. */
static void test_sidecar(void) {
  icl_trainer *a = mk(&CFG), *b;
  icl_attn_config other = CFG;
  other.seed = 5;
  icl_trainer *o = mk(&other);
  icl_error err;
  char msg[1024];
  const char *pa = path("a.gguf"), *pao = path("a.gguf.optim"), *po = path("o.gguf"), *poo = path("o.gguf.optim");
  CHECK(steps(a, &ADAM, 2) == 0 && steps(o, &ADAM, 2) == 0);
  CHECK(icl_trainer_save(a, pa, &err) == ICL_OK && icl_trainer_save(o, po, &err) == ICL_OK);
  CHECK(access(path("a.gguf.optim.next"), F_OK) != 0); /* a finished save leaves no .next */
  unlink(pao);
  CHECK(mkfifo(pao, 0644) == 0);
  alarm(20); /* a hang fails the test instead of blocking ctest */
  CHECKF(fails_with(load(pa, NULL, msg), msg, "not a regular file"), "FIFO sidecar");
  alarm(0);
  unlink(pao);
  CHECK(mkdir(pao, 0755) == 0);
  CHECKF(fails_with(load(pa, NULL, msg), msg, "a.gguf.optim"), "folder sidecar");
  rmdir(pao);
  CHECK(copy_file(poo, pao) == 0); /* same shapes and step, other weights */
  CHECKF(fails_with(load(pa, NULL, msg), msg, "other weights"), "foreign sidecar");
  CHECK(icl_trainer_save(a, pa, &err) == ICL_OK);
  FILE *f = fopen(pao, "r+b"); /* first moment 0 := NaN (after the 8-byte magic and the 32-byte header) */
  float nan = NAN;
  CHECK(f && fseek(f, 40, SEEK_SET) == 0 && fwrite(&nan, 4, 1, f) == 1);
  if (f) fclose(f);
  CHECKF(fails_with(load(pa, NULL, msg), msg, "moments of tensor"), "NaN moments");
  icl_optim_config sgd = {.kind = ICL_OPTIM_SGD, .lr = 1e-2f, .momentum = 0.9f};
  icl_trainer *s = mk(&CFG);
  CHECK(steps(s, &sgd, 2) == 0 && icl_trainer_save(s, pa, &err) == ICL_OK);
  CHECK(icl_trainer_load(pa, 1, &b, &err) == ICL_OK);
  int32_t tok[B * T], tgt[B * T];
  icl_data_repeated_segments(B, T, V, 3, 3, 0, 9, 2, tok, tgt);
  icl_train_batch bt = {.B = B, .T = T, .tokens = tok, .targets = tgt};
  CHECKF(icl_trainer_step(b, &bt, &ADAM, NULL, &err) && strstr(err.msg, "sgd"), "%s", err.msg);
  CHECK(icl_trainer_step(b, &bt, &sgd, NULL, &err) == ICL_OK);
  icl_trainer_free(b), icl_trainer_free(s), icl_trainer_free(a), icl_trainer_free(o);
  CHECKF(icl_trainer_save(mk(&CFG), "/nonexistent-icl/x/ck.gguf", &err) &&
             !strncmp(err.msg, "/nonexistent-icl/x/ck.gguf: ", 28), "%s", err.msg); /* leaks one trainer: fine */
  unlink(pa), unlink(pao), unlink(po), unlink(poo);
}

/* An overwrite killed between the sidecar's and the GGUF's renames, crafted from two real saves. */
static void test_killed_overwrite(void) {
  icl_trainer *tr = mk(&CFG);
  icl_error err;
  char msg[1024];
  int64_t st = -1;
  const char *p = path("ck.gguf"), *po = path("ck.gguf.optim"), *pn = path("ck.gguf.optim.next");
  const char *q = path("new.gguf"), *qo = path("new.gguf.optim");
  CHECK(steps(tr, &ADAM, 2) == 0 && icl_trainer_save(tr, p, &err) == ICL_OK);
  CHECK(steps(tr, &ADAM, 2) == 0 && icl_trainer_save(tr, q, &err) == ICL_OK);
  /* killed before the GGUF rename: old GGUF, old .optim, new .optim.next */
  CHECK(copy_file(qo, pn) == 0);
  CHECKF(load(p, &st, msg) == 0 && st == 2, "old pair: %s (step %lld)", msg, (long long)st);
  /* killed after it: new GGUF, old .optim, new .optim.next */
  CHECK(copy_file(q, p) == 0);
  CHECKF(load(p, &st, msg) == 0 && st == 4, "new pair: %s (step %lld)", msg, (long long)st);
  icl_trainer *a, *b;
  CHECK(icl_trainer_load(p, 1, &a, &err) == ICL_OK && icl_trainer_load(q, 1, &b, &err) == ICL_OK);
  CHECK(steps(a, &ADAM, 3) == 0 && steps(b, &ADAM, 3) == 0); /* same moments: same weights after 3 more steps */
  float *wa, *wb;
  int64_t n;
  icl_trainer_param(a, 2, &wa, NULL, &n), icl_trainer_param(b, 2, &wb, NULL, NULL);
  CHECK(!memcmp(wa, wb, (size_t)n * sizeof *wa));
  icl_trainer_free(a), icl_trainer_free(b);
  /* the old scheme's failure (new GGUF, old sidecar, nothing else) is reported, not half-loaded */
  unlink(pn);
  CHECKF(fails_with(load(p, NULL, msg), msg, "other weights"), "new GGUF beside the old sidecar");
  unlink(p), unlink(po), unlink(q), unlink(qo);
  icl_trainer_free(tr);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/icl_train_hostile_%ld", (long)getpid());
  if (mkdir(dir, 0755) != 0) return fprintf(stderr, "cannot make %s\n", dir), 1;
  test_sizes();
  test_optim();
  test_nonfinite_step();
  test_corrupt();
  test_sidecar();
  test_killed_overwrite();
  rmdir(dir);
  return t_done();
}
