/* Real GGUF files: the vocabulary-only conformance files in tests/fixtures/tokenizer (carried in the repository:
 * a missing file is a failure, not a skip). */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "testutil.h"

static icl_error err;

static icl_gguf *open_vocab(const char *file) {
  char rel[256];
  snprintf(rel, sizeof rel, "tests/fixtures/tokenizer/%s", file);
  const char *path = t_src_path(rel);
  CHECKF(access(path, R_OK) == 0, "%s: conformance file missing from the repository", path);
  if (access(path, R_OK) != 0) return NULL;
  icl_gguf *g = NULL;
  CHECKF(icl_gguf_open(path, &g, &err) == 0, "%s", err.msg);
  return g;
}

static void test_llama_spm(void) {
  icl_gguf *g = open_vocab("ggml-vocab-llama-spm.gguf");
  if (!g) return;
  int64_t v = 0;
  double d = 0;
  CHECK(icl_gguf_version(g) == 3 && icl_gguf_n_kv(g) == 22 && icl_gguf_n_tensors(g) == 0);
  CHECK(icl_gguf_alignment(g) == 32 && icl_gguf_size(g) == 723869);
  CHECK(!strcmp(icl_gguf_get_str(g, "general.architecture"), "llama"));
  CHECK(!strcmp(icl_gguf_get_str(g, "tokenizer.ggml.model"), "llama"));
  CHECK(icl_gguf_get_int(g, "llama.block_count", &v, &err) == 0 && v == 32);
  CHECK(icl_gguf_get_int(g, "llama.feed_forward_length", &v, &err) == 0 && v == 11008);
  CHECK(icl_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &d, &err) == 0 && d == (double)1e-5f);
  CHECK(icl_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &v, &err) == 0 && v == 1);
  int64_t tok = icl_gguf_find_key(g, "tokenizer.ggml.tokens");
  CHECK(tok == 14 && icl_gguf_arr_type(g, tok) == ICL_GGUF_STRING && icl_gguf_arr_len(g, tok) == 32000);
  size_t len = 0;
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 0, &len), "<unk>") && len == 5);
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 2, NULL), "</s>"));
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 3, NULL), "<0x00>"));
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 31999, &len), "\xe7\xbb\x99") && len == 3); /* 给 */
  int64_t sc = icl_gguf_find_key(g, "tokenizer.ggml.scores"), tt = icl_gguf_find_key(g, "tokenizer.ggml.token_type");
  CHECK(icl_gguf_arr_type(g, sc) == ICL_GGUF_F32 && icl_gguf_arr_float(g, sc, 31999, &d) == 0 && d == -31740.0);
  CHECK(icl_gguf_arr_type(g, tt) == ICL_GGUF_I32 && icl_gguf_arr_int(g, tt, 0, &v) == 0 && v == 2);
  CHECK(icl_gguf_arr_int(g, tt, 3, &v) == 0 && v == 6);
  icl_gguf_close(g);
}

static void test_gpt2(void) {
  icl_gguf *g = open_vocab("ggml-vocab-gpt-2.gguf");
  if (!g) return;
  int64_t v = 0;
  CHECK(!strcmp(icl_gguf_get_str(g, "tokenizer.ggml.pre"), "gpt-2"));
  int64_t tok = icl_gguf_find_key(g, "tokenizer.ggml.tokens"), mg = icl_gguf_find_key(g, "tokenizer.ggml.merges");
  CHECK(icl_gguf_arr_len(g, tok) == 50257 && icl_gguf_arr_len(g, mg) == 50000);
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 0, NULL), "!"));
  CHECK(!strcmp(icl_gguf_arr_str(g, tok, 50256, NULL), "<|endoftext|>"));
  CHECK(!strcmp(icl_gguf_arr_str(g, mg, 0, NULL), "\xc4\xa0 t")); /* "Ġ t" */
  CHECK(icl_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v, &err) == 0 && v == 50256);
  icl_gguf_close(g);
}

static void test_phi3(void) {
  icl_gguf *g = open_vocab("ggml-vocab-phi-3.gguf");
  if (!g) return;
  double d = 0;
  size_t len = 0;
  const char *tpl = icl_gguf_kv_str(g, icl_gguf_find_key(g, "tokenizer.chat_template"), &len);
  CHECK(tpl && len == strlen(tpl) && strncmp(tpl, "{{ bos_token }}", 15) == 0);
  CHECK(icl_gguf_get_float(g, "phi3.rope.freq_base", &d, &err) == 0 && d == 10000.0);
  int64_t tok = icl_gguf_find_key(g, "tokenizer.ggml.tokens");
  CHECK(icl_gguf_arr_len(g, tok) == 32064 && !strcmp(icl_gguf_arr_str(g, tok, 32063, NULL), "[PAD32063]"));
  icl_gguf_close(g);
}

int main(void) {
  test_llama_spm();
  test_gpt2();
  test_phi3();
  return t_done();
}
