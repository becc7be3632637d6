/* Hostile model files (issue 16): a file truncated under the mapping (SIGBUS) or rewritten while read, FIFOs,
 * misleading hyperparameter messages, out-of-range special ids, unknown token types, fewer blocks than layers
 * present, non-finite float keys, NaN weights reaching the logits. Each must be an error naming file and key. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_edit.h"
#include "icl/gguf.h"
#include "icl/model.h"
#include "icl/tensor.h"
#include "testmodel.h"
#include "testutil.h"

static char SRC[256], BAD[256];

/* Loads path on the CPU backend and checks that it fails with a message containing want (and, if given, want2). */
static void expect_load_error(const char *what, const char *path, const char *want, const char *want2) {
  icl_load_opts o = {.backend = "cpu", .n_threads = 1};
  icl_model *m = NULL;
  icl_error e = {0};
  int rc = icl_model_load(path, &o, &m, &e);
  CHECKF(rc != 0 && !m, "%s: loaded", what);
  CHECKF(strstr(e.msg, want) && (!want2 || strstr(e.msg, want2)), "%s: message '%s' lacks '%s'", what, e.msg, want);
  printf("  %-34s -> %s\n", what, e.msg);
  icl_model_free(m);
}

static void expect_edit_error(const char *what, t_edit ed, const char *want, const char *want2) {
  icl_error e = {0};
  int rc = t_gguf_edit(SRC, BAD, &ed, 1, &e);
  CHECKF(rc == 0, "%s: cannot write the edited model: %s", what, e.msg);
  if (!rc) expect_load_error(what, BAD, want, want2);
}

/* ---- 3: SIGBUS / rewritten file ---- */

typedef struct read_all {
  const icl_gguf *g;
  volatile unsigned sum;
} read_all;

