/* Whole tiny models: the trainer's gradients (f32, CPU backend) against central finite
 * differences of a float64 reference forward of the same model built from src/ref/ref_backward.c
 * ops, for three configurations covering every option of the trainer. Prints the relative error
 * max |g - fd| / max |fd| per parameter tensor; tolerance 1e-4 (f32 activations; measured ~1e-6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl/train.h"
#include "ref_backward.h"
#include "testutil.h"

#define TOL 1e-4
#define H 1e-6

typedef struct refm {
  icl_trainer *tr;
  const icl_attn_config *c;
  const icl_train_batch *b;
  double **p; /* per parameter, float64 copies */
  int np;
} refm;

static double *par(const refm *m, const char *fmt, int l) {
  char name[64];
  snprintf(name, sizeof name, fmt, l);
  for (int i = 0; i < m->np; i++)
    if (!strcmp(icl_trainer_param(m->tr, i, NULL, NULL, NULL), name)) return m->p[i];
  return NULL;
}

static double *dz(int64_t n) { return calloc((size_t)n, sizeof(double)); }

/* y = norm(x) per the model's kind. */
static void norm(const refm *m, const char *w, const char *b, int l, const double *x, int64_t N, double *y) {
  int64_t d = m->c->d_model;
  if (m->c->norm == ICL_NORM_LAYER) icl_refd_layer_norm(x, par(m, w, l), par(m, b, l), d, N, m->c->norm_eps, y);
  else if (m->c->norm == ICL_NORM_RMS) icl_refd_rms_norm(x, par(m, w, l), d, N, m->c->norm_eps, y);
  else memcpy(y, x, (size_t)(d * N) * sizeof *y);
}

static void embed(const refm *m, int64_t N, double *x) {
  const icl_attn_config *c = m->c;
  int64_t d = c->d_model, T = m->b->T;
  if (c->vocab > 0) icl_refd_embed(par(m, "token_embd.weight", 0), d, m->b->tokens, N, x);
  if (c->input_len > 0) {
    double *in = dz(N * c->input_len), *pr = dz(N * d);
    for (int64_t i = 0; i < N * c->input_len; i++) in[i] = m->b->inputs[i];
    if (c->inp_proj) icl_refd_matmul(par(m, "inp_proj.weight", 0), par(m, "inp_proj.bias", 0), c->input_len, d, in, N, pr);
    else memcpy(pr, in, (size_t)(N * d) * sizeof *pr);
    for (int64_t i = 0; i < N * d; i++) x[i] += pr[i];
    free(in), free(pr);
  }
  double *pos = par(m, "position_embd.weight", 0);
  for (int64_t i = 0; pos && i < N * d; i++) x[i] += pos[(i / d) % T * d + i % d];
}

