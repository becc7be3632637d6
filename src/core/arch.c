/* The architecture table and hyperparameter reading. Adding an architecture is one entry here plus
 * any missing op. */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "text_safe.h"

static const icl_arch ARCHS[] = {
    /* name     rope            act            qk_norm post  bias  escale swa  swa_base default_window from_file */
    {"llama", ICL_ROPE_NORMAL, ICL_ACT_SILU, 0, 0, 0, 0, 0, 0.0f, 0, 0},
    {"qwen2", ICL_ROPE_NEOX, ICL_ACT_SILU, 0, 0, 1, 0, 0, 0.0f, 0, 0},
    {"gemma3", ICL_ROPE_NEOX, ICL_ACT_GELU, 1, 1, 0, 1, 6, 10000.0f, 512, 0},
    {"icl-attn", ICL_ROPE_NEOX, ICL_ACT_GELU, 0, 0, 0, 0, 0, 0.0f, 0, 1},
};

const icl_arch *icl_arch_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
    if (!strcmp(ARCHS[i].name, name)) return &ARCHS[i];
  return NULL;
}

const char *icl_arch_list(void) { return "llama, qwen2, gemma3, icl-attn"; }

/* Reads "<arch>.<suffix>" as an int; missing keys take def when def >= 0. */
static int get_int(const icl_gguf *g, const char *arch, const char *suffix, int64_t def, int64_t lo, int64_t hi,
                   int *out, icl_error *err) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  int64_t v;
  int64_t i = icl_gguf_find_key(g, key);
  if (i < 0) {
    if (def < 0) return icl_error_set(err, ICL_EFORMAT, "%s: missing key '%s'", icl_gguf_name(g), key);
    v = def;
  } else if (icl_gguf_kv_int(g, i, &v) != ICL_OK) {
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is not an integer", icl_gguf_name(g), key);
  }
  if (v < lo || v > hi)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %lld, expected %lld..%lld", icl_gguf_name(g), key,
                         (long long)v, (long long)lo, (long long)hi);
  *out = (int)v;
  return ICL_OK;
}

static int get_float(const icl_gguf *g, const char *arch, const char *suffix, double def, float *out,
                     icl_error *err) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", arch, suffix);
  int64_t i = icl_gguf_find_key(g, key);
  double v = def;
  if (i >= 0 && icl_gguf_kv_float(g, i, &v) != ICL_OK)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is not a number", icl_gguf_name(g), key);
  if (!isfinite(v) || (!(v > 0) && def > 0))
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %g, expected a finite number%s", icl_gguf_name(g), key, v,
                         def > 0 ? " > 0" : "");
  *out = (float)v;
  return ICL_OK;
}

/* Without attention.key_length the head width is embedding_length / head_count, which must then divide evenly
 * (else a wrong head_count would be reported later as a bad rope.dimension_count). */
static int check_head_width(const icl_gguf *g, const char *arch, const icl_hparams *hp, icl_error *err) {
  char key[128];
  snprintf(key, sizeof key, "%s.attention.key_length", arch);
  if (icl_gguf_find_key(g, key) >= 0 || hp->n_embd % hp->n_head == 0) return ICL_OK;
  return icl_error_set(err, ICL_EFORMAT, "%s: %s.attention.head_count = %d does not divide embedding_length %d "
                       "(and %s is absent)", icl_gguf_name(g), arch, hp->n_head, hp->n_embd, key);
}

/* Layers beyond block_count would be ignored silently: a tensor blk.N.* with N >= block_count is an error. */
static int check_layers_present(const icl_gguf *g, const char *arch, int n_layer, icl_error *err) {
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const char *name = icl_gguf_tensor_at(g, i)->name;
    char *end;
    if (strncmp(name, "blk.", 4)) continue;
    long il = strtol(name + 4, &end, 10);
    if (end != name + 4 && *end == '.' && il >= n_layer)
      return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' belongs to layer %ld, but %s.block_count is %d",
                           icl_gguf_name(g), name, il, arch, n_layer);
  }
  return ICL_OK;
}

int icl_arch_read_hparams(const icl_gguf *g, const icl_arch *a, icl_hparams *hp, int *window, icl_error *err) {
  const char *n = a->name;
  memset(hp, 0, sizeof *hp);
  snprintf(hp->arch, sizeof hp->arch, "%s", n);
  const char *name = icl_gguf_get_str(g, "general.name");
  name = name ? name : icl_gguf_name(g); /* untrusted: no control sequences or broken UTF-8 in titles and logs */
  icl_text_display(name, strlen(name), hp->name, sizeof hp->name);
  int rc;
  if ((rc = get_int(g, n, "block_count", -1, 1, 1024, &hp->n_layer, err)) ||
      (rc = get_int(g, n, "embedding_length", -1, 1, 1 << 16, &hp->n_embd, err)) ||
      (rc = get_int(g, n, "attention.head_count", -1, 1, 1024, &hp->n_head, err)) ||
      (rc = get_int(g, n, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv, err)) ||
      (rc = get_int(g, n, "feed_forward_length", -1, 1, 1 << 20, &hp->n_ff, err)) ||
      (rc = get_int(g, n, "context_length", 2048, 1, 1 << 24, &hp->n_ctx_train, err)) ||
      (rc = check_head_width(g, n, hp, err)) ||
      (rc = get_int(g, n, "attention.key_length", hp->n_embd / hp->n_head, 1, 4096, &hp->head_dim, err)) ||
      (rc = get_int(g, n, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->n_rot, err)) ||
      (rc = get_int(g, n, "attention.sliding_window", a->default_window, 0, 1 << 24, window, err)) ||
      (rc = get_float(g, n, "attention.layer_norm_rms_epsilon", 1e-5, &hp->eps, err)) ||
      (rc = get_float(g, n, "rope.freq_base", 10000.0, &hp->rope_base, err)))
    return rc;
  if (hp->n_head % hp->n_head_kv != 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: %s.attention.head_count %d is not a multiple of head_count_kv %d",
                         icl_gguf_name(g), n, hp->n_head, hp->n_head_kv);
  if (hp->n_rot % 2 != 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: %s.rope.dimension_count %d is odd", icl_gguf_name(g), n, hp->n_rot);
  if ((rc = check_layers_present(g, n, hp->n_layer, err))) return rc;
  int vi = (int)icl_gguf_find_key(g, "tokenizer.ggml.tokens");
  hp->n_vocab = vi >= 0 ? (int)icl_gguf_arr_len(g, vi) : 0;
  return ICL_OK;
}

void icl_arch_feat_fixed(const icl_arch *a, const icl_hparams *hp, icl_feat *f) {
  (void)a;
  *f = (icl_feat){.norm = ICL_NORM_RMS, .pos = ICL_POS_ROPE, .out = ICL_OUT_UNEMBED,
                  .attn_scale = 1.0f / sqrtf((float)hp->head_dim), .gated_ffn = 1};
}
