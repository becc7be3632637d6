/* Scalar reference forward: every weight dequantized to f32, one token at a time, straight loops. */
#include "ref_forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "icl/gguf.h"
#include "ref.h"

typedef struct rf_layer {
  float *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm, *post_attn;
  float *ffn_norm, *wg, *wu, *wd, *post_ffn;
} rf_layer;

typedef struct rf_model {
  const icl_arch *arch;
  icl_hparams hp;
  int window;
  int64_t vocab;
  float *embd, *out_norm, *out;
  rf_layer *L;
} rf_model;

/* Dequantized copy of a tensor, or NULL (with *ok = 0 when required and missing). */
static float *deq(const icl_gguf *g, const char *name, int required, int *ok) {
  const icl_gguf_tensor *t = icl_gguf_find_tensor(g, name);
  if (!t) {
    if (required) *ok = 0;
    return NULL;
  }
  int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  float *f = malloc((size_t)n * sizeof *f);
  if (!f) *ok = 0;
  else icl_ref_dequant(t->type, t->data, f, n);
  return f;
}

static void free_model(rf_model *m) {
  for (int l = 0; m->L && l < m->hp.n_layer; l++) {
    float **p = (float **)&m->L[l];
    for (size_t i = 0; i < sizeof(rf_layer) / sizeof(float *); i++) free(p[i]);
  }
  free(m->L);
  free(m->embd);
  free(m->out_norm);
  if (m->out != m->embd) free(m->out);
}

static int load(const icl_gguf *g, rf_model *m, icl_error *err) {
  m->arch = icl_arch_find(icl_gguf_get_str(g, "general.architecture"));
  if (!m->arch) return icl_error_set(err, ICL_EUNSUPPORTED, "ref forward: unsupported architecture");
  int rc = icl_arch_read_hparams(g, m->arch, &m->hp, &m->window, err);
  if (rc) return rc;
  int ok = 1;
  const icl_gguf_tensor *te = icl_gguf_find_tensor(g, "token_embd.weight");
  m->vocab = te ? te->ne[1] : 0;
  m->embd = deq(g, "token_embd.weight", 1, &ok);
  m->out_norm = deq(g, "output_norm.weight", 1, &ok);
  m->out = deq(g, "output.weight", 0, &ok);
  if (!m->out) m->out = m->embd;
  m->L = calloc((size_t)m->hp.n_layer, sizeof *m->L);
  if (!m->L) return icl_error_set(err, ICL_ENOMEM, "ref forward: out of memory");
  char nm[128];
  for (int l = 0; l < m->hp.n_layer; l++) {
    rf_layer *L = &m->L[l];
#define D(f, s, req) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), L->f = deq(g, nm, req, &ok))
    D(attn_norm, "attn_norm.weight", 1); D(wq, "attn_q.weight", 1); D(wk, "attn_k.weight", 1);
    D(wv, "attn_v.weight", 1); D(wo, "attn_output.weight", 1); D(bq, "attn_q.bias", 0);
    D(bk, "attn_k.bias", 0); D(bv, "attn_v.bias", 0); D(q_norm, "attn_q_norm.weight", 0);
    D(k_norm, "attn_k_norm.weight", 0); D(post_attn, "post_attention_norm.weight", 0);
    D(ffn_norm, "ffn_norm.weight", 1); D(wg, "ffn_gate.weight", 1); D(wu, "ffn_up.weight", 1);
    D(wd, "ffn_down.weight", 1); D(post_ffn, "post_ffw_norm.weight", 0);
#undef D
  }
  if (!ok || !m->embd) return icl_error_set(err, ICL_EFORMAT, "ref forward: a required tensor is missing");
  return ICL_OK;
}

static void rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
  float s = (float)(1.0 / sqrt(ss / n + eps));
  for (int i = 0; i < n; i++) y[i] = x[i] * s * (w ? w[i] : 1.0f);
}

/* y[rows] = W[rows][cols] x[cols] (+ b) */
static void matvec(float *y, const float *W, const float *x, const float *b, int cols, int rows) {
  for (int r = 0; r < rows; r++) {
    double acc = 0;
    for (int c = 0; c < cols; c++) acc += (double)W[(int64_t)r * cols + c] * x[c];
    y[r] = (float)acc + (b ? b[r] : 0.0f);
  }
}

