/* icl-attn, the small trainable family (docs/gguf.md): its options are keys of the file, not entries of the
 * architecture table. Every error names the file, the key, the value found and what was expected. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch.h"

#define PFX "icl-attn."

/* Integer key PFX suffix in [lo, hi]; missing: def, or an error when def < 0. */
static int a_int(const icl_gguf *g, const char *suffix, int64_t def, int64_t lo, int64_t hi, int *out,
                 icl_error *err) {
  char key[96];
  snprintf(key, sizeof key, PFX "%s", suffix);
  int64_t i = icl_gguf_find_key(g, key), v = def;
  if (i < 0 && def < 0) return icl_error_set(err, ICL_EFORMAT, "%s: missing key '%s'", icl_gguf_name(g), key);
  if (i >= 0 && icl_gguf_kv_int(g, i, &v) != ICL_OK)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is a %s, expected an integer", icl_gguf_name(g), key,
                         icl_gguf_vtype_name(icl_gguf_kv_type(g, i)));
  if (v < lo || v > hi)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %lld, expected %lld..%lld", icl_gguf_name(g), key,
                         (long long)v, (long long)lo, (long long)hi);
  *out = (int)v;
  return ICL_OK;
}

/* Float key, finite and > 0; missing: def. */
static int a_float(const icl_gguf *g, const char *suffix, double def, float *out, icl_error *err) {
  char key[96];
  snprintf(key, sizeof key, PFX "%s", suffix);
  int64_t i = icl_gguf_find_key(g, key);
  double v = def;
  if (i >= 0 && icl_gguf_kv_float(g, i, &v) != ICL_OK)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is a %s, expected a number", icl_gguf_name(g), key,
                         icl_gguf_vtype_name(icl_gguf_kv_type(g, i)));
  if (!(v > 0) || !isfinite(v))
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %g, expected a finite number > 0", icl_gguf_name(g), key,
                         v);
  *out = (float)v;
  return ICL_OK;
}

/* String key that must be one of choices (index into *out); missing: choice 0. */
static int a_enum(const icl_gguf *g, const char *suffix, const char *const *choices, int n, int *out,
                  icl_error *err) {
  char key[96];
  snprintf(key, sizeof key, PFX "%s", suffix);
  int64_t i = icl_gguf_find_key(g, key);
  *out = 0;
  if (i < 0) return ICL_OK;
  const char *v = icl_gguf_kv_str(g, i, NULL);
  for (int c = 0; v && c < n; c++)
    if (!strcmp(v, choices[c])) return *out = c, ICL_OK;
  char want[96] = "";
  for (int c = 0; c < n; c++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", c ? ", " : "",
                                       choices[c]);
  return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = '%s', expected one of %s", icl_gguf_name(g), key,
                       v ? v : "(not a string)", want);
}

/* Rows (ne[1]) of a tensor, or -1 when absent. */
static int64_t rows_of(const icl_gguf *g, const char *name) {
  const icl_gguf_tensor *t = icl_gguf_find_tensor(g, name);
  return t ? t->ne[1] : -1;
}

