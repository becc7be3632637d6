/* Scalar reference forward of icl-attn (docs/gguf.md), one position at a time in double-accumulated loops,
 * written from the spec and independent of the backend contract: the oracle for tests/model/test_attn_tiny.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "icl/gguf.h"
#include "ref.h"
#include "ref_forward.h"

typedef struct ra_layer {
  float *n1w, *n1b, *wq, *wk, *wv, *bq, *bk, *bv, *wo, *bo, *smear, *n2w, *n2b, *wu, *bu, *wd, *bd;
} ra_layer;

typedef struct ra_model {
  icl_hparams hp;
  icl_feat f;
  float *tok, *pos, *inw, *inb, *onw, *onb, *out, *outb;
  float **cw, **cb;
  ra_layer *L;
} ra_model;

static float *get(const icl_gguf *g, const char *name) {
  const icl_gguf_tensor *t = icl_gguf_find_tensor(g, name);
  if (!t) return NULL;
  int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  float *f = malloc((size_t)n * sizeof *f);
  if (f) icl_ref_dequant(t->type, t->data, f, n);
  return f;
}

static void free_model(ra_model *m) {
  for (int l = 0; m->L && l < m->hp.n_layer; l++) {
    float **p = (float **)&m->L[l];
    for (size_t i = 0; i < sizeof(ra_layer) / sizeof(float *); i++) free(p[i]);
  }
  for (int i = 0; m->cw && i < m->f.n_cls; i++) free(m->cw[i]), free(m->cb[i]);
  free(m->cw), free(m->cb), free(m->L);
  if (m->out != m->tok) free(m->out);
  free(m->tok), free(m->pos), free(m->inw), free(m->inb), free(m->onw), free(m->onb), free(m->outb);
}

static int load(const icl_gguf *g, ra_model *m, icl_error *err) {
  int rc = icl_arch_attn_read(g, icl_arch_find("icl-attn"), &m->hp, &m->f, err);
  if (rc) return rc;
  m->tok = get(g, "token_embd.weight"), m->pos = get(g, "position_embd.weight");
  m->inw = get(g, "inp_proj.weight"), m->inb = get(g, "inp_proj.bias");
  m->onw = get(g, "output_norm.weight"), m->onb = get(g, "output_norm.bias");
  m->out = get(g, "output.weight"), m->outb = get(g, "output.bias");
  if (!m->out) m->out = m->tok;
  m->cw = calloc((size_t)m->f.n_cls + 1, sizeof *m->cw), m->cb = calloc((size_t)m->f.n_cls + 1, sizeof *m->cb);
  m->L = calloc((size_t)m->hp.n_layer, sizeof *m->L);
  if (!m->cw || !m->cb || !m->L) return icl_error_set(err, ICL_ENOMEM, "ref forward: out of memory");
  char nm[96];
  for (int i = 0; i < m->f.n_cls; i++) {
    snprintf(nm, sizeof nm, "cls.%d.weight", i), m->cw[i] = get(g, nm);
    snprintf(nm, sizeof nm, "cls.%d.bias", i), m->cb[i] = get(g, nm);
  }
  for (int l = 0; l < m->hp.n_layer; l++) {
    ra_layer *L = &m->L[l];
#define G(f, s) (snprintf(nm, sizeof nm, "blk.%d.%s", l, s), L->f = get(g, nm))
    G(n1w, "attn_norm.weight"), G(n1b, "attn_norm.bias"), G(wq, "attn_q.weight"), G(wk, "attn_k.weight");
    G(wv, "attn_v.weight"), G(bq, "attn_q.bias"), G(bk, "attn_k.bias"), G(bv, "attn_v.bias");
    G(wo, "attn_output.weight"), G(bo, "attn_output.bias"), G(smear, "attn_smear");
    G(n2w, "ffn_norm.weight"), G(n2b, "ffn_norm.bias"), G(wu, "ffn_up.weight"), G(bu, "ffn_up.bias");
    G(wd, "ffn_down.weight"), G(bd, "ffn_down.bias");
#undef G
    if (!L->wq || !L->wk || !L->wv) return icl_error_set(err, ICL_EFORMAT, "ref forward: blk.%d lacks q/k/v", l);
  }
  return ICL_OK;
}

static void normalize(const ra_model *m, float *y, const float *x, const float *w, const float *b) {
  int d = m->hp.n_embd;
  double mean = 0, var = 0;
  if (m->f.norm == ICL_NORM_LAYER)
    for (int i = 0; i < d; i++) mean += x[i] / (double)d;
  for (int i = 0; i < d; i++) var += (x[i] - mean) * (x[i] - mean) / d;
  double s = 1.0 / sqrt(var + m->hp.eps);
  for (int i = 0; i < d; i++)
    y[i] = m->f.norm == ICL_NORM_NONE ? x[i] : (float)((x[i] - mean) * s * w[i] + (b ? b[i] : 0.0));
}

/* y[rows] = W[rows][cols] x + b */
static void linear(float *y, const float *W, const float *x, const float *b, int cols, int rows) {
  for (int r = 0; r < rows; r++) {
    double acc = b ? b[r] : 0.0;
    for (int c = 0; c < cols; c++) acc += (double)W[(int64_t)r * cols + c] * x[c];
    y[r] = (float)acc;
  }
}