static void block(const refm *m, int l, double *x, int64_t N) {
  const icl_attn_config *c = m->c;
  int64_t d = c->d_model, qd = (int64_t)c->n_head * c->d_head, ff = c->d_ff;
  double *h = dz(d * N), *q = dz(qd * N), *k = dz(qd * N), *ks = dz(qd * N), *v = dz(qd * N), *z = dz(qd * N), *o = dz(d * N);
  norm(m, "blk.%d.attn_norm.weight", "blk.%d.attn_norm.bias", l, x, N, h);
  icl_refd_matmul(par(m, "blk.%d.attn_q.weight", l), par(m, "blk.%d.attn_q.bias", l), d, qd, h, N, q);
  icl_refd_matmul(par(m, "blk.%d.attn_k.weight", l), par(m, "blk.%d.attn_k.bias", l), d, qd, h, N, k);
  icl_refd_matmul(par(m, "blk.%d.attn_v.weight", l), par(m, "blk.%d.attn_v.bias", l), d, qd, h, N, v);
  if (c->position == ICL_POS_ROPE) { /* rotate q and k in place (through ks as scratch) */
    icl_refd_rope(q, c->d_head, c->n_head, m->b->T, m->b->B, c->d_head, c->rope_base, ks);
    memcpy(q, ks, (size_t)(qd * N) * sizeof *q);
    icl_refd_rope(k, c->d_head, c->n_head, m->b->T, m->b->B, c->d_head, c->rope_base, ks);
    memcpy(k, ks, (size_t)(qd * N) * sizeof *k);
  }
  if (c->smeared_key) icl_refd_smear(k, par(m, "blk.%d.attn_smear", l), c->d_head, c->n_head, m->b->T, m->b->B, ks);
  else memcpy(ks, k, (size_t)(qd * N) * sizeof *ks);
  double scale = c->no_scale ? 1.0 : 1.0 / sqrt((double)c->d_head);
  icl_refd_attention(q, ks, v, c->d_head, c->n_head, m->b->T, m->b->B, scale, z, NULL);
  if (c->w_o) icl_refd_matmul(par(m, "blk.%d.attn_output.weight", l), par(m, "blk.%d.attn_output.bias", l), qd, d, z, N, o);
  else memcpy(o, z, (size_t)(d * N) * sizeof *o);
  for (int64_t i = 0; i < d * N; i++) x[i] += o[i];
  if (ff) {
    double *u = dz(ff * N), *a = dz(ff * N);
    norm(m, "blk.%d.ffn_norm.weight", "blk.%d.ffn_norm.bias", l, x, N, h);
    icl_refd_matmul(par(m, "blk.%d.ffn_up.weight", l), par(m, "blk.%d.ffn_up.bias", l), d, ff, h, N, u);
    icl_refd_gelu(u, ff * N, a);
    icl_refd_matmul(par(m, "blk.%d.ffn_down.weight", l), par(m, "blk.%d.ffn_down.bias", l), ff, d, a, N, o);
    for (int64_t i = 0; i < d * N; i++) x[i] += o[i];
    free(u), free(a);
  }
  free(h), free(q), free(k), free(ks), free(v), free(z), free(o);
}

/* The float64 loss of the whole model on the batch. */
static double ref_loss(const refm *m) {
  const icl_attn_config *c = m->c;
  int64_t N = m->b->B * m->b->T, d = c->d_model, nv = c->output == ICL_OUT_CLASSIFIER ? c->n_classes : c->vocab;
  double *x = dz(d * N), *h = dz(d * N), *h2 = dz(d * N), *lg = dz(nv * N), *w = dz(N);
  embed(m, N, x);
  for (int l = 0; l < c->n_layer; l++) block(m, l, x, N);
  norm(m, "output_norm.weight", "output_norm.bias", 0, x, N, h);
  for (int i = 0; c->output == ICL_OUT_CLASSIFIER && i < c->cls_hidden; i++) {
    icl_refd_matmul(par(m, "cls.%d.weight", i), par(m, "cls.%d.bias", i), d, d, h, N, h2);
    icl_refd_relu(h2, d * N, h);
  }
  icl_refd_matmul(par(m, "output.weight", 0), par(m, "output.bias", 0), d, nv, h, N, lg);
  for (int64_t i = 0; i < N; i++) w[i] = m->b->mask ? m->b->mask[i] : 1.0;
  double loss = icl_refd_xent(lg, nv, N, m->b->targets, w, NULL);
  free(x), free(h), free(h2), free(lg), free(w);
  return loss;
}

/* Random parameters (not the init: biases and norm weights away from 0 and 1), copied to float64. */
static void randomize(refm *m) {
  uint64_t s = 5;
  m->np = icl_trainer_n_params(m->tr);
  m->p = calloc((size_t)m->np, sizeof *m->p);
  for (int i = 0; i < m->np; i++) {
    float *w;
    int64_t n;
    const char *name = icl_trainer_param(m->tr, i, &w, NULL, &n);
    int nw = strstr(name, "norm.weight") != NULL;
    m->p[i] = dz(n);
    for (int64_t j = 0; j < n; j++) m->p[i][j] = w[j] = nw ? t_rand_f(&s, 0.5f, 1.5f) : t_rand_f(&s, -0.6f, 0.6f);
  }
}

