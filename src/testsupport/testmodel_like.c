/* Random-weight models shaped exactly like the two real target models: the same tensor table (names, shapes,
 * per-tensor quantization types), hyperparameters and vocabulary size, so a benchmark or a device check on
 * them does the same work as on the real files, which cannot travel to a lent GPU. The table below was read
 * off the real files with `icl info --tensors`; tests/model/test_testmodel_like.c compares it with them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testmodel.h"

typedef struct like_kv {
  const char *key; /* without the "<arch>." prefix */
  int is_float;
  double v;
} like_kv;

/* One tensor; per-layer ones are named "blk.<L>.<name>". Layers in alt_layers use alt_type. */
typedef struct like_tensor {
  const char *name;
  uint32_t type, alt_type;
  int64_t ne0, ne1;
  float center; /* 1 for norm weights, 0 for matrices */
} like_tensor;

typedef struct like_model {
  const char *like, *file, *arch, *tok_model, *tok_pre;
  int n_layer;
  uint32_t alt_layers; /* bit L set: layer L takes alt_type (llama.cpp's "more bits" layers) */
  int64_t n_vocab;
  int spm; /* SentencePiece vocabulary (<0xXX> byte tokens, scores) rather than byte-level BPE */
  const like_kv *kv;
  const like_tensor *global, *layer; /* each ends with a NULL name */
} like_model;

#define Q41 ICL_TYPE_Q4_1
#define Q50 ICL_TYPE_Q5_0
#define Q80 ICL_TYPE_Q8_0
#define Q4K ICL_TYPE_Q4_K
#define Q6K ICL_TYPE_Q6_K
#define F32 ICL_TYPE_F32

static const like_kv SMOL_KV[] = {
    {"context_length", 0, 8192}, {"embedding_length", 0, 576}, {"block_count", 0, 30},
    {"feed_forward_length", 0, 1536}, {"attention.head_count", 0, 9}, {"attention.head_count_kv", 0, 3},
    {"rope.dimension_count", 0, 64}, {"vocab_size", 0, 49152},
    {"attention.layer_norm_rms_epsilon", 1, 1e-5}, {"rope.freq_base", 1, 100000}, {NULL, 0, 0}};
static const like_tensor SMOL_GLOBAL[] = {
    {"token_embd.weight", Q80, Q80, 576, 49152, 0}, {"output_norm.weight", F32, F32, 576, 1, 1}, {NULL, 0, 0, 0, 0, 0}};
static const like_tensor SMOL_LAYER[] = {
    {"attn_norm.weight", F32, F32, 576, 1, 1},      {"ffn_down.weight", Q41, Q41, 1536, 576, 0},
    {"ffn_gate.weight", Q41, Q41, 576, 1536, 0},    {"ffn_up.weight", Q41, Q41, 576, 1536, 0},
    {"ffn_norm.weight", F32, F32, 576, 1, 1},       {"attn_k.weight", Q41, Q41, 576, 192, 0},
    {"attn_output.weight", Q41, Q41, 576, 576, 0},  {"attn_q.weight", Q41, Q41, 576, 576, 0},
    {"attn_v.weight", Q41, Q41, 576, 192, 0},       {NULL, 0, 0, 0, 0, 0}};

static const like_kv GEMMA_KV[] = {
    {"context_length", 0, 32768}, {"embedding_length", 0, 640}, {"block_count", 0, 18},
    {"feed_forward_length", 0, 2048}, {"attention.head_count", 0, 4}, {"attention.head_count_kv", 0, 1},
    {"attention.key_length", 0, 256}, {"attention.value_length", 0, 256}, {"attention.sliding_window", 0, 512},
    {"attention.layer_norm_rms_epsilon", 1, 1e-6}, {"rope.freq_base", 1, 1000000}, {NULL, 0, 0}};
static const like_tensor GEMMA_GLOBAL[] = {
    {"token_embd.weight", Q80, Q80, 640, 262144, 0}, {"output_norm.weight", F32, F32, 640, 1, 1}, {NULL, 0, 0, 0, 0, 0}};
static const like_tensor GEMMA_LAYER[] = {
    {"attn_norm.weight", F32, F32, 640, 1, 1},          {"attn_q.weight", Q50, Q50, 640, 1024, 0},
    {"attn_k.weight", Q50, Q50, 640, 256, 0},           {"attn_v.weight", Q50, Q80, 640, 256, 0},
    {"attn_q_norm.weight", F32, F32, 256, 1, 1},        {"attn_k_norm.weight", F32, F32, 256, 1, 1},
    {"attn_output.weight", Q4K, Q4K, 1024, 640, 0},     {"post_attention_norm.weight", F32, F32, 640, 1, 1},
    {"ffn_norm.weight", F32, F32, 640, 1, 1},           {"ffn_gate.weight", Q50, Q50, 640, 2048, 0},
    {"ffn_up.weight", Q50, Q50, 640, 2048, 0},          {"ffn_down.weight", Q4K, Q6K, 2048, 640, 0},
    {"post_ffw_norm.weight", F32, F32, 640, 1, 1},      {NULL, 0, 0, 0, 0, 0}};
