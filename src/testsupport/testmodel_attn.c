/* Tiny random icl-attn models: every key of the architecture written explicitly, F32 tensors, random weights
 * scaled so that activations stay O(1) through a few layers. */
#include "testmodel_attn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "ref.h"
#include "testmodel.h"

/* The file being written and the type of its matrices (vectors are F32). */
typedef struct aw {
  icl_gguf_writer *g;
  uint32_t wtype;
} aw;

/* Adds a tensor [ne0, ne1] (ne1 = 0: an F32 vector; else a matrix of w->wtype) of center + scale * U(-1, 1). */
static int tensor(aw *w, const char *name, int64_t ne0, int64_t ne1, float center, float scale,
                  uint64_t *s, icl_error *err) {
  int64_t rows = ne1 ? ne1 : 1, n = ne0 * rows;
  uint32_t type = ne1 ? w->wtype : ICL_TYPE_F32;
  size_t bytes = icl_type_row_bytes(type, ne0) * (size_t)rows;
  float *f = malloc((size_t)n * sizeof *f);
  void *q = malloc(bytes ? bytes : 1);
  int rc = !f || !q || !bytes ? icl_error_set(err, ICL_EINVAL, "attn model: cannot make %s as %s", name,
                                              icl_type_name(type)) : ICL_OK;
  for (int64_t i = 0; !rc && i < n; i++) f[i] = center + scale * icl_testmodel_uniform(s);
  if (!rc && type == ICL_TYPE_F32) memcpy(q, f, bytes);
  else if (!rc) icl_ref_quantize(type, f, q, n);
  int64_t ne[2] = {ne0, rows};
  if (!rc) rc = icl_gguf_w_tensor(w->g, name, type, ne1 ? 2 : 1, ne, q, bytes, err);
  free(f);
  free(q);
  return rc;
}

static void defaults(icl_attn_spec *p) {
  if (!p->n_layer) p->n_layer = 1;
  if (!p->d) p->d = 32;
  if (!p->n_head) p->n_head = 4;
  if (!p->head_dim) p->head_dim = p->d / p->n_head;
  if (!p->n_ctx) p->n_ctx = 64;
  if (!p->vocab) p->vocab = 16;
  if (p->vocab < 0) p->vocab = 0;
  if (!p->norm) p->norm = "layer";
  if (!p->position) p->position = "learned";
  if (!p->scale) p->scale = 1.0f / sqrtf((float)p->head_dim);
}

static int keys(aw *w, const icl_attn_spec *p, icl_error *err) {
  int rc = icl_gguf_w_str(w->g, "general.architecture", "icl-attn", err);
  if (!rc) rc = icl_gguf_w_str(w->g, "general.name", "tiny-icl-attn", err);
#define U(k, v) if (!rc) rc = icl_gguf_w_u32(w->g, "icl-attn." k, (uint32_t)(v), err)
#define S(k, v) if (!rc) rc = icl_gguf_w_str(w->g, "icl-attn." k, v, err)
  U("context_length", p->n_ctx);
  U("embedding_length", p->d);
  U("block_count", p->n_layer);
  U("attention.head_count", p->n_head);
  U("attention.key_length", p->head_dim);
  U("vocab_size", p->vocab);
  U("input_length", p->input_length);
  S("norm", p->norm);
  S("position", p->position);
  S("output", p->n_classes > 0 ? "classifier" : "unembed");
  if (p->n_classes > 0) U("classifier.hidden_count", p->n_cls_hidden);
#undef U
#undef S
  if (!rc) rc = icl_gguf_w_f32(w->g, "icl-attn.attention.scale", p->scale, err);
  if (!rc) rc = icl_gguf_w_f32(w->g, "icl-attn.attention.layer_norm_epsilon", 1e-5f, err);
  if (!rc) rc = icl_gguf_w_bool(w->g, "icl-attn.smeared_key", p->smeared, err);
  if (!rc) rc = icl_gguf_w_u32(w->g, "icl-train.step", 0, err); /* trainer metadata: ignored by inference */
  return rc;
}

/* A norm's weight (and bias for LayerNorm) named prefix.weight / prefix.bias. */
static int norm(aw *w, const icl_attn_spec *p, const char *prefix, uint64_t *s, icl_error *err) {
  char nm[96];
  int rc = ICL_OK;
  if (strcmp(p->norm, "none")) {
    snprintf(nm, sizeof nm, "%s.weight", prefix);
    rc = tensor(w, nm, p->d, 0, 1.0f, 0.2f, s, err);
  }
  if (!rc && !strcmp(p->norm, "layer")) {
    snprintf(nm, sizeof nm, "%s.bias", prefix);
    rc = tensor(w, nm, p->d, 0, 0.0f, 0.1f, s, err);
  }
  return rc;
}