static int read_sizes(const icl_gguf *g, icl_hparams *hp, icl_error *err) {
  int rc;
  if ((rc = a_int(g, "block_count", -1, 1, 1024, &hp->n_layer, err)) ||
      (rc = a_int(g, "embedding_length", -1, 1, 1 << 16, &hp->n_embd, err)) ||
      (rc = a_int(g, "attention.head_count", -1, 1, 1024, &hp->n_head, err)) ||
      (rc = a_int(g, "context_length", -1, 1, 1 << 24, &hp->n_ctx_train, err)) ||
      (rc = a_int(g, "attention.key_length", hp->n_embd / hp->n_head, 1, 4096, &hp->head_dim, err)) ||
      (rc = a_int(g, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->n_rot, err)) ||
      (rc = a_int(g, "input_length", 0, 0, 1 << 20, &hp->input_length, err)) ||
      (rc = a_float(g, "attention.layer_norm_epsilon", 1e-5, &hp->eps, err)) ||
      (rc = a_float(g, "rope.freq_base", 10000.0, &hp->rope_base, err)))
    return rc;
  hp->n_head_kv = hp->n_head;
  if (hp->n_rot % 2 != 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '" PFX "rope.dimension_count' = %d, expected an even number",
                         icl_gguf_name(g), hp->n_rot);
  int64_t te = rows_of(g, "token_embd.weight");
  if ((rc = a_int(g, "vocab_size", te > 0 ? te : 0, 0, 1 << 24, &hp->n_tokens, err))) return rc;
  if (hp->n_tokens != (te > 0 ? te : 0))
    return icl_error_set(err, ICL_EFORMAT, "%s: key '" PFX "vocab_size' = %d, but token_embd.weight has %lld rows",
                         icl_gguf_name(g), hp->n_tokens, (long long)(te > 0 ? te : 0));
  int64_t ff = rows_of(g, "blk.0.ffn_up.weight");
  hp->n_ff = ff > 0 ? (int)ff : 0;
  return ICL_OK;
}

static int read_options(const icl_gguf *g, const icl_hparams *hp, icl_feat *f, icl_error *err) {
  static const char *const NORM[] = {"layer", "rms", "none"}, *const POS[] = {"learned", "rope", "none"},
                           *const OUT[] = {"unembed", "classifier"};
  static const icl_norm_kind NK[] = {ICL_NORM_LAYER, ICL_NORM_RMS, ICL_NORM_NONE};
  static const icl_pos_kind PK[] = {ICL_POS_LEARNED, ICL_POS_ROPE, ICL_POS_NONE};
  int norm, pos, out, rc;
  memset(f, 0, sizeof *f);
  if ((rc = a_enum(g, "norm", NORM, 3, &norm, err)) || (rc = a_enum(g, "position", POS, 3, &pos, err)) ||
      (rc = a_enum(g, "output", OUT, 2, &out, err)) ||
      (rc = a_int(g, "smeared_key", 0, 0, 1, &f->smeared_key, err)) ||
      (rc = a_float(g, "attention.scale", 1.0 / sqrt((double)hp->head_dim), &f->attn_scale, err)))
    return rc;
  f->norm = NK[norm], f->pos = PK[pos], f->out = out ? ICL_OUT_CLASSIFIER : ICL_OUT_UNEMBED;
  if (f->out == ICL_OUT_CLASSIFIER && (rc = a_int(g, "classifier.hidden_count", 0, 0, 64, &f->n_cls, err)))
    return rc;
  return ICL_OK;
}

int icl_arch_attn_read(const icl_gguf *g, const icl_arch *a, icl_hparams *hp, icl_feat *f, icl_error *err) {
  memset(hp, 0, sizeof *hp);
  snprintf(hp->arch, sizeof hp->arch, "%s", a->name);
  const char *name = icl_gguf_get_str(g, "general.name");
  snprintf(hp->name, sizeof hp->name, "%s", name ? name : icl_gguf_name(g));
  hp->allow_no_token = 1;
  int rc = read_sizes(g, hp, err);
  if (!rc) rc = read_options(g, hp, f, err);
  if (rc) return rc;
  int64_t out = rows_of(g, "output.weight");
  if (out < 0 && f->out == ICL_OUT_CLASSIFIER)
    return icl_error_set(err, ICL_EFORMAT, "%s: missing tensor 'output.weight' (required by " PFX "output = "
                         "'classifier')", icl_gguf_name(g));
  if (out < 0 && hp->n_tokens == 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: missing tensor 'output.weight' (the unembedding cannot be tied: "
                         PFX "vocab_size = 0)", icl_gguf_name(g));
  hp->n_vocab = out > 0 ? (int)out : hp->n_tokens;
  return ICL_OK;
}