static void rope(float *v, int hd, int n_rot, int pos, float base, int neox) {
  for (int i = 0; i < n_rot / 2; i++) {
    double theta = pos * pow(base, -2.0 * i / n_rot);
    float c = (float)cos(theta), s = (float)sin(theta);
    int a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
    float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
  (void)hd;
}

static int zeroed(const int *zh, int nz, int l, int h) {
  for (int i = 0; i < nz; i++)
    if (zh[2 * i] == l && zh[2 * i + 1] == h) return 1;
  return 0;
}

/* One token through every layer; kc/vc are [layer][pos][kv_dim] caches. */
static void token(const rf_model *m, int32_t tok, int pos, float *kc, float *vc, int n_ctx, const int *zh, int nz,
                  float *logits, float *buf) {
  const icl_hparams *hp = &m->hp;
  int d = hp->n_embd, hd = hp->head_dim, nh = hp->n_head, nkv = hp->n_head_kv, ff = hp->n_ff;
  int qd = nh * hd, kd = nkv * hd;
  float *x = buf, *xb = x + d, *q = xb + d, *z = q + qd, *o = z + qd, *g = o + d, *u = g + ff, *att = u + ff;
  for (int i = 0; i < d; i++) x[i] = m->embd[(int64_t)tok * d + i] * (m->arch->embed_scale ? sqrtf((float)d) : 1.0f);
  for (int l = 0; l < hp->n_layer; l++) {
    const rf_layer *L = &m->L[l];
    int sliding = m->arch->swa_period && l % m->arch->swa_period < m->arch->swa_period - 1;
    float base = sliding && m->arch->swa_rope_base > 0 ? m->arch->swa_rope_base : hp->rope_base;
    int window = sliding ? m->window : 0;
    float *k = kc + ((int64_t)l * n_ctx + pos) * kd, *v = vc + ((int64_t)l * n_ctx + pos) * kd;
    rmsnorm(xb, x, L->attn_norm, d, hp->eps);
    matvec(q, L->wq, xb, L->bq, d, qd);
    matvec(k, L->wk, xb, L->bk, d, kd);
    matvec(v, L->wv, xb, L->bv, d, kd);
    for (int h = 0; h < nh; h++) {
      if (L->q_norm) rmsnorm(q + h * hd, q + h * hd, L->q_norm, hd, hp->eps);
      rope(q + h * hd, hd, hp->n_rot, pos, base, m->arch->rope_mode == 1);
    }
    for (int h = 0; h < nkv; h++) {
      if (L->k_norm) rmsnorm(k + h * hd, k + h * hd, L->k_norm, hd, hp->eps);
      rope(k + h * hd, hd, hp->n_rot, pos, base, m->arch->rope_mode == 1);
    }
    for (int h = 0; h < nh; h++) {
      int kh = h / (nh / nkv);
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j <= pos; j++) {
        const float *kj = kc + ((int64_t)l * n_ctx + j) * kd + kh * hd;
        double s = 0;
        for (int i = 0; i < hd; i++) s += (double)q[h * hd + i] * kj[i];
        att[j] = (window && pos - j >= window) ? -INFINITY : (float)(s / sqrt((double)hd));
        if (att[j] > mx) mx = att[j];
      }
      for (int j = 0; j <= pos; j++) sum += (att[j] = (float)exp(att[j] - mx));
      for (int i = 0; i < hd; i++) {
        double acc = 0;
        for (int j = 0; j <= pos; j++) acc += att[j] / sum * vc[((int64_t)l * n_ctx + j) * kd + kh * hd + i];
        z[h * hd + i] = zeroed(zh, nz, l, h) ? 0.0f : (float)acc;
      }
    }
    matvec(o, L->wo, z, NULL, qd, d);
    if (L->post_attn) rmsnorm(o, o, L->post_attn, d, hp->eps);
    for (int i = 0; i < d; i++) x[i] += o[i];
    rmsnorm(xb, x, L->ffn_norm, d, hp->eps);
    matvec(g, L->wg, xb, NULL, d, ff);
    matvec(u, L->wu, xb, NULL, d, ff);
    for (int i = 0; i < ff; i++) {
      float a = g[i];
      a = m->arch->act == ICL_ACT_GELU ? 0.5f * a * (1.0f + tanhf(0.7978845608f * (a + 0.044715f * a * a * a)))
                                        : a / (1.0f + expf(-a));
      g[i] = a * u[i];
    }
    matvec(o, L->wd, g, NULL, ff, d);
    if (L->post_ffn) rmsnorm(o, o, L->post_ffn, d, hp->eps);
    for (int i = 0; i < d; i++) x[i] += o[i];
  }
  rmsnorm(xb, x, m->out_norm, d, hp->eps);
  matvec(logits, m->out, xb, NULL, d, (int)m->vocab);
}

int icl_ref_forward(const char *path, const int32_t *tokens, int64_t n, const int *zero_heads, int n_zero,
                    float *logits, int64_t *n_vocab, icl_error *err) {
  icl_gguf *g = NULL;
  rf_model m = {0};
  int rc = icl_gguf_open(path, &g, err);
  const char *arch = rc ? NULL : icl_gguf_get_str(g, "general.architecture");
  if (arch && !strcmp(arch, "icl-attn")) {
    icl_gguf_close(g);
    return icl_ref_forward_inputs(path, tokens, n, NULL, zero_heads, n_zero, logits, n_vocab, err);
  }
  if (!rc) rc = load(g, &m, err);
  icl_gguf_close(g);
  float *kc = NULL, *vc = NULL, *buf = NULL;
  if (!rc) {
    const icl_hparams *hp = &m.hp;
    size_t kv = (size_t)hp->n_layer * (size_t)n * (size_t)(hp->n_head_kv * hp->head_dim);
    kc = malloc(kv * sizeof *kc);
    vc = malloc(kv * sizeof *vc);
    buf = malloc(((size_t)hp->n_embd * 3 + (size_t)hp->n_head * hp->head_dim * 2 + (size_t)hp->n_ff * 2 + (size_t)n) *
                 sizeof *buf);
    if (!kc || !vc || !buf) rc = icl_error_set(err, ICL_ENOMEM, "ref forward: out of memory");
  }
  for (int64_t t = 0; !rc && t < n; t++) {
    if (tokens[t] < 0 || tokens[t] >= m.vocab) {
      rc = icl_error_set(err, ICL_EINVAL, "ref forward: token %lld out of range", (long long)t);
      break;
    }
    token(&m, tokens[t], (int)t, kc, vc, (int)n, zero_heads, n_zero, logits + t * m.vocab, buf);
  }
  if (n_vocab) *n_vocab = m.vocab;
  free(kc);
  free(vc);
  free(buf);
  free_model(&m);
  return rc;
}