#define L(n) (1u << (n))

static const like_model MODELS[] = {
    {"smollm2", "SmolLM2-135M-Instruct-Q4_1.gguf", "llama", "gpt2", "smollm", 30, 0, 49152, 0, SMOL_KV,
     SMOL_GLOBAL, SMOL_LAYER},
    {"gemma3", "gemma-3-270m-Q4_K_M.gguf", "gemma3", "llama", "default", 18,
     L(0) | L(1) | L(4) | L(7) | L(10) | L(13) | L(15) | L(16) | L(17), 262144, 1, GEMMA_KV, GEMMA_GLOBAL,
     GEMMA_LAYER},
};
const char *const icl_like_names[] = {"smollm2", "gemma3", NULL};
const char *const icl_like_files[] = {"SmolLM2-135M-Instruct-Q4_1.gguf", "gemma-3-270m-Q4_K_M.gguf", NULL};

/* ---- synthetic vocabulary: special tokens, the 256 bytes, then strings over {space mark, a..z} ---- */

typedef struct vocab_buf {
  char *arena; /* pieces and merges, 32 bytes each */
  const char **piece, **merge;
  float *score;
  int32_t *type;
  int64_t n, n_merge;
} vocab_buf;

static void vocab_free(vocab_buf *v) {
  free(v->arena);
  free(v->piece);
  free(v->merge);
  free(v->score);
  free(v->type);
}

/* Symbol i of the filler alphabet: 0 is the space mark (GPT-2 'Ġ' or SentencePiece '▁'), 1..26 a..z. */
static const char *symbol(int i, int spm) {
  static const char *letters = "abcdefghijklmnopqrstuvwxyz";
  static char one[26][2];
  if (i == 0) return spm ? "\xE2\x96\x81" : "\xC4\xA0";
  one[i - 1][0] = letters[i - 1];
  return one[i - 1];
}

/* Writes filler string k of length len (base-27 digits) into out; *prefix_len gets the bytes before its last symbol. */
static void filler(int64_t k, int len, int spm, char *out, size_t *prefix_len) {
  int digit[8];
  for (int j = len - 1; j >= 0; j--) digit[j] = (int)(k % 27), k /= 27;
  out[0] = 0;
  for (int j = 0; j < len; j++) {
    if (j == len - 1) *prefix_len = strlen(out);
    strcat(out, symbol(digit[j], spm));
  }
}

static void byte_token(int b, int spm, char *out) {
  if (spm) {
    snprintf(out, 8, "<0x%02X>", b);
    return;
  }
  int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255), cp = b;
  if (!printable) { /* the GPT-2 byte-to-unicode map: unprintable bytes go to U+0100 onwards */
    cp = 256;
    for (int i = 0; i < b; i++) cp += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255));
  }
  if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
  else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static const char *const SPECIAL_BPE[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", NULL};
static const char *const SPECIAL_SPM[] = {"<pad>", "<eos>", "<bos>", "<unk>", NULL};

/* Fills the special and byte tokens; returns the count. */
static int64_t vocab_fixed(vocab_buf *v, int spm) {
  const char *const *sp = spm ? SPECIAL_SPM : SPECIAL_BPE;
  int64_t n = 0;
  for (; sp[n]; n++) strcpy(v->arena + 32 * n, sp[n]), v->type[n] = spm && n == 3 ? 2 : 3;
  for (int b = 0; b < 256; b++, n++) byte_token(b, spm, v->arena + 32 * n), v->type[n] = spm ? 6 : 1;
  return n;
}

/* Fillers by increasing length (every prefix comes first); BPE gets one merge per filler, prefix + last. */
static void vocab_fillers(vocab_buf *v, int64_t n, int spm) {
  int len = spm ? 1 : 2; /* single BPE symbols are byte tokens already */
  int64_t k = 0, count = 27 * (spm ? 1 : 27);
  for (; n < v->n; n++) {
    if (k == count) k = 0, count *= 27, len++;
    char *p = v->arena + 32 * n;
    size_t pre = 0;
    filler(k++, len, spm, p, &pre);
    v->type[n] = 1;
    v->score[n] = -(float)n;
    if (spm) continue;
    char *m = v->arena + 32 * (v->n + v->n_merge);
    memcpy(m, p, pre);
    m[pre] = ' ';
    strcpy(m + pre + 1, p + pre);
    v->merge[v->n_merge++] = m;
  }
}

static int vocab_make(vocab_buf *v, const like_model *lm) {
  memset(v, 0, sizeof *v);
  v->n = lm->n_vocab;
  v->arena = calloc((size_t)(2 * v->n), 32);
  v->piece = calloc((size_t)v->n, sizeof *v->piece);
  v->merge = calloc((size_t)v->n, sizeof *v->merge);
  v->score = calloc((size_t)v->n, sizeof *v->score);
  v->type = calloc((size_t)v->n, sizeof *v->type);
  if (!v->arena || !v->piece || !v->merge || !v->score || !v->type) return ICL_ENOMEM;
  vocab_fillers(v, vocab_fixed(v, lm->spm), lm->spm);
  for (int64_t i = 0; i < v->n; i++) v->piece[i] = v->arena + 32 * i;
  return ICL_OK;
}

static int write_vocab(icl_gguf_writer *w, const like_model *lm, icl_error *err) {
  vocab_buf v;
  if (vocab_make(&v, lm)) {
    vocab_free(&v);
    return icl_error_set(err, ICL_ENOMEM, "test model: out of memory for a %lld-token vocabulary",
                         (long long)lm->n_vocab);
  }
  int rc = icl_gguf_w_str(w, "tokenizer.ggml.model", lm->tok_model, err);
  if (!rc) rc = icl_gguf_w_str(w, "tokenizer.ggml.pre", lm->tok_pre, err);
  if (!rc) rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)v.n, v.piece, err);
  if (!rc) rc = icl_gguf_w_arr(w, "tokenizer.ggml.token_type", ICL_GGUF_I32, (uint64_t)v.n, v.type, err);
  if (!rc && lm->spm) rc = icl_gguf_w_arr(w, "tokenizer.ggml.scores", ICL_GGUF_F32, (uint64_t)v.n, v.score, err);
  if (!rc && !lm->spm) rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.merges", (uint64_t)v.n_merge, v.merge, err);
  if (!rc) rc = icl_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", lm->spm ? 2 : 1, err);
  if (!rc) rc = icl_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", lm->spm ? 1 : 2, err);
  if (!rc && lm->spm) rc = icl_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", 3, err);
  if (!rc) rc = icl_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", lm->spm, err);
  vocab_free(&v);
  return rc;
}

