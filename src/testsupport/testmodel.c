/* Tiny random models for end-to-end tests: every tensor the architecture needs, random weights quantized to
 * the requested type, a byte-level vocabulary. */
#include "testmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "ref.h"

float icl_testmodel_uniform(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (float)((z >> 40) * (2.0 / 16777216.0) - 1.0);
}

/* Adds a [ne0, ne1] tensor: random values of the given scale around `center`, stored as type. Rows are made
 * and quantized a slice at a time, so a 262144-row embedding needs no float copy of itself. */
int icl_testmodel_tensor(icl_gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                         float center, float scale, uint64_t *s, icl_error *err) {
  enum { SLICE = 1 << 16 }; /* floats per slice, at least one row */
  int64_t rows = ne0 >= SLICE ? 1 : SLICE / ne0;
  size_t row_bytes = icl_type_row_bytes(type, ne0), bytes = row_bytes * (size_t)ne1;
  float *f = malloc((size_t)(rows * ne0) * sizeof *f);
  uint8_t *q = malloc(bytes ? bytes : 1);
  if (!f || !q || !bytes) {
    free(f);
    free(q);
    return icl_error_set(err, ICL_EINVAL, "test model: cannot make %s as %s [%lld, %lld]", name,
                         icl_type_name(type), (long long)ne0, (long long)ne1);
  }
  for (int64_t r0 = 0; r0 < ne1; r0 += rows) {
    int64_t n = (r0 + rows <= ne1 ? rows : ne1 - r0) * ne0;
    for (int64_t i = 0; i < n; i++) f[i] = center + scale * icl_testmodel_uniform(s);
    if (type == ICL_TYPE_F32) memcpy(q + (size_t)r0 * row_bytes, f, (size_t)n * sizeof *f);
    else icl_ref_quantize(type, f, q + (size_t)r0 * row_bytes, n);
  }
  int64_t ne[2] = {ne0, ne1};
  int rc = icl_gguf_w_tensor(w, name, type, ne1 > 1 ? 2 : 1, ne, q, bytes, err);
  free(f);
  free(q);
  return rc;
}

static int tensor(icl_gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1, float center,
                  float scale, uint64_t *s, icl_error *err) {
  return icl_testmodel_tensor(w, name, type, ne0, ne1, center, scale, s, err);
}

/* The GPT-2 byte-to-unicode map: printable bytes map to themselves, the rest to U+0100 onwards. */
static void byte_piece(int b, char *out) {
  int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int cp = b;
  if (!printable) {
    int k = 0;
    for (int i = 0; i < b; i++)
      if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) k++;
    cp = 256 + k;
  }
  if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
  else out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

static int vocab(icl_gguf_writer *w, icl_error *err) {
  char pieces[258][4];
  const char *ptr[258];
  int32_t types[258];
  for (int b = 0; b < 256; b++) byte_piece(b, pieces[b]), ptr[b] = pieces[b], types[b] = 1;
  ptr[256] = "<s>", ptr[257] = "</s>", types[256] = types[257] = 3;
  const char *merges[1] = {"Ġ a"};
  int rc = icl_gguf_w_str(w, "tokenizer.ggml.model", "gpt2", err);
  if (!rc) rc = icl_gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2", err);
  if (!rc) rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.tokens", 258, ptr, err);
  if (!rc) rc = icl_gguf_w_arr(w, "tokenizer.ggml.token_type", ICL_GGUF_I32, 258, types, err);
  if (!rc) rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.merges", 0, merges, err);
  if (!rc) rc = icl_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 256, err);
  if (!rc) rc = icl_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 257, err);
  if (!rc) rc = icl_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1, err);
  return rc;
}

static int hparams(icl_gguf_writer *w, const icl_tiny_spec *p, icl_error *err) {
  char k[96];
  const char *a = p->arch;
  int rc = icl_gguf_w_str(w, "general.architecture", a, err);
  if (!rc) rc = icl_gguf_w_str(w, "general.name", "tiny-random", err);
#define U(key, v) if (!rc) { snprintf(k, sizeof k, "%s.%s", a, key); rc = icl_gguf_w_u32(w, k, (uint32_t)(v), err); }
#define F(key, v) if (!rc) { snprintf(k, sizeof k, "%s.%s", a, key); rc = icl_gguf_w_f32(w, k, v, err); }
  U("block_count", p->n_layer);
  U("embedding_length", p->d);
  U("feed_forward_length", p->ff);
  U("context_length", 2048);
  U("attention.head_count", p->n_head);
  U("attention.head_count_kv", p->n_head_kv);
  U("attention.key_length", p->head_dim);
  U("attention.value_length", p->head_dim);
  U("rope.dimension_count", p->head_dim);
  F("attention.layer_norm_rms_epsilon", 1e-6f);
  F("rope.freq_base", strcmp(a, "gemma3") ? 10000.0f : 1000000.0f);
  if (!strcmp(a, "gemma3")) U("attention.sliding_window", p->window);
#undef U
#undef F
  return rc;
}

