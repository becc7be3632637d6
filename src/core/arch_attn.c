/* icl-attn, the small trainable family (docs/gguf.md): its options are keys of the file, not entries of the
 * architecture table. Every error names the file, the key, the value found and what was expected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "arch_attn.h"

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

/* Whether name is "blk.<n>.<suffix>" with n a block number; *n receives it. */
static int block_tensor(const char *name, int *n, const char **suffix) {
  if (strncmp(name, "blk.", 4)) return 0;
  char *end;
  long v = strtol(name + 4, &end, 10);
  if (end == name + 4 || *end != '.' || v < 0 || v > 1 << 20) return 0;
  *n = (int)v, *suffix = end + 1;
  return 1;
}

static int in_list(const char *s, const char *const *list) {
  for (int i = 0; list[i]; i++)
    if (!strcmp(s, list[i])) return 1;
  return 0;
}

/* Why a norm's tensor (suffix "weight" or "bias") cannot be used under the norm kind, or NULL. */
static const char *norm_unused(const char *suffix, const icl_feat *f) {
  if (f->norm == ICL_NORM_NONE) return PFX "norm is 'none'";
  if (!strcmp(suffix, "bias") && f->norm != ICL_NORM_LAYER) return PFX "norm = 'rms' has no bias";
  return NULL;
}

/* Why block tensor blk.<n>.<sfx> cannot be used, or NULL. */
static const char *block_unused(int n, const char *sfx, const icl_hparams *hp, const icl_feat *f) {
  static const char *const ATTN[] = {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_q.bias",
                                     "attn_k.bias", "attn_v.bias", "attn_output.weight", "attn_output.bias", NULL};
  static const char *const MLP[] = {"ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias",
                                    "ffn_norm.weight", "ffn_norm.bias", NULL};
  if (n >= hp->n_layer) return "its block is beyond " PFX "block_count";
  if (in_list(sfx, ATTN)) return NULL;
  if (!strcmp(sfx, "attn_smear")) return f->smeared_key ? NULL : PFX "smeared_key is false";
  if (in_list(sfx, MLP) && !hp->n_ff) return "blk.0 has no ffn_up.weight (no MLP)";
  if (!strcmp(sfx, "attn_norm.weight") || !strcmp(sfx, "ffn_norm.weight")) return norm_unused("weight", f);
  if (!strcmp(sfx, "attn_norm.bias") || !strcmp(sfx, "ffn_norm.bias")) return norm_unused("bias", f);
  return in_list(sfx, MLP) ? NULL : "not an icl-attn tensor";
}

/* Why tensor name cannot be honoured by the keys read (NULL when it can): every tensor of the file is part of the
 * model both readers build, so none is silently dropped (a LayerNorm bias under rms, a position table under rope,
 * a block beyond block_count, an MLP of a later block when blk.0 has none). */
static const char *tensor_unused(const char *name, const icl_hparams *hp, const icl_feat *f) {
  static const char *const TOP[] = {"token_embd.weight", "output.weight", "output.bias", NULL};
  int n;
  const char *sfx;
  char tail[16];
  if (block_tensor(name, &n, &sfx)) return block_unused(n, sfx, hp, f);
  if (in_list(name, TOP)) return NULL;
  if (!strcmp(name, "inp_proj.weight") || !strcmp(name, "inp_proj.bias"))
    return hp->input_length > 0 ? NULL : PFX "input_length is 0";
  if (!strcmp(name, "position_embd.weight")) return f->pos == ICL_POS_LEARNED ? NULL : PFX "position is not 'learned'";
  if (!strcmp(name, "output_norm.weight")) return norm_unused("weight", f);
  if (!strcmp(name, "output_norm.bias")) return norm_unused("bias", f);
  if (sscanf(name, "cls.%d.%15s", &n, tail) == 2 && (!strcmp(tail, "weight") || !strcmp(tail, "bias")))
    return f->out == ICL_OUT_CLASSIFIER && n >= 0 && n < f->n_cls ? NULL : "beyond " PFX "classifier.hidden_count";
  return "not an icl-attn tensor";
}

static int check_tensors(const icl_gguf *g, const icl_hparams *hp, const icl_feat *f, icl_error *err) {
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const char *name = icl_gguf_tensor_at(g, i)->name, *why = tensor_unused(name, hp, f);
    if (why)
      return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' cannot be used: %s", icl_gguf_name(g), name, why);
  }
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
  return check_tensors(g, hp, f, err);
}

int icl_attn_file_read(const icl_gguf *g, icl_attn_file *o, icl_error *err) {
  icl_hparams hp;
  icl_feat f;
  int rc = icl_arch_attn_read(g, icl_arch_find("icl-attn"), &hp, &f, err);
  if (rc) return rc;
  *o = (icl_attn_file){.n_layer = hp.n_layer, .n_head = hp.n_head, .d_model = hp.n_embd, .d_head = hp.head_dim,
                       .n_ctx = hp.n_ctx_train, .vocab = hp.n_tokens, .n_out = (int)rows_of(g, "output.weight"),
                       .input_len = hp.input_length, .d_ff = hp.n_ff, .cls_hidden = f.n_cls,
                       .smeared_key = f.smeared_key, .rope_dims = hp.n_rot, .eps = hp.eps, .rope_base = hp.rope_base,
                       .attn_scale = f.attn_scale};
  o->norm = f.norm == ICL_NORM_LAYER ? "layer" : f.norm == ICL_NORM_RMS ? "rms" : "none";
  o->position = f.pos == ICL_POS_LEARNED ? "learned" : f.pos == ICL_POS_ROPE ? "rope" : "none";
  o->output = f.out == ICL_OUT_CLASSIFIER ? "classifier" : "unembed";
  return ICL_OK;
}