/* NEOX RoPE of one head's vector at position pos. */
static void rope(float *v, int n_rot, int pos, float base) {
  for (int i = 0; i < n_rot / 2; i++) {
    double th = pos * pow(base, -2.0 * i / n_rot), x0 = v[i], x1 = v[i + n_rot / 2];
    v[i] = (float)(x0 * cos(th) - x1 * sin(th));
    v[i + n_rot / 2] = (float)(x0 * sin(th) + x1 * cos(th));
  }
}

static int zeroed(const int *zh, int nz, int l, int h) {
  for (int i = 0; i < nz; i++)
    if (zh[2 * i] == l && zh[2 * i + 1] == h) return 1;
  return 0;
}

typedef struct ra_run {
  const ra_model *m;
  float *kraw, *k, *v; /* [layer][pos][qd] */
  float *x, *h, *q, *z, *o, *u, *att;
  int n;
} ra_run;

/* Attention of layer l at position pos: x += W_O z (or z). */
static void attention(ra_run *r, int l, int pos, const int *zh, int nz) {
  const ra_model *m = r->m;
  const ra_layer *L = &m->L[l];
  int d = m->hp.n_embd, nh = m->hp.n_head, hd = m->hp.head_dim, qd = nh * hd;
  float *kr = r->kraw + ((int64_t)l * r->n + pos) * qd, *k = r->k + ((int64_t)l * r->n + pos) * qd;
  float *v = r->v + ((int64_t)l * r->n + pos) * qd;
  normalize(m, r->h, r->x, L->n1w, L->n1b);
  linear(r->q, L->wq, r->h, L->bq, d, qd), linear(kr, L->wk, r->h, L->bk, d, qd), linear(v, L->wv, r->h, L->bv, d, qd);
  for (int h = 0; h < nh && m->f.pos == ICL_POS_ROPE; h++)
    rope(r->q + h * hd, m->hp.n_rot, pos, m->hp.rope_base), rope(kr + h * hd, m->hp.n_rot, pos, m->hp.rope_base);
  for (int h = 0; h < nh; h++) {
    double keep = L->smear && pos > 0 ? 1.0 / (1.0 + exp(-(double)L->smear[h])) : 1.0;
    for (int i = 0; i < hd; i++)
      k[h * hd + i] = (float)(keep * kr[h * hd + i] + (1 - keep) * (pos > 0 ? kr[h * hd + i - qd] : 0.0));
  }
  for (int h = 0; h < nh; h++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= pos; j++) {
      const float *kj = r->k + ((int64_t)l * r->n + j) * qd + h * hd;
      double s = 0;
      for (int i = 0; i < hd; i++) s += (double)r->q[h * hd + i] * kj[i];
      r->att[j] = (float)(s * m->f.attn_scale);
      mx = fmax(mx, r->att[j]);
    }
    for (int j = 0; j <= pos; j++) sum += (r->att[j] = (float)exp(r->att[j] - mx));
    for (int i = 0; i < hd; i++) {
      double acc = 0;
      for (int j = 0; j <= pos; j++) acc += r->att[j] / sum * r->v[((int64_t)l * r->n + j) * qd + h * hd + i];
      r->z[h * hd + i] = zeroed(zh, nz, l, h) ? 0.0f : (float)acc;
    }
  }
  if (L->wo) linear(r->o, L->wo, r->z, L->bo, qd, d);
  else memcpy(r->o, r->z, (size_t)d * sizeof *r->o);
  for (int i = 0; i < d; i++) r->x[i] += r->o[i];
}

