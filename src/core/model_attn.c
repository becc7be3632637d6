/* Binding an icl-attn model (docs/gguf.md): optional tensors are bound by presence, and what is present must be
 * consistent with the keys (an absent W_O needs n_head*d_head == d_model, absent inp_proj needs input_length ==
 * d_model). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define TRY(x)             \
  do {                     \
    int rc_ = (x);         \
    if (rc_) return rc_;   \
  } while (0)

/* The token table with one zero row appended, the embedding of id -1 ("no token"); [d, 1] zeros without one. */
static int bind_tokens(icl_model *m, const icl_gguf *g, icl_error *err) {
  int64_t d = m->hp.n_embd, nt = m->hp.n_tokens;
  const icl_gguf_tensor *t = nt > 0 ? icl_gguf_find_tensor(g, "token_embd.weight") : NULL;
  if (t && (t->ne[0] != d || t->ne[2] != 1 || t->ne[3] != 1 || !icl_type_is_weight(t->type)))
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor 'token_embd.weight' has shape [%lld, %lld] of type %s, "
                         "expected [%lld, %lld] of a weight type", m->path, (long long)t->ne[0], (long long)t->ne[1],
                         icl_type_name(t->type), (long long)d, (long long)nt);
  uint32_t type = t ? t->type : ICL_TYPE_F32;
  size_t row = icl_type_row_bytes(type, d), bytes = row * (size_t)(nt + 1);
  unsigned char *buf = calloc(1, bytes); /* a zero row decodes to 0 in every weight type */
  if (!buf) return icl_error_set(err, ICL_ENOMEM, "%s: no memory for token_embd", m->path);
  if (t) memcpy(buf, t->data, row * (size_t)nt);
  int64_t ne[4] = {d, nt + 1, 1, 1};
  int rc = icl_model_upload(m, buf, bytes, type, ne, &m->tok_table, err);
  free(buf);
  m->tok_embd = m->tok_table;
  m->tok_embd.ne[1] = nt; /* the real rows, for a tied unembedding */
  if (nt == 0) m->tok_embd.buf = NULL;
  return rc;
}

/* sigmoid(alpha_h) and 1 - sigmoid(alpha_h) repeated over each head's d_head key elements. */
static int bind_smear(icl_model *m, const icl_gguf *g, int il, icl_layer *L, icl_error *err) {
  int64_t nh = m->hp.n_head, hd = m->hp.head_dim;
  char nm[64];
  snprintf(nm, sizeof nm, "blk.%d.attn_smear", il);
  const icl_gguf_tensor *t = icl_gguf_find_tensor(g, nm);
  if (!t) return icl_error_set(err, ICL_EFORMAT, "%s: missing tensor '%s' (icl-attn.smeared_key = true)", m->path, nm);
  if (t->ne[0] != nh || t->ne[1] != 1 || (t->type != ICL_TYPE_F32 && t->type != ICL_TYPE_F16))
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' is [%lld, %lld] %s, expected [%lld] F32 or F16", m->path,
                         nm, (long long)t->ne[0], (long long)t->ne[1], icl_type_name(t->type), (long long)nh);
  float *v = malloc((size_t)(2 * nh * hd) * sizeof *v);
  if (!v) return icl_error_set(err, ICL_ENOMEM, "%s: no memory for '%s'", m->path, nm);
  for (int64_t h = 0; h < nh; h++) {
    float a;
    uint16_t x;
    if (t->type == ICL_TYPE_F32) memcpy(&a, (const char *)t->data + 4 * h, 4);
    else memcpy(&x, (const char *)t->data + 2 * h, 2), a = icl_f16_to_f32(x);
    float keep = (float)(1.0 / (1.0 + exp(-(double)a)));
    for (int64_t i = 0; i < hd; i++) v[h * hd + i] = keep, v[nh * hd + h * hd + i] = 1.0f - keep;
  }
  int64_t ne[4] = {nh * hd, 1, 1, 1};
  int rc = icl_model_upload(m, v, (size_t)(nh * hd) * 4, ICL_TYPE_F32, ne, &L->smear_keep, err);
  if (!rc) rc = icl_model_upload(m, v + nh * hd, (size_t)(nh * hd) * 4, ICL_TYPE_F32, ne, &L->smear_prev, err);
  free(v);
  return rc;
}

