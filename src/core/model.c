/* Model loading: validate the file, read the architecture's hyperparameters, bind and upload every tensor
 * (weights stay quantized on the device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "model_internal.h"
#include "model_load.h"

static int track_buf(icl_model *m, icl_buf *b, icl_error *err) {
  icl_buf **nb = realloc(m->bufs, (size_t)(m->n_bufs + 1) * sizeof *nb);
  if (!nb) {
    m->be->ops->buf_free(m->be, b);
    return icl_error_set(err, ICL_ENOMEM, "out of host memory");
  }
  m->bufs = nb;
  m->bufs[m->n_bufs++] = b;
  return ICL_OK;
}

/* Uploads host bytes as a new device buffer and describes it as a view. */
static int upload(icl_model *m, const void *data, size_t nbytes, uint32_t type, const int64_t *ne, icl_dt *out,
                  icl_error *err) {
  icl_buf *b;
  int rc = m->be->ops->buf_alloc(m->be, nbytes, ICL_BUF_WEIGHT, &b, err);
  if (rc) return rc;
  if ((rc = track_buf(m, b, err))) return rc;
  if ((rc = m->be->ops->write(m->be, b, 0, data, nbytes, err))) return rc;
  *out = (icl_dt){.buf = b, .offset = 0, .type = type, .ne = {ne[0], ne[1], ne[2], ne[3]}};
  m->weight_bytes += nbytes;
  return ICL_OK;
}

/* Finds tensor `name` and checks its shape [ne0, ne1] (ne1 = 0: a vector). vec_f32: converted to f32. */
static int bind(icl_model *m, const icl_gguf *g, const char *name, int required, int64_t ne0, int64_t ne1,
                int vec_f32, icl_dt *out, icl_error *err) {
  memset(out, 0, sizeof *out);
  const icl_gguf_tensor *t = icl_gguf_find_tensor(g, name);
  if (!t) {
    if (!required) return ICL_OK;
    return icl_error_set(err, ICL_EFORMAT, "%s: missing tensor '%s' (architecture %s)", m->path, name, m->hp.arch);
  }
  int64_t want1 = ne1 ? ne1 : 1;
  if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                         m->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                         (long long)t->ne[3], (long long)ne0, (long long)want1);
  if (!vec_f32) {
    if (!icl_type_is_weight(t->type))
      return icl_error_set(err, ICL_EUNSUPPORTED, "%s: tensor '%s' has type %s, which icl cannot multiply", m->path,
                           name, icl_type_name(t->type));
    return upload(m, t->data, t->nbytes, t->type, t->ne, out, err);
  }
  int64_t n = t->ne[0] * t->ne[1];
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) return icl_error_set(err, ICL_ENOMEM, "%s: no memory for '%s'", m->path, name);
  const unsigned char *p = t->data;
  for (int64_t i = 0; i < n; i++) {
    uint16_t h;
    if (t->type == ICL_TYPE_F32) {
      memcpy(&f[i], p + 4 * i, 4);
      continue;
    }
    memcpy(&h, p + 2 * i, 2);
    if (t->type == ICL_TYPE_F16) f[i] = icl_f16_to_f32(h);
    else if (t->type == ICL_TYPE_BF16) f[i] = icl_bf16_to_f32(h);
    else {
      free(f);
      return icl_error_set(err, ICL_EUNSUPPORTED, "%s: tensor '%s' has type %s, expected F32, F16 or BF16", m->path,
                           name, icl_type_name(t->type));
    }
  }
  int64_t ne[4] = {t->ne[0], t->ne[1], 1, 1};
  int rc = upload(m, f, (size_t)n * 4, ICL_TYPE_F32, ne, out, err);
  free(f);
  return rc;
}

int icl_model_upload(icl_model *m, const void *data, size_t nbytes, uint32_t type, const int64_t *ne, icl_dt *out,
                     icl_error *err) {
  return upload(m, data, nbytes, type, ne, out, err);
}

int icl_model_bind(icl_model *m, const icl_gguf *g, const char *name, int required, int64_t ne0, int64_t ne1,
                   int vec_f32, icl_dt *out, icl_error *err) {
  return bind(m, g, name, required, ne0, ne1, vec_f32, out, err);
}