static void mlp(ra_run *r, int l) {
  const ra_model *m = r->m;
  const ra_layer *L = &m->L[l];
  int d = m->hp.n_embd, ff = m->hp.n_ff;
  if (!L->wu) return;
  normalize(m, r->h, r->x, L->n2w, L->n2b);
  linear(r->u, L->wu, r->h, L->bu, d, ff);
  for (int i = 0; i < ff; i++) {
    double a = r->u[i];
    r->u[i] = (float)(0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))));
  }
  linear(r->o, L->wd, r->u, L->bd, ff, d);
  for (int i = 0; i < d; i++) r->x[i] += r->o[i];
}

/* One position: embeddings, layers, head. */
static void position(ra_run *r, int32_t tok, const float *in, int pos, const int *zh, int nz, float *logits) {
  const ra_model *m = r->m;
  int d = m->hp.n_embd, w = m->hp.input_length;
  for (int i = 0; i < d; i++) {
    double x = tok >= 0 ? m->tok[(int64_t)tok * d + i] : 0.0;
    if (m->f.pos == ICL_POS_LEARNED) x += m->pos[(int64_t)pos * d + i];
    if (w > 0 && !m->inw) x += in ? in[i] : 0.0;
    r->x[i] = (float)x;
  }
  if (w > 0 && m->inw) {
    float *p = r->o;
    for (int i = 0; i < d; i++) {
      double acc = m->inb ? m->inb[i] : 0.0;
      for (int c = 0; in && c < w; c++) acc += (double)m->inw[(int64_t)i * w + c] * in[c];
      p[i] = (float)acc;
    }
    for (int i = 0; i < d; i++) r->x[i] += p[i];
  }
  for (int l = 0; l < m->hp.n_layer; l++) attention(r, l, pos, zh, nz), mlp(r, l);
  normalize(m, r->h, r->x, m->onw, m->onb);
  for (int c = 0; c < m->f.n_cls; c++) {
    linear(r->o, m->cw[c], r->h, m->cb[c], d, d);
    for (int i = 0; i < d; i++) r->h[i] = r->o[i] > 0 ? r->o[i] : 0.0f;
  }
  linear(logits, m->out, r->h, m->outb, d, m->hp.n_vocab);
}

static int run_all(const ra_model *m, const int32_t *tokens, int64_t n, const float *inputs, const int *zh, int nz,
                   float *logits, icl_error *err) {
  int64_t qd = (int64_t)m->hp.n_head * m->hp.head_dim, d = m->hp.n_embd, kv = m->hp.n_layer * n * qd;
  int64_t scratch = 4 * d + 2 * qd + m->hp.n_ff + n;
  ra_run r = {.m = m, .n = (int)n};
  r.kraw = malloc((size_t)kv * 4), r.k = malloc((size_t)kv * 4), r.v = malloc((size_t)kv * 4);
  float *buf = malloc((size_t)scratch * 4);
  int rc = ICL_OK;
  if (!r.kraw || !r.k || !r.v || !buf) rc = icl_error_set(err, ICL_ENOMEM, "ref forward: out of memory");
  if (!rc && n > m->hp.n_ctx_train && m->f.pos == ICL_POS_LEARNED)
    rc = icl_error_set(err, ICL_EINVAL, "ref forward: %lld positions exceed context_length %d", (long long)n,
                       m->hp.n_ctx_train);
  if (buf) r.x = buf, r.h = r.x + d, r.o = r.h + d, r.q = r.o + 2 * d, r.z = r.q + qd, r.u = r.z + qd, r.att = r.u + m->hp.n_ff;
  for (int64_t t = 0; !rc && t < n; t++) {
    if (tokens[t] < -1 || tokens[t] >= m->hp.n_tokens) {
      rc = icl_error_set(err, ICL_EINVAL, "ref forward: token %lld (%d) out of range", (long long)t, tokens[t]);
      break;
    }
    const float *in = inputs ? inputs + t * m->hp.input_length : NULL;
    position(&r, tokens[t], in, (int)t, zh, nz, logits + t * m->hp.n_vocab);
  }
  free(r.kraw), free(r.k), free(r.v), free(buf);
  return rc;
}

int icl_ref_forward_inputs(const char *path, const int32_t *tokens, int64_t n, const float *inputs,
                           const int *zero_heads, int n_zero, float *logits, int64_t *n_vocab, icl_error *err) {
  icl_gguf *g = NULL;
  ra_model m = {0};
  int rc = icl_gguf_open(path, &g, err);
  if (!rc) rc = load(g, &m, err);
  icl_gguf_close(g);
  if (!rc) rc = run_all(&m, tokens, n, inputs, zero_heads, n_zero, logits, err);
  if (n_vocab) *n_vocab = m.hp.n_vocab;
  free_model(&m);
  return rc;
}