static void check_model(const char *label, icl_attn_config cfg, const icl_train_batch *b) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(&cfg, 2, &tr, &err)) {
    CHECKF(0, "%s: %s", label, err.msg);
    return;
  }
  refm m = {.tr = tr, .c = icl_trainer_config(tr), .b = b};
  randomize(&m);
  double loss;
  CHECK(icl_trainer_forward(tr, b, &loss, &err) == ICL_OK);
  CHECK(icl_trainer_backward(tr, &err) == ICL_OK);
  double want = ref_loss(&m), worst = 0.0;
  printf("%s: loss %.6f (float64 reference %.6f, rel %.1e)\n", label, loss, want, fabs(loss - want) / want);
  CHECK(fabs(loss - want) / want < 1e-5);
  for (int i = 0; i < m.np; i++) {
    float *g;
    int64_t n;
    const char *name = icl_trainer_param(tr, i, NULL, &g, &n);
    double e = 0.0, mx = 1e-30;
    for (int64_t j = 0; j < n; j++) {
      double x0 = m.p[i][j];
      m.p[i][j] = x0 + H;
      double lp = ref_loss(&m);
      m.p[i][j] = x0 - H;
      double lm = ref_loss(&m);
      m.p[i][j] = x0;
      double fd = (lp - lm) / (2 * H);
      e = fabs(fd - g[j]) > e ? fabs(fd - g[j]) : e;
      mx = fabs(fd) > mx ? fabs(fd) : mx;
    }
    if (strstr(name, "attn_k.bias") && m.c->position != ICL_POS_ROPE) { /* q.b shifts a whole score row */
      printf("  %-28s %6lld  max|fd| %.2e  max|grad| %.2e (exactly 0 in exact arithmetic)\n", name, (long long)n, mx, e);
      CHECKF(mx < 1e-8 && e < 1e-6, "%s %s: key bias gradient %.3e, expected ~0", label, name, e);
      continue;
    }
    printf("  %-28s %6lld  max|grad| %.2e  rel err %.2e\n", name, (long long)n, mx, e / mx);
    CHECKF(e / mx < TOL && mx > 1e-8, "%s %s: rel err %.3e (max |fd| %.2e)", label, name, e / mx, mx);
    worst = e / mx > worst ? e / mx : worst;
  }
  for (int i = 0; i < m.np; i++) free(m.p[i]);
  printf("  worst %.2e\n", worst);
  free(m.p);
  icl_trainer_free(tr);
}

int main(void) {
  enum { B = 2, T = 5, IN = 5 };
  int32_t tok[B * T] = {1, 3, -1, 6, 0, 2, 2, 5, 4, 1}, tgt[B * T] = {3, -1, 6, 0, 2, 2, 5, 4, 1, -1};
  int32_t cls[B * T] = {0, 1, 2, -1, 1, 2, 2, 0, -1, 1};
  float mask[B * T], in[B * T * 8];
  t_rand_fill(mask, B * T, 3, 0.2f, 2.0f);
  t_rand_fill(in, B * T * 8, 4, -1.0f, 1.0f);
  icl_train_batch b1 = {.B = B, .T = T, .tokens = tok, .targets = tgt, .mask = mask};
  check_model("all options (learned pos, layer norm, W_O+bias, qkv bias, smeared key, MLP, unembed+bias, mask)",
              (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 6, .vocab = 7,
                                .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .o_bias = 1,
                                .qkv_bias = 1, .smeared_key = 1, .d_ff = 12, .out_bias = 1, .seed = 1},
              &b1);
  icl_train_batch b2 = {.B = B, .T = T, .tokens = tok, .targets = cls, .inputs = in};
  check_model("tokens + projected inputs, rms norm, no W_O, no scale, classifier 1 hidden, no positions",
              (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 5, .vocab = 7,
                                .input_len = IN, .inp_proj = 1, .norm = ICL_NORM_RMS, .no_scale = 1,
                                .output = ICL_OUT_CLASSIFIER, .n_classes = 3, .cls_hidden = 1, .seed = 2},
              &b2);
  check_model("rope, smeared key, rms norm, W_O, unembed",
              (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 5, .vocab = 7,
                                .position = ICL_POS_ROPE, .norm = ICL_NORM_RMS, .w_o = 1, .smeared_key = 1,
                                .qkv_bias = 1, .seed = 4},
              &b1);
  icl_train_batch b3 = {.B = B, .T = T, .targets = cls, .inputs = in, .mask = mask};
  check_model("inputs only (no projection), no norm, 1 head W_O, classifier 0 hidden",
              (icl_attn_config){.n_layer = 1, .n_head = 1, .d_model = 8, .d_head = 6, .n_ctx = 5, .input_len = 8,
                                .w_o = 1, .output = ICL_OUT_CLASSIFIER, .n_classes = 3, .seed = 3},
              &b3);
  return t_done();
}