static int touch_every_tensor(void *ud, icl_error *err) {
  read_all *a = ud;
  (void)err;
  for (int64_t i = 0; i < icl_gguf_n_tensors(a->g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(a->g, i);
    for (size_t b = 0; b < t->nbytes; b += 512) a->sum += ((const unsigned char *)t->data)[b];
  }
  return ICL_OK;
}

static void test_truncated_under_the_mapping(void) {
  icl_gguf *g = NULL;
  icl_error e = {0};
  CHECK(icl_gguf_open(SRC, &g, &e) == ICL_OK);
  if (!g) return;
  CHECK(truncate(SRC, 4096) == 0); /* the data section now lies beyond the end: reading it raises SIGBUS */
  read_all a = {g, 0};
  int rc = icl_gguf_guarded(g, touch_every_tensor, &a, &e);
  CHECKF(rc == ICL_EIO && strstr(e.msg, "changed while being read") && strstr(e.msg, SRC), "truncated: rc %d '%s'", rc,
         e.msg);
  printf("  %-34s -> %s\n", "truncated while read (SIGBUS)", e.msg);
  icl_gguf_close(g);
}

static void test_rewritten_while_read(void) {
  icl_gguf *g = NULL;
  icl_error e = {0};
  CHECK(icl_gguf_open(SRC, &g, &e) == ICL_OK);
  if (!g) return;
  read_all a = {g, 0};
  CHECK(icl_gguf_guarded(g, touch_every_tensor, &a, &e) == ICL_OK); /* unchanged: reads fine */
  struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  usleep(20000);
  CHECK(utimensat(AT_FDCWD, SRC, ts, 0) == 0); /* a new modification time, as a writer would leave */
  int rc = icl_gguf_guarded(g, touch_every_tensor, &a, &e);
  CHECKF(rc == ICL_EIO && strstr(e.msg, "changed while being read"), "rewritten: rc %d '%s'", rc, e.msg);
  icl_gguf_close(g);
}

/* ---- 4: a FIFO is refused before it is opened for blocking reads ---- */

static void test_fifo(void) {
  char fifo[300];
  snprintf(fifo, sizeof fifo, "%s.fifo", SRC);
  unlink(fifo);
  CHECK(mkfifo(fifo, 0600) == 0);
  icl_gguf *g = NULL;
  icl_error e = {0};
  CHECK(icl_gguf_open(fifo, &g, &e) == ICL_EIO && strstr(e.msg, "not a regular file (a FIFO)"));
  icl_tensor *t = NULL;
  CHECK(icl_tensor_load_npy(fifo, &t, &e) == ICL_EIO && strstr(e.msg, "not a regular file"));
  expect_load_error("model path is a FIFO", fifo, "not a regular file", NULL);
  unlink(fifo);
}

/* ---- 5: NaN weights: the run fails naming the position ---- */

static void test_nan_logits(void) {
  icl_error e = {0};
  t_edit ed = {.key = "blk.0.attn_norm.weight", .index = -1, .nan = 1};
  CHECK(t_gguf_edit(SRC, BAD, &ed, 1, &e) == ICL_OK);
  icl_load_opts o = {.backend = "cpu", .n_threads = 1};
  icl_model *m = NULL;
  if (icl_model_load(BAD, &o, &m, &e)) {
    CHECKF(0, "NaN model did not load: %s", e.msg);
    return;
  }
  int32_t toks[4] = {1, 2, 3, 4};
  icl_run_opts ro = {.logits = ICL_LOGITS_ALL};
  icl_run_result res;
  int rc = icl_model_run(m, toks, 4, &ro, &res, &e);
  CHECKF(rc == ICL_EFORMAT && strstr(e.msg, "run: the logits at position 1 (1-based"), "NaN run: rc %d '%s'", rc, e.msg);
  icl_session *s = NULL;
  float *lg = malloc((size_t)icl_model_hparams(m)->n_vocab * sizeof *lg);
  CHECK(icl_session_new(m, &s, &e) == ICL_OK);
  rc = s ? icl_session_eval(s, toks, 4, lg, 0, &e) : -1;
  CHECKF(rc == ICL_EFORMAT && strstr(e.msg, "eval: the logits at position 4") && strstr(e.msg, "NaN"),
         "NaN eval: rc %d '%s'", rc, e.msg);
  printf("  %-34s -> %s\n", "NaN weight", e.msg);
  free(lg);
  icl_session_free(s);
  icl_model_free(m);
}

int main(void) {
  snprintf(SRC, sizeof SRC, "/tmp/icl-hostile-src-%d.gguf", (int)getpid());
  snprintf(BAD, sizeof BAD, "/tmp/icl-hostile-%d.gguf", (int)getpid());
  icl_tiny_spec sp = {.arch = "llama", .wtype = ICL_TYPE_Q8_0, .seed = 5, .d = 576, .n_head = 9, .n_head_kv = 3,
                      .head_dim = 64};
  icl_error e = {0};
  if (icl_write_tiny_model(SRC, &sp, &e)) {
    fprintf(stderr, "cannot write the tiny model: %s\n", e.msg);
    return 1;
  }
  /* 12: head_count 9 -> 10 with d 576 (no key_length): the message blames head_count, not rope.dimension_count */
  t_edit kl = {.key = "llama.attention.key_length", .type = -1, .index = -1};
  icl_error e2 = {0};
  CHECK(t_gguf_edit(SRC, BAD, &kl, 1, &e2) == ICL_OK);
  char src2[300];
  snprintf(src2, sizeof src2, "%s.nokl.gguf", SRC);
  rename(BAD, src2);
  t_edit hc = {.key = "llama.attention.head_count", .type = ICL_GGUF_U32, .index = -1, .ival = 10};
  CHECK(t_gguf_edit(src2, BAD, &hc, 1, &e2) == ICL_OK);
  expect_load_error("head_count 9 -> 10", BAD, "attention.head_count = 10 does not divide embedding_length 576",
                    NULL);
  unlink(src2);
  /* 12: rope.freq_base = inf fails at load, naming file and key */
  expect_edit_error("rope.freq_base = inf", (t_edit){.key = "llama.rope.freq_base", .type = ICL_GGUF_F32, .index = -1,
                    .fval = INFINITY}, "llama.rope.freq_base", "expected a finite number");
  expect_edit_error("layer_norm_rms_epsilon = nan", (t_edit){.key = "llama.attention.layer_norm_rms_epsilon",
                    .type = ICL_GGUF_F32, .index = -1, .fval = NAN}, "layer_norm_rms_epsilon", "finite");
  /* 13: out-of-range bos/eos are errors, not "none" */
  expect_edit_error("bos 99999", (t_edit){.key = "tokenizer.ggml.bos_token_id", .type = ICL_GGUF_U32, .index = -1,
                    .ival = 99999}, "tokenizer.ggml.bos_token_id' = 99999", "expected a token id in 0..");
  expect_edit_error("eos 70000", (t_edit){.key = "tokenizer.ggml.eos_token_id", .type = ICL_GGUF_U32, .index = -1,
                    .ival = 70000}, "tokenizer.ggml.eos_token_id' = 70000", NULL);
  /* 13: unknown token-type values */
  expect_edit_error("token_type[5] = 42", (t_edit){.key = "tokenizer.ggml.token_type", .type = ICL_GGUF_I32,
                    .index = 5, .ival = 42}, "tokenizer.ggml.token_type[5] = 42", "expected 0..6");
  /* 13: block_count smaller than the layers present */
  expect_edit_error("block_count 2 with blk.2.*", (t_edit){.key = "blk.2.attn_norm.weight", .index = -1,
                    .tensor_copy = "blk.0.attn_norm.weight"}, "tensor 'blk.2.attn_norm.weight' belongs to layer 2",
                    "block_count is 2");
  test_nan_logits();
  test_fifo();
  test_rewritten_while_read();
  test_truncated_under_the_mapping(); /* last: it truncates SRC */
  unlink(SRC);
  unlink(BAD);
  return t_done();
}