/* ---- hyperparameters and tensors ---- */

static int write_hparams(icl_gguf_writer *w, const like_model *lm, icl_error *err) {
  char k[128];
  int rc = icl_gguf_w_str(w, "general.architecture", lm->arch, err);
  if (!rc) {
    snprintf(k, sizeof k, "random weights shaped like %s", lm->file);
    rc = icl_gguf_w_str(w, "general.name", k, err);
  }
  for (const like_kv *kv = lm->kv; kv->key && !rc; kv++) {
    snprintf(k, sizeof k, "%s.%s", lm->arch, kv->key);
    rc = kv->is_float ? icl_gguf_w_f32(w, k, (float)kv->v, err) : icl_gguf_w_u32(w, k, (uint32_t)kv->v, err);
  }
  return rc;
}

/* Uniform weights of variance 1/ne0 (activations keep their size through the layers); norms near 1. */
static int write_tensor(icl_gguf_writer *w, const like_tensor *t, const char *name, uint32_t type, uint64_t *s,
                        icl_error *err) {
  float scale = t->center != 0 ? 0.1f : sqrtf(3.0f / (float)t->ne0);
  return icl_testmodel_tensor(w, name, type, t->ne0, t->ne1, t->center, scale, s, err);
}

static int write_tensors(icl_gguf_writer *w, const like_model *lm, uint64_t *s, icl_error *err) {
  char name[96];
  int rc = ICL_OK;
  for (const like_tensor *t = lm->global; t->name && !rc; t++) rc = write_tensor(w, t, t->name, t->type, s, err);
  for (int l = 0; l < lm->n_layer && !rc; l++)
    for (const like_tensor *t = lm->layer; t->name && !rc; t++) {
      snprintf(name, sizeof name, "blk.%d.%s", l, t->name);
      rc = write_tensor(w, t, name, (lm->alt_layers >> l) & 1 ? t->alt_type : t->type, s, err);
    }
  return rc;
}

int icl_write_like_model(const char *path, const char *like, uint64_t seed, icl_error *err) {
  const like_model *lm = NULL;
  for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
    if (like && !strcmp(like, MODELS[i].like)) lm = &MODELS[i];
  if (!lm) return icl_error_set(err, ICL_EINVAL, "test model: unknown --like '%s' (expected smollm2 or gemma3)",
                                like ? like : "(null)");
  icl_gguf_writer *w = icl_gguf_writer_new();
  if (!w) return icl_error_set(err, ICL_ENOMEM, "test model: out of memory");
  uint64_t s = seed * 7919 + 17;
  int rc = write_hparams(w, lm, err);
  if (!rc) rc = write_vocab(w, lm, err);
  if (!rc) rc = write_tensors(w, lm, &s, err);
  if (!rc) rc = icl_gguf_writer_save(w, path, err);
  icl_gguf_writer_free(w);
  return rc;
}
