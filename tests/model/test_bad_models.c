/* Bad models fail to load with a clear message naming the key or tensor, never a crash. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "icl/model.h"
#include "testmodel.h"
#include "testutil.h"

static char PATH[256], BAD[256];

/* Copies the tiny model into BAD, with fn editing the writer built from it. */
typedef int (*edit_fn)(const icl_gguf *src, icl_gguf_writer *w, const char *key_or_tensor, icl_error *err);

/* Rebuilds src into a writer, skipping the key/tensor `drop` and renaming general.architecture to `arch`,
 * and giving tensor `reshape` a wrong shape. */
static int rebuild(const char *drop, const char *arch, const char *reshape, icl_error *err) {
  icl_gguf *g = NULL;
  int rc = icl_gguf_open(PATH, &g, err);
  if (rc) return rc;
  icl_gguf_writer *w = icl_gguf_writer_new();
  for (int64_t i = 0; i < icl_gguf_n_kv(g) && !rc; i++) {
    const char *k = icl_gguf_key(g, i);
    if (drop && !strcmp(k, drop)) continue;
    icl_gguf_vtype t = icl_gguf_kv_type(g, i);
    if (t == ICL_GGUF_STRING) {
      const char *v = icl_gguf_kv_str(g, i, NULL);
      if (arch && !strcmp(k, "general.architecture")) v = arch;
      rc = icl_gguf_w_str(w, k, v, err);
    } else if (t == ICL_GGUF_ARRAY) {
      uint64_t n = icl_gguf_arr_len(g, i);
      if (icl_gguf_arr_type(g, i) == ICL_GGUF_STRING) {
        const char **s = malloc((n ? n : 1) * sizeof *s);
        for (uint64_t j = 0; j < n; j++) s[j] = icl_gguf_arr_str(g, i, j, NULL);
        rc = icl_gguf_w_arr_str(w, k, n, s, err);
        free(s);
      } else {
        rc = icl_gguf_w_arr(w, k, (icl_gguf_vtype)icl_gguf_arr_type(g, i), n, icl_gguf_arr_data(g, i), err);
      }
    } else if (t == ICL_GGUF_F32) {
      double v;
      icl_gguf_kv_float(g, i, &v);
      rc = icl_gguf_w_f32(w, k, (float)v, err);
    } else {
      int64_t v;
      icl_gguf_kv_int(g, i, &v);
      rc = t == ICL_GGUF_BOOL ? icl_gguf_w_bool(w, k, (int)v, err) : icl_gguf_w_u32(w, k, (uint32_t)v, err);
    }
  }
  for (int64_t i = 0; i < icl_gguf_n_tensors(g) && !rc; i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    if (drop && !strcmp(t->name, drop)) continue;
    int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
    if (reshape && !strcmp(t->name, reshape)) ne[0] /= 2, ne[1] *= 2; /* same bytes, wrong shape */
    rc = icl_gguf_w_tensor(w, t->name, t->type, t->n_dims, ne, t->data, t->nbytes, err);
  }
  if (!rc) rc = icl_gguf_writer_save(w, BAD, err);
  icl_gguf_writer_free(w);
  icl_gguf_close(g);
  return rc;
}

/* Loads BAD and checks that it fails with a message containing `want`. */
static void expect_failure(const char *what, const char *want) {
  icl_load_opts o = {.backend = "cpu"};
  icl_model *m = NULL;
  icl_error e = {0};
  int rc = icl_model_load(BAD, &o, &m, &e);
  CHECKF(rc != 0 && m == NULL, "%s: loaded", what);
  CHECKF(strstr(e.msg, want) != NULL, "%s: message '%s' does not name '%s'", what, e.msg, want);
  printf("  %-28s -> %s\n", what, e.msg);
  icl_model_free(m);
}

int main(void) {
  snprintf(PATH, sizeof PATH, "/tmp/icl-bad-src-%d.gguf", (int)getpid());
  snprintf(BAD, sizeof BAD, "/tmp/icl-bad-%d.gguf", (int)getpid());
  icl_tiny_spec sp = {.arch = "llama", .wtype = ICL_TYPE_Q8_0, .seed = 3};
  icl_error e = {0};
  CHECK(icl_write_tiny_model(PATH, &sp, &e) == 0);

  CHECK(rebuild(NULL, "mamba", NULL, &e) == 0);
  expect_failure("unknown architecture", "mamba");
  CHECK(rebuild("blk.1.ffn_up.weight", NULL, NULL, &e) == 0);
  expect_failure("missing tensor", "blk.1.ffn_up.weight");
  CHECK(rebuild(NULL, NULL, "blk.0.attn_k.weight", &e) == 0);
  expect_failure("wrong shape", "blk.0.attn_k.weight");
  CHECK(rebuild("llama.block_count", NULL, NULL, &e) == 0);
  expect_failure("missing key", "llama.block_count");
  CHECK(rebuild("tokenizer.ggml.tokens", NULL, NULL, &e) == 0);
  expect_failure("missing vocabulary", "tokenizer");

  icl_model *m = NULL;
  icl_load_opts o = {.backend = "cpu"};
  CHECK(icl_model_load("/nonexistent/model.gguf", &o, &m, &e) == ICL_EIO && strstr(e.msg, "/nonexistent/model.gguf"));
  o.backend = "tpu";
  CHECK(icl_model_load(PATH, &o, &m, &e) == ICL_EINVAL && strstr(e.msg, "tpu"));
  unlink(PATH);
  unlink(BAD);
  return t_done();
}