static int bind_layer(icl_model *m, const icl_gguf *g, int il, icl_error *err) {
  const icl_hparams *hp = &m->hp;
  const icl_arch *a = m->arch;
  icl_layer *L = &m->layers[il];
  int64_t d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kd = (int64_t)hp->n_head_kv * hp->head_dim;
  char nm[128];
  int rc;
#define B(field, suffix, req, n0, n1, vec)                                     \
  snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix);                           \
  if ((rc = bind(m, g, nm, req, n0, n1, vec, &L->field, err))) return rc;
  B(attn_norm, "attn_norm.weight", 1, d, 0, 1);
  B(wq, "attn_q.weight", 1, d, qd, 0);
  B(wk, "attn_k.weight", 1, d, kd, 0);
  B(wv, "attn_v.weight", 1, d, kd, 0);
  B(wo, "attn_output.weight", 1, qd, d, 0);
  B(ffn_norm, "ffn_norm.weight", 1, d, 0, 1);
  B(w_gate, "ffn_gate.weight", 1, d, hp->n_ff, 0);
  B(w_up, "ffn_up.weight", 1, d, hp->n_ff, 0);
  B(w_down, "ffn_down.weight", 1, hp->n_ff, d, 0);
  B(bq, "attn_q.bias", a->qkv_bias, qd, 0, 1);
  B(bk, "attn_k.bias", a->qkv_bias, kd, 0, 1);
  B(bv, "attn_v.bias", a->qkv_bias, kd, 0, 1);
  B(q_norm, "attn_q_norm.weight", a->qk_norm, hp->head_dim, 0, 1);
  B(k_norm, "attn_k_norm.weight", a->qk_norm, hp->head_dim, 0, 1);
  B(post_attn_norm, "post_attention_norm.weight", a->post_norms, d, 0, 1);
  B(post_ffn_norm, "post_ffw_norm.weight", a->post_norms, d, 0, 1);
#undef B
  int sliding = a->swa_period > 0 && il % a->swa_period < a->swa_period - 1;
  L->window = sliding ? m->window : 0;
  L->rope_base = sliding && a->swa_rope_base > 0 ? a->swa_rope_base : hp->rope_base;
  return ICL_OK;
}

static int bind_all(icl_model *m, const icl_gguf *g, icl_error *err) {
  const icl_hparams *hp = &m->hp;
  int rc;
  if (m->arch->from_file) return icl_model_bind_attn(m, g, err);
  if ((rc = bind(m, g, "token_embd.weight", 1, hp->n_embd, hp->n_vocab, 0, &m->tok_embd, err))) return rc;
  if ((rc = bind(m, g, "output_norm.weight", 1, hp->n_embd, 0, 1, &m->output_norm, err))) return rc;
  if ((rc = bind(m, g, "output.weight", 0, hp->n_embd, hp->n_vocab, 0, &m->output, err))) return rc;
  if (!m->output.buf) m->output = m->tok_embd; /* tied LM head */
  m->tok_table = m->tok_embd;
  m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
  if (!m->layers) return icl_error_set(err, ICL_ENOMEM, "out of host memory");
  for (int il = 0; il < hp->n_layer; il++)
    if ((rc = bind_layer(m, g, il, err))) return rc;
  return m->be->ops->sync(m->be, err);
}

/* Hyperparameters, features and tokenizer; icl-attn needs no tokenizer. */
static int read_hparams(icl_model *m, const icl_gguf *g, icl_error *err) {
  int rc;
  if (m->arch->from_file) {
    if ((rc = icl_arch_attn_read(g, m->arch, &m->hp, &m->feat, err))) return rc;
    if (icl_gguf_find_key(g, "tokenizer.ggml.tokens") < 0) return ICL_OK;
    return icl_tokenizer_from_gguf(g, &m->tok, err);
  }
  if ((rc = icl_arch_read_hparams(g, m->arch, &m->hp, &m->window, err))) return rc;
  if ((rc = icl_tokenizer_from_gguf(g, &m->tok, err))) return rc; /* the message names the file */
  const icl_gguf_tensor *te = icl_gguf_find_tensor(g, "token_embd.weight");
  if (!te) return icl_error_set(err, ICL_EFORMAT, "%s: missing tensor 'token_embd.weight'", m->path);
  /* logits cover the embedding rows (which may pad the tokenizer's vocabulary) */
  m->hp.n_vocab = m->hp.n_tokens = (int)te->ne[1];
  icl_arch_feat_fixed(m->arch, &m->hp, &m->feat);
  return ICL_OK;
}