static int bind_layer(icl_model *m, const icl_gguf *g, int il, icl_error *err) {
  const icl_hparams *hp = &m->hp;
  icl_layer *L = &m->layers[il];
  int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, ff = hp->n_ff;
  int nw = m->feat.norm != ICL_NORM_NONE, nb = m->feat.norm == ICL_NORM_LAYER, mlp = ff > 0;
  char nm[128];
#define B(field, suffix, req, n0, n1, vec)                  \
  snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix);         \
  TRY(icl_model_bind(m, g, nm, req, n0, n1, vec, &L->field, err));
  B(attn_norm, "attn_norm.weight", nw, d, 0, 1);
  B(attn_norm_b, "attn_norm.bias", nb, d, 0, 1);
  B(wq, "attn_q.weight", 1, d, qd, 0);
  B(wk, "attn_k.weight", 1, d, qd, 0);
  B(wv, "attn_v.weight", 1, d, qd, 0);
  B(bq, "attn_q.bias", 0, qd, 0, 1);
  B(bk, "attn_k.bias", 0, qd, 0, 1);
  B(bv, "attn_v.bias", 0, qd, 0, 1);
  B(wo, "attn_output.weight", 0, qd, d, 0);
  B(bo, "attn_output.bias", 0, d, 0, 1);
  B(ffn_norm, "ffn_norm.weight", mlp && nw, d, 0, 1);
  B(ffn_norm_b, "ffn_norm.bias", mlp && nb, d, 0, 1);
  B(w_up, "ffn_up.weight", mlp, d, ff, 0);
  B(b_up, "ffn_up.bias", 0, ff, 0, 1);
  B(w_down, "ffn_down.weight", mlp, ff, d, 0);
  B(b_down, "ffn_down.bias", 0, d, 0, 1);
#undef B
  if (!L->wo.buf && qd != d)
    return icl_error_set(err, ICL_EFORMAT, "%s: blk.%d has no attn_output.weight, so n_head*d_head (%lld) must equal "
                         "d_model (%lld)", m->path, il, (long long)qd, (long long)d);
  L->rope_base = hp->rope_base;
  return m->feat.smeared_key ? bind_smear(m, g, il, L, err) : ICL_OK;
}

static int bind_io(icl_model *m, const icl_gguf *g, icl_error *err) {
  const icl_hparams *hp = &m->hp;
  int64_t d = hp->n_embd, w = hp->input_length;
  int nw = m->feat.norm != ICL_NORM_NONE, nb = m->feat.norm == ICL_NORM_LAYER;
  TRY(bind_tokens(m, g, err));
  TRY(icl_model_bind(m, g, "position_embd.weight", m->feat.pos == ICL_POS_LEARNED, d, hp->n_ctx_train, 0,
                     &m->pos_embd, err));
  if (w > 0) {
    TRY(icl_model_bind(m, g, "inp_proj.weight", 0, w, d, 0, &m->inp_proj, err));
    TRY(icl_model_bind(m, g, "inp_proj.bias", 0, d, 0, 1, &m->inp_proj_b, err));
    if (!m->inp_proj.buf && w != d)
      return icl_error_set(err, ICL_EFORMAT, "%s: no inp_proj.weight, so icl-attn.input_length (%lld) must equal "
                           "d_model (%lld)", m->path, (long long)w, (long long)d);
  }
  TRY(icl_model_bind(m, g, "output_norm.weight", nw, d, 0, 1, &m->output_norm, err));
  TRY(icl_model_bind(m, g, "output_norm.bias", nb, d, 0, 1, &m->output_norm_b, err));
  TRY(icl_model_bind(m, g, "output.weight", 0, d, hp->n_vocab, 0, &m->output, err));
  TRY(icl_model_bind(m, g, "output.bias", 0, hp->n_vocab, 0, 1, &m->output_b, err));
  if (!m->output.buf) m->output = m->tok_embd; /* tied (arch_attn.c checked that there is a token table) */
  return ICL_OK;
}

static int bind_classifier(icl_model *m, const icl_gguf *g, icl_error *err) {
  int n = m->feat.n_cls;
  int64_t d = m->hp.n_embd;
  m->cls_w = calloc((size_t)n + 1, sizeof *m->cls_w);
  m->cls_b = calloc((size_t)n + 1, sizeof *m->cls_b);
  if (!m->cls_w || !m->cls_b) return icl_error_set(err, ICL_ENOMEM, "out of host memory");
  char nm[64];
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "cls.%d.weight", i);
    TRY(icl_model_bind(m, g, nm, 1, d, d, 0, &m->cls_w[i], err));
    snprintf(nm, sizeof nm, "cls.%d.bias", i);
    TRY(icl_model_bind(m, g, nm, 1, d, 0, 1, &m->cls_b[i], err));
  }
  return ICL_OK;
}

int icl_model_bind_attn(icl_model *m, const icl_gguf *g, icl_error *err) {
  TRY(bind_io(m, g, err));
  TRY(bind_classifier(m, g, err));
  m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
  if (!m->layers) return icl_error_set(err, ICL_ENOMEM, "out of host memory");
  for (int il = 0; il < m->hp.n_layer; il++) TRY(bind_layer(m, g, il, err));
  return m->be->ops->sync(m->be, err);
}