static int layer(aw *w, const icl_attn_spec *p, int l, uint64_t *s, icl_error *err) {
  int64_t d = p->d, qd = (int64_t)p->n_head * p->head_dim;
  float sd = 1.0f / sqrtf((float)d);
  char nm[96], pre[32];
  snprintf(pre, sizeof pre, "blk.%d.attn_norm", l);
  int rc = norm(w, p, pre, s, err);
#define T(name, n0, n1, c, sc) \
  if (!rc) { snprintf(nm, sizeof nm, "blk.%d.%s", l, name); rc = tensor(w, nm, n0, n1, c, sc, s, err); }
  T("attn_q.weight", d, qd, 0, 2 * sd);
  T("attn_k.weight", d, qd, 0, 2 * sd);
  T("attn_v.weight", d, qd, 0, 2 * sd);
  if (p->biases) {
    T("attn_q.bias", qd, 0, 0, 0.2f);
    T("attn_k.bias", qd, 0, 0, 0.2f);
    T("attn_v.bias", qd, 0, 0, 0.2f);
  }
  if (!p->no_wo) T("attn_output.weight", qd, d, 0, 2 * sd);
  if (!p->no_wo && p->biases) T("attn_output.bias", d, 0, 0, 0.2f);
  if (p->smeared) T("attn_smear", p->n_head, 0, 0, 2.0f);
  if (p->ff > 0) {
    snprintf(pre, sizeof pre, "blk.%d.ffn_norm", l);
    if (!rc) rc = norm(w, p, pre, s, err);
    T("ffn_up.weight", d, p->ff, 0, 2 * sd);
    T("ffn_down.weight", p->ff, d, 0, 2.0f / sqrtf((float)p->ff));
    if (p->biases) {
      T("ffn_up.bias", p->ff, 0, 0, 0.2f);
      T("ffn_down.bias", d, 0, 0, 0.2f);
    }
  }
#undef T
  return rc;
}

/* Embeddings, input projection, final norm, classifier and output. */
static int io(aw *w, const icl_attn_spec *p, uint64_t *s, icl_error *err) {
  int64_t d = p->d, n_out = p->n_classes > 0 ? p->n_classes : p->vocab;
  int rc = ICL_OK;
  if (p->vocab > 0) rc = tensor(w, "token_embd.weight", d, p->vocab, 0, 1.0f, s, err);
  if (!rc && !strcmp(p->position, "learned")) rc = tensor(w, "position_embd.weight", d, p->n_ctx, 0, 0.5f, s, err);
  if (!rc && p->input_length > 0 && p->inp_proj) {
    rc = tensor(w, "inp_proj.weight", p->input_length, d, 0, 2.0f / sqrtf((float)p->input_length), s, err);
    if (!rc) rc = tensor(w, "inp_proj.bias", d, 0, 0, 0.2f, s, err);
  }
  if (!rc) rc = norm(w, p, "output_norm", s, err);
  char nm[32];
  for (int i = 0; !rc && i < (p->n_classes > 0 ? p->n_cls_hidden : 0); i++) {
    snprintf(nm, sizeof nm, "cls.%d.weight", i);
    rc = tensor(w, nm, d, d, 0, 2.0f / sqrtf((float)d), s, err);
    snprintf(nm, sizeof nm, "cls.%d.bias", i);
    if (!rc) rc = tensor(w, nm, d, 0, 0.1f, 0.2f, s, err);
  }
  if (!rc && (p->n_classes > 0 || p->untied || p->vocab == 0))
    rc = tensor(w, "output.weight", d, n_out, 0, 1.0f / sqrtf((float)d), s, err);
  if (!rc && p->biases) rc = tensor(w, "output.bias", n_out, 0, 0, 0.2f, s, err);
  return rc;
}

int icl_write_attn_model(const char *path, const icl_attn_spec *spec, icl_error *err) {
  icl_attn_spec p = *spec;
  defaults(&p);
  uint64_t s = p.seed * 7919 + 23;
  aw w = {icl_gguf_writer_new(), p.wtype ? p.wtype : ICL_TYPE_F32};
  if (!w.g) return icl_error_set(err, ICL_ENOMEM, "attn model: out of memory");
  int rc = keys(&w, &p, err);
  if (!rc) rc = io(&w, &p, &s, err);
  for (int l = 0; !rc && l < p.n_layer; l++) rc = layer(&w, &p, l, &s, err);
  if (!rc) rc = icl_gguf_writer_save(w.g, path, err);
  icl_gguf_writer_free(w.g);
  return rc;
}
