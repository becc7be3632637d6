/* Writes a few small valid GGUF files (the fuzz seed corpus) into the directory given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"

static int save(icl_gguf_writer *w, const char *dir, const char *name) {
  char path[4096];
  icl_error err;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = icl_gguf_writer_save(w, path, &err);
  if (rc) fprintf(stderr, "make_seeds: %s\n", err.msg);
  icl_gguf_writer_free(w);
  return rc;
}

/* Metadata of every kind, no tensors. */
static icl_gguf_writer *seed_meta(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  const char *toks[] = {"<unk>", "a", "\xe2\x96\x81the", ""};
  int32_t ids[] = {1, -2, 3};
  double f64 = 0.5;
  uint64_t u64 = 1ull << 40;
  int8_t i8 = -3;
  icl_gguf_w_str(w, "general.architecture", "llama", NULL);
  icl_gguf_w_u32(w, "llama.block_count", 2, NULL);
  icl_gguf_w_f32(w, "llama.rope.freq_base", 10000.0f, NULL);
  icl_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1, NULL);
  icl_gguf_w_scalar(w, "x.f64", ICL_GGUF_F64, &f64, NULL);
  icl_gguf_w_scalar(w, "x.u64", ICL_GGUF_U64, &u64, NULL);
  icl_gguf_w_scalar(w, "x.i8", ICL_GGUF_I8, &i8, NULL);
  icl_gguf_w_arr(w, "x.ids", ICL_GGUF_I32, 3, ids, NULL);
  icl_gguf_w_arr_str(w, "tokenizer.ggml.tokens", 4, toks, NULL);
  return w;
}

/* A tiny model: tensors of several types, alignment 64. */
static icl_gguf_writer *seed_tensors(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  static uint8_t buf[4096];
  int64_t f[2] = {4, 2}, q4[2] = {32, 2}, q8[1] = {64}, k[1] = {256}, bf[3] = {2, 2, 2};
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 7);
  icl_gguf_w_u32(w, "general.alignment", 64, NULL);
  icl_gguf_w_str(w, "general.name", "seed", NULL);
  icl_gguf_w_tensor(w, "token_embd.weight", ICL_TYPE_F32, 2, f, buf, 32, NULL);
  icl_gguf_w_tensor(w, "blk.0.attn_q.weight", ICL_TYPE_Q4_0, 2, q4, buf, 36, NULL);
  icl_gguf_w_tensor(w, "blk.0.ffn_up.weight", ICL_TYPE_Q8_0, 1, q8, buf, 68, NULL);
  icl_gguf_w_tensor(w, "blk.0.ffn_down.weight", ICL_TYPE_Q4_K, 1, k, buf, 144, NULL);
  icl_gguf_w_tensor(w, "output_norm.weight", ICL_TYPE_BF16, 3, bf, buf, 16, NULL);
  return w;
}

/* The smallest valid file: a header and nothing else. */
static icl_gguf_writer *seed_empty(void) { return icl_gguf_writer_new(); }

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  int rc = save(seed_meta(), argv[1], "meta.gguf");
  rc |= save(seed_tensors(), argv[1], "tensors.gguf");
  rc |= save(seed_empty(), argv[1], "empty.gguf");
  return rc ? 1 : 0;
}