static int layers(icl_gguf_writer *w, const icl_tiny_spec *p, uint64_t *s, icl_error *err) {
  int gemma = !strcmp(p->arch, "gemma3"), qwen = !strcmp(p->arch, "qwen2");
  int64_t d = p->d, qd = (int64_t)p->n_head * p->head_dim, kd = (int64_t)p->n_head_kv * p->head_dim;
  float sd = 1.0f / sqrtf((float)d), sf = 1.0f / sqrtf((float)p->ff);
  char nm[96];
  int rc = ICL_OK;
  for (int l = 0; l < p->n_layer && !rc; l++) {
#define T(name, type, n0, n1, c, sc) \
  if (!rc) { snprintf(nm, sizeof nm, "blk.%d.%s", l, name); rc = tensor(w, nm, type, n0, n1, c, sc, s, err); }
    T("attn_norm.weight", ICL_TYPE_F32, d, 1, 1.0f, 0.2f);
    T("attn_q.weight", p->wtype, d, qd, 0, 2 * sd);
    T("attn_k.weight", p->wtype, d, kd, 0, 2 * sd);
    T("attn_v.weight", p->vtype ? p->vtype : p->wtype, d, kd, 0, 2 * sd);
    T("attn_output.weight", p->wtype, qd, d, 0, 2 * sd);
    T("ffn_norm.weight", ICL_TYPE_F32, d, 1, 1.0f, 0.2f);
    T("ffn_gate.weight", p->wtype, d, p->ff, 0, 2 * sd);
    T("ffn_up.weight", p->wtype, d, p->ff, 0, 2 * sd);
    T("ffn_down.weight", p->wtype, p->ff, d, 0, 2 * sf);
    if (qwen) {
      T("attn_q.bias", ICL_TYPE_F32, qd, 1, 0, 0.1f);
      T("attn_k.bias", ICL_TYPE_F32, kd, 1, 0, 0.1f);
      T("attn_v.bias", ICL_TYPE_F32, kd, 1, 0, 0.1f);
    }
    if (gemma) {
      T("attn_q_norm.weight", ICL_TYPE_F32, p->head_dim, 1, 1.0f, 0.2f);
      T("attn_k_norm.weight", ICL_TYPE_F32, p->head_dim, 1, 1.0f, 0.2f);
      T("post_attention_norm.weight", ICL_TYPE_F32, d, 1, 1.0f, 0.2f);
      T("post_ffw_norm.weight", ICL_TYPE_F32, d, 1, 1.0f, 0.2f);
    }
#undef T
  }
  return rc;
}

int icl_write_tiny_model(const char *path, const icl_tiny_spec *spec, icl_error *err) {
  icl_tiny_spec p = *spec;
  int gemma = p.arch && !strcmp(p.arch, "gemma3");
  if (!p.arch) p.arch = "llama";
  if (!p.wtype) p.wtype = ICL_TYPE_F32;
  if (!p.d) p.d = 256;
  if (!p.n_head) p.n_head = 4;
  if (!p.n_head_kv) p.n_head_kv = 2;
  if (!p.head_dim) p.head_dim = 64;
  if (!p.ff) p.ff = 512;
  if (!p.n_layer) p.n_layer = gemma ? 6 : 2;
  if (!p.window) p.window = 5;
  uint64_t s = p.seed * 7919 + 17;
  icl_gguf_writer *w = icl_gguf_writer_new();
  if (!w) return icl_error_set(err, ICL_ENOMEM, "tiny model: out of memory");
  int64_t vocab_n = 258;
  int rc = hparams(w, &p, err);
  if (!rc) rc = vocab(w, err);
  if (!rc) rc = tensor(w, "token_embd.weight", p.wtype, p.d, vocab_n, 0, 1.0f, &s, err);
  if (!rc) rc = tensor(w, "output_norm.weight", ICL_TYPE_F32, p.d, 1, 1.0f, 0.2f, &s, err);
  if (!rc) rc = layers(w, &p, &s, err);
  if (!rc) rc = icl_gguf_writer_save(w, path, err);
  icl_gguf_writer_free(w);
  return rc;
}