static int read_model(icl_model *m, const icl_gguf *g, const icl_load_opts *o, icl_error *err) {
  const char *archname = icl_gguf_get_str(g, "general.architecture");
  if (!archname) return icl_error_set(err, ICL_EFORMAT, "%s: missing key 'general.architecture'", m->path);
  m->arch = icl_arch_find(archname);
  if (!m->arch)
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: general.architecture '%s' is not supported (supported: %s)",
                         m->path, archname, icl_arch_list());
  int rc = read_hparams(m, g, err);
  if (rc) return rc;
  int n_ctx = o && o->n_ctx > 0 ? o->n_ctx : (m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096);
  if (m->feat.pos == ICL_POS_LEARNED && n_ctx > m->hp.n_ctx_train)
    return icl_error_set(err, ICL_EINVAL, "%s: n_ctx %d exceeds icl-attn.context_length %d (learned positions)",
                         m->path, n_ctx, m->hp.n_ctx_train);
  m->n_ctx = n_ctx;
  m->chunk = o && o->chunk > 0 ? o->chunk : 512;
  if (m->chunk > n_ctx) m->chunk = n_ctx;
  char desc[256];
  rc = icl_backend_open(o ? o->backend : NULL, o ? o->device : -1, o ? o->n_threads : 0, &m->be, desc, sizeof desc,
                        err);
  if (rc) return icl_error_wrap(err, "%s: opening a backend", m->path);
  m->be->precision = o && o->precision == ICL_PRECISION_FAST ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
  snprintf(m->device, sizeof m->device, "%s", desc);
  return bind_all(m, g, err);
}

typedef struct load_args {
  icl_model *m;
  const icl_gguf *g;
  const icl_load_opts *o;
} load_args;

/* read_model under the file-change guard: weights are copied out of the mapping here. */
static int read_model_cb(void *ud, icl_error *err) {
  load_args *a = ud;
  return read_model(a->m, a->g, a->o, err);
}

int icl_model_load_gguf(const icl_gguf *g, const icl_load_opts *opts, icl_model **out, icl_error *err) {
  *out = NULL;
  icl_model *m = calloc(1, sizeof *m);
  if (!m) return icl_error_set(err, ICL_ENOMEM, "out of host memory");
  snprintf(m->path, sizeof m->path, "%s", icl_gguf_name(g));
  int rc = icl_gguf_guarded(g, read_model_cb, &(load_args){m, g, opts}, err);
  if (rc) {
    icl_model_free(m);
    return rc;
  }
  *out = m;
  return ICL_OK;
}

int icl_model_load(const char *path, const icl_load_opts *opts, icl_model **out, icl_error *err) {
  *out = NULL;
  icl_gguf *g = NULL;
  int rc = icl_gguf_open(path, &g, err);
  if (!rc) rc = icl_model_load_gguf(g, opts, out, err);
  icl_gguf_close(g);
  return rc;
}

void icl_model_free(icl_model *m) {
  if (!m) return;
  if (m->run_session) m->run_session_free(m->run_session);
  if (m->be) {
    for (int i = 0; i < m->n_bufs; i++) m->be->ops->buf_free(m->be, m->bufs[i]);
    m->be->ops->destroy(m->be);
  }
  free(m->bufs);
  free(m->layers);
  free(m->cls_w);
  free(m->cls_b);
  icl_tokenizer_free(m->tok);
  free(m);
}

const icl_hparams *icl_model_hparams(const icl_model *m) { return &m->hp; }
const icl_tokenizer *icl_model_tokenizer(const icl_model *m) { return m->tok; }
const char *icl_model_backend(const icl_model *m) { return m->be->ops->name; }
const char *icl_model_device(const icl_model *m) { return m->device; }

int icl_model_work_counts(const icl_model *m, icl_work_counts *out, icl_error *err) {
  memset(out, 0, sizeof *out);
  if (!m->be->ops->counts)
    return icl_error_set(err, ICL_EINVAL, "%s: the %s backend counts no dispatches (only vulkan does)", m->path,
                         m->be->ops->name);
  icl_be_counts c;
  m->be->ops->counts(m->be, &c);
  *out = (icl_work_counts){c.dispatches, c.barriers, c.submits, c.host_waits, c.bytes_read};
  return ICL_OK;
}
size_t icl_model_weight_bytes(const icl_model *m) { return m->weight_bytes; }
int icl_model_n_ctx(const icl_model *m) { return m->n_ctx; }
