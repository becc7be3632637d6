/* The icl-attn model of the trainer: configuration checks, the parameter table (GGUF names and
 * shapes of docs/gguf.md), seeded initialisation and the activation arena. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "train_internal.h"
#include "train_rng.h"

/* The weights, gradients, moments and activations on 2 MiB boundaries with transparent huge pages asked for
 * (Linux's default THP mode, "madvise", gives none otherwise): the meta step ran ~5% faster so in paired runs
 * (docs/performance.md, session 28). The values are the same, so no bit changes. */
static void *big_alloc(size_t bytes) {
  size_t a = (size_t)2 << 20, n = bytes ? (bytes + a - 1) / a * a : a;
  void *p = aligned_alloc(a, n);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, n, MADV_HUGEPAGE); /* a request: without THP the pages are simply small */
#endif
  return p;
}

#define TR_MAX_PARAMS ((int64_t)1 << 33)
#define TR_MAX_TOKENS ((int64_t)1 << 26)

int tr_n_out(const icl_attn_config *c) { return c->output == ICL_OUT_CLASSIFIER ? c->n_classes : c->vocab; }

static int cfg_fail(icl_error *err, const char *what, long long v, const char *want) {
  return icl_error_set(err, ICL_EINVAL, "icl-attn config: %s = %lld, expected %s", what, v, want);
}

/* Each size in its range, checked before any product of sizes is formed (so none overflows). */
static int check_sizes(const icl_attn_config *c, icl_error *err) {
  if (c->n_layer < 1 || c->n_layer > TR_MAX_LAYERS) return cfg_fail(err, "layers", c->n_layer, "1..64");
  if (c->n_head < 1 || c->n_head > 1024) return cfg_fail(err, "heads", c->n_head, "1..1024");
  if (c->d_model < 1 || c->d_model > (1 << 16)) return cfg_fail(err, "d_model", c->d_model, "1..65536");
  if (c->d_head < 0 || c->d_head > 4096) return cfg_fail(err, "d_head", c->d_head, "1..4096 (0 = d_model / heads)");
  if (c->n_ctx < 1 || c->n_ctx > (1 << 24)) return cfg_fail(err, "ctx", c->n_ctx, "1..16777216");
  if (c->vocab < 0 || c->vocab > (1 << 24)) return cfg_fail(err, "vocab", c->vocab, "0..16777216");
  if (c->input_len < 0 || c->input_len > (1 << 20)) return cfg_fail(err, "inputs", c->input_len, "0..1048576");
  if (c->d_ff < 0 || c->d_ff > (1 << 20)) return cfg_fail(err, "d_ff", c->d_ff, "0..1048576 (0 = no MLP)");
  if (c->n_classes < 0 || c->n_classes > (1 << 24)) return cfg_fail(err, "classes", c->n_classes, "1..16777216");
  if (c->seed > (uint64_t)INT64_MAX) return cfg_fail(err, "seed", (long long)(c->seed >> 1), "0..2^63-1 (shown halved)");
  if (c->norm < ICL_NORM_NONE || c->norm > ICL_NORM_RMS) return cfg_fail(err, "norm", c->norm, "none, layer or rms");
  if (c->position < ICL_POS_NONE || c->position > ICL_POS_ROPE) return cfg_fail(err, "position", c->position, "none, learned or rope");
  if (c->output != ICL_OUT_UNEMBED && c->output != ICL_OUT_CLASSIFIER) return cfg_fail(err, "output", c->output, "unembed or classifier");
  return ICL_OK;
}

/* A float option: 0 takes the default, else finite and in (0, hi]. */
static int check_float(float v, const char *what, double hi, icl_error *err) {
  if (v == 0.0f || (isfinite(v) && v > 0 && v <= hi)) return ICL_OK;
  return icl_error_set(err, ICL_EINVAL, "icl-attn config: %s = %g, expected a finite number in (0, %g]", what, (double)v, hi);
}

/* Parameters of the configuration (sizes already in range, so no product overflows int64). */
static int64_t count_params(const icl_attn_config *c) {
  int64_t d = c->d_model, qd = (int64_t)c->n_head * c->d_head, nv = tr_n_out(c), in = c->input_len;
  int64_t blk = 3 * d * qd + qd * d + 6 * d + 3 * qd + c->n_head + 2 * d * c->d_ff + c->d_ff;
  return d * c->vocab + d * c->n_ctx + in * d + d + c->n_layer * blk + 2 * d + TR_MAX_CLS * (d * d + d) + d * nv + nv;
}

/* Defaults of the fields left 0, and the fields an option makes meaningless cleared. */
static void config_defaults(icl_attn_config *c) {
  if (c->d_head == 0) c->d_head = c->d_model / c->n_head;
  if (c->norm_eps == 0.0f) c->norm_eps = 1e-5f;
  if (c->init_std == 0.0f) c->init_std = 0.02f;
  if (c->output == ICL_OUT_CLASSIFIER) c->out_bias = 1; /* the classifier's final Linear has a bias */
  if (c->output != ICL_OUT_CLASSIFIER) c->n_classes = c->cls_hidden = 0;
  if (!c->w_o) c->o_bias = 0;
  if (c->input_len == 0) c->inp_proj = 0;
  if (c->position != ICL_POS_ROPE) c->rope_base = 0.0f;
  else if (c->rope_base == 0.0f) c->rope_base = 10000.0f;
}

/* The options that must agree with each other (sizes already in range). */
static int check_combination(const icl_attn_config *c, icl_error *err) {
  if (c->d_head < 1) return cfg_fail(err, "d_head", c->d_head, ">= 1 (d_model / heads is 0: more heads than d_model)");
  if (c->vocab == 0 && c->input_len == 0) return cfg_fail(err, "vocab", c->vocab, "> 0 or inputs > 0");
  if (c->input_len > 0 && !c->inp_proj && c->input_len != c->d_model)
    return cfg_fail(err, "inputs", c->input_len, "d_model without an input projection");
  if (!c->w_o && (int64_t)c->n_head * c->d_head != c->d_model)
    return cfg_fail(err, "heads*d_head", (long long)c->n_head * c->d_head, "d_model without W_O");
  if (c->position == ICL_POS_ROPE && c->d_head % 2) return cfg_fail(err, "d_head", c->d_head, "an even number with rope");
  if (c->output == ICL_OUT_CLASSIFIER && (c->n_classes < 1 || c->cls_hidden < 0 || c->cls_hidden > TR_MAX_CLS))
    return cfg_fail(err, "classes", c->n_classes, ">= 1 with 0..8 hidden layers");
  if (c->output == ICL_OUT_UNEMBED && c->vocab < 1) return cfg_fail(err, "vocab", c->vocab, "> 0 for an unembedding");
  return ICL_OK;
}

int tr_config_check(icl_attn_config *c, icl_error *err) {
  int rc = check_sizes(c, err);
  if (!rc) rc = check_float(c->norm_eps, "eps", 1.0, err);
  if (!rc) rc = check_float(c->init_std, "init_std", 100.0, err);
  if (!rc) rc = check_float(c->rope_base, "rope_base", 1e12, err);
  if (rc) return rc;
  config_defaults(c);
  if ((rc = check_combination(c, err))) return rc;
  if (count_params(c) > TR_MAX_PARAMS)
    return cfg_fail(err, "parameters", (long long)count_params(c), "<= 2^33 (the trainer keeps 4 copies in memory)");
  return ICL_OK;
}

/* Appends a parameter [ne0, ne1]; returns its index. */
static int add_param(icl_trainer *tr, int decay, int64_t ne0, int64_t ne1, const char *fmt, int layer) {
  tr_param *p = &tr->p[tr->np];
  snprintf(p->name, sizeof p->name, fmt, layer);
  p->ne[0] = ne0;
  p->ne[1] = ne1;
  p->off = tr->n_floats;
  p->decay = decay;
  tr->n_floats += (ne0 * ne1 + 15) / 16 * 16; /* 64-byte aligned tensors */
  return tr->np++;
}

/* A norm's weight and bias indices (bias for LayerNorm only). */
static void add_norm(icl_trainer *tr, const char *wname, const char *bname, int layer, int *w, int *b) {
  int64_t d = tr->cfg.d_model;
  *w = tr->cfg.norm != ICL_NORM_NONE ? add_param(tr, 0, d, 1, wname, layer) : -1;
  *b = tr->cfg.norm == ICL_NORM_LAYER ? add_param(tr, 0, d, 1, bname, layer) : -1;
}

static void add_block(icl_trainer *tr, int l) {
  const icl_attn_config *c = &tr->cfg;
  tr_layer *L = &tr->L[l];
  int64_t d = c->d_model, qd = tr->qd;
  add_norm(tr, "blk.%d.attn_norm.weight", "blk.%d.attn_norm.bias", l, &L->norm_w, &L->norm_b);
  L->wq = add_param(tr, 1, d, qd, "blk.%d.attn_q.weight", l);
  L->wk = add_param(tr, 1, d, qd, "blk.%d.attn_k.weight", l);
  L->wv = add_param(tr, 1, d, qd, "blk.%d.attn_v.weight", l);
  L->bq = c->qkv_bias ? add_param(tr, 0, qd, 1, "blk.%d.attn_q.bias", l) : -1;
  L->bk = c->qkv_bias ? add_param(tr, 0, qd, 1, "blk.%d.attn_k.bias", l) : -1;
  L->bv = c->qkv_bias ? add_param(tr, 0, qd, 1, "blk.%d.attn_v.bias", l) : -1;
  L->smear = c->smeared_key ? add_param(tr, 0, c->n_head, 1, "blk.%d.attn_smear", l) : -1;
  L->wo = c->w_o ? add_param(tr, 1, qd, d, "blk.%d.attn_output.weight", l) : -1;
  L->bo = c->w_o && c->o_bias ? add_param(tr, 0, d, 1, "blk.%d.attn_output.bias", l) : -1;
  L->ffn_norm_w = L->ffn_norm_b = L->up = L->up_b = L->down = L->down_b = -1;
  if (c->d_ff <= 0) return;
  add_norm(tr, "blk.%d.ffn_norm.weight", "blk.%d.ffn_norm.bias", l, &L->ffn_norm_w, &L->ffn_norm_b);
  L->up = add_param(tr, 1, d, c->d_ff, "blk.%d.ffn_up.weight", l);
  L->up_b = add_param(tr, 0, c->d_ff, 1, "blk.%d.ffn_up.bias", l);
  L->down = add_param(tr, 1, c->d_ff, d, "blk.%d.ffn_down.weight", l);
  L->down_b = add_param(tr, 0, d, 1, "blk.%d.ffn_down.bias", l);
}

static int wrap_arena(icl_trainer *tr, int a, void *p, size_t bytes, icl_error *err);

int tr_layout(icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model;
  tr->hd = c->d_head;
  tr->qd = c->n_head * c->d_head;
  tr->p = calloc((size_t)(16 + 17 * c->n_layer + 2 * TR_MAX_CLS), sizeof *tr->p);
  if (!tr->p) return icl_error_set(err, ICL_ENOMEM, "trainer: out of memory for the parameter table");
  tr->tok = c->vocab > 0 ? add_param(tr, 0, d, c->vocab, "token_embd.weight", 0) : -1;
  tr->pos = c->position == ICL_POS_LEARNED ? add_param(tr, 0, d, c->n_ctx, "position_embd.weight", 0) : -1;
  tr->inp_w = c->input_len > 0 && c->inp_proj ? add_param(tr, 1, c->input_len, d, "inp_proj.weight", 0) : -1;
  tr->inp_b = c->input_len > 0 && c->inp_proj ? add_param(tr, 0, d, 1, "inp_proj.bias", 0) : -1;
  for (int l = 0; l < c->n_layer; l++) add_block(tr, l);
  add_norm(tr, "output_norm.weight", "output_norm.bias", 0, &tr->onorm_w, &tr->onorm_b);
  int nh = c->output == ICL_OUT_CLASSIFIER ? c->cls_hidden : 0;
  for (int i = 0; i < nh; i++) {
    tr->cls_w[i] = add_param(tr, 1, d, d, "cls.%d.weight", i);
    tr->cls_b[i] = add_param(tr, 0, d, 1, "cls.%d.bias", i);
  }
  tr->out_w = add_param(tr, 1, d, tr_n_out(c), "output.weight", 0);
  tr->out_b = c->out_bias ? add_param(tr, 0, tr_n_out(c), 1, "output.bias", 0) : -1;
  size_t bytes = (size_t)tr->n_floats * sizeof(float);
  tr->w = big_alloc(bytes);
  tr->g = big_alloc(bytes);
  tr->m1 = big_alloc(bytes);
  tr->m2 = big_alloc(bytes);
  if (!tr->w || !tr->g || !tr->m1 || !tr->m2)
    return icl_error_set(err, ICL_ENOMEM, "trainer: out of memory for %lld parameters", (long long)tr->n_floats);
  memset(tr->w, 0, bytes);
  memset(tr->g, 0, bytes);
  memset(tr->m1, 0, bytes);
  memset(tr->m2, 0, bytes);
  float *arenas[4] = {tr->w, tr->g, tr->m1, tr->m2};
  int rc = ICL_OK;
  for (int a = 0; a < 4 && !rc; a++) rc = wrap_arena(tr, a, arenas[a], bytes, err);
  return rc;
}

/* ---- initialisation -------------------------------------------------------------------------- */

/* FNV-1a of a tensor name: each tensor draws from its own stream, so adding an option leaves
 * the other tensors' initial values unchanged. */
static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* Standard normal by Box-Muller from two uniforms in (0, 1]. */
static double normal(uint64_t *s) {
  double u1 = ((tr_splitmix(s) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double u2 = (tr_splitmix(s) >> 11) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Whether a parameter is a residual-output projection (std scaled by 1/sqrt(2 n_layer)). */
static int is_out_proj(const char *name) { return strstr(name, "attn_output.weight") || strstr(name, "ffn_down.weight"); }

void tr_init_weights(icl_trainer *tr) {
  const icl_attn_config *c = &tr->cfg;
  for (int i = 0; i < tr->np; i++) {
    const tr_param *p = &tr->p[i];
    float *w = tr->w + p->off;
    int64_t n = p->ne[0] * p->ne[1];
    int ones = strstr(p->name, "norm.weight") != NULL, zeros = strstr(p->name, "bias") || strstr(p->name, "smear");
    double std = c->init_std * (is_out_proj(p->name) ? 1.0 / sqrt(2.0 * c->n_layer) : 1.0);
    uint64_t s = c->seed ^ name_hash(p->name);
    for (int64_t j = 0; j < n; j++) w[j] = ones ? 1.0f : zeros ? 0.0f : (float)(std * normal(&s));
  }
}

/* ---- activations ------------------------------------------------------------------------------ */

/* Carves n floats (64-byte aligned) from the arena cursor. */
static float *carve(float **cur, int64_t n) {
  float *p = *cur;
  *cur += (n + 15) / 16 * 16;
  return p;
}

/* Lays out (or, with base NULL, measures) the activation arena for N tokens in sequences of T. */
static int64_t act_layout(icl_trainer *tr, float *base, int64_t N, int64_t T) {
  const icl_attn_config *c = &tr->cfg;
  int64_t d = c->d_model, qd = tr->qd, nv = tr_n_out(c), B = N / T, ff = c->d_ff;
  float *cur = base, *q0 = base;
  tr->res = carve(&cur, d * N * (c->n_layer + 1));
  for (int l = 0; l < c->n_layer; l++) {
    tr_acts *a = &tr->A[l];
    a->h = carve(&cur, d * N);
    a->q = carve(&cur, qd * N), a->k = carve(&cur, qd * N), a->v = carve(&cur, qd * N), a->z = carve(&cur, qd * N);
    a->ks = c->smeared_key ? carve(&cur, qd * N) : a->k;
    a->P = carve(&cur, T * T * c->n_head * B);
    a->mid = ff ? carve(&cur, d * N) : NULL;
    a->h2 = ff ? carve(&cur, d * N) : NULL, a->u = ff ? carve(&cur, ff * N) : NULL, a->a = ff ? carve(&cur, ff * N) : NULL;
  }
  tr->hf = carve(&cur, d * N);
  for (int i = 0; i < TR_MAX_CLS; i++) tr->ch[i] = i < c->cls_hidden ? carve(&cur, d * N) : NULL;
  tr->logits = carve(&cur, nv * N), tr->probs = carve(&cur, nv * N + N), tr->dlogits = carve(&cur, nv * N);
  int64_t wide = d > qd ? d : qd;
  wide = wide > ff ? wide : ff;
  tr->dres = carve(&cur, d * N), tr->dz = carve(&cur, qd * N);
  tr->stats = carve(&cur, 2 * N * tr_norm_slots(c)), tr->tmp = carve(&cur, wide * N);
  for (int l = 0; l < c->n_layer; l++) {
    tr_grads *g = &tr->G[l];
    g->r_mlp = ff ? carve(&cur, d * N) : NULL, g->du = ff ? carve(&cur, ff * N) : NULL;
    g->dh2 = ff ? carve(&cur, d * N) : NULL;
    g->r_attn = carve(&cur, d * N), g->dh = carve(&cur, d * N);
    g->dq = carve(&cur, qd * N), g->dks = carve(&cur, qd * N), g->dv = carve(&cur, qd * N);
    g->dk = c->smeared_key ? carve(&cur, qd * N) : g->dks;
  }
  for (int i = 0; i < TR_MAX_CLS; i++) tr->dcls[i] = i < c->cls_hidden ? carve(&cur, d * N) : NULL;
  tr->dhf = carve(&cur, d * N);
  tr->inputs = carve(&cur, (c->input_len > 0 ? c->input_len : 1) * N), tr->mask = carve(&cur, N);
  tr->tokens = (int32_t *)carve(&cur, N), tr->targets = (int32_t *)carve(&cur, N), tr->pos_ids = (int32_t *)carve(&cur, N);
  return cur - q0;
}

int tr_reserve(icl_trainer *tr, int64_t B, int64_t T, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  if (B < 1 || T < 1 || B > TR_MAX_TOKENS || T > TR_MAX_TOKENS / B)
    return icl_error_set(err, ICL_EINVAL, "train: batch of %lld x %lld positions, expected 1..2^26 in all", (long long)B,
                         (long long)T);
  int64_t N = B * T;
  /* the largest activations: patterns [T, T, heads, B] per layer, logits [n_out, N] (each fits int64 here) */
  if ((double)T * (double)N * c->n_head * c->n_layer > 0x1p36 || (double)N * tr_n_out(c) > 0x1p36)
    return icl_error_set(err, ICL_EINVAL, "train: batch of %lld x %lld positions needs more than 2^36 activations",
                         (long long)B, (long long)T);
  if (T > tr->cfg.n_ctx) return icl_error_set(err, ICL_EINVAL, "train: batch of %lld positions, model ctx is %d", (long long)T, tr->cfg.n_ctx);
  if (N > tr->cap_n || T != tr->cap_T) {
    free(tr->act);
    int64_t n = act_layout(tr, NULL, N, T);
    tr->act = big_alloc((size_t)n * sizeof(float));
    if (!tr->act) return icl_error_set(err, ICL_ENOMEM, "train: out of memory for %lld activations", (long long)n);
    memset(tr->act, 0, (size_t)n * sizeof(float));
    act_layout(tr, tr->act, N, T);
    int rc = wrap_arena(tr, 4, tr->act, (size_t)n * sizeof(float), err);
    if (rc) return rc;
    tr->cap_n = N;
    tr->cap_T = T;
  }
  tr->B = B, tr->T = T, tr->N = N;
  for (int64_t i = 0; i < N; i++) tr->pos_ids[i] = (int32_t)(i % T); /* rope: position within the sequence */
  return ICL_OK;
}

/* Wraps arena a (p, bytes) as a backend buffer, replacing an older one. */
static int wrap_arena(icl_trainer *tr, int a, void *p, size_t bytes, icl_error *err) {
  if (tr->arena_buf[a]) tr->be->ops->buf_free(tr->be, tr->arena_buf[a]);
  tr->arena_buf[a] = NULL;
  if (!tr->be->ops->buf_wrap)
    return icl_error_set(err, ICL_EUNSUPPORTED, "trainer: the %s backend cannot wrap host memory", tr->be->ops->name);
  tr->arena_bytes[a] = bytes;
  return tr->be->ops->buf_wrap(tr->be, p, bytes, &tr->arena_buf[a], err);
}

static const void *arena_base(const icl_trainer *tr, int a) {
  const void *bases[5] = {tr->w, tr->g, tr->m1, tr->m2, tr->act};
  return bases[a];
}

/* The view of p [bytes] in whichever arena holds it (buf NULL if none does: the wrapper then names the op). */
static icl_dt arena_view(const icl_trainer *tr, const void *p, size_t bytes) {
  for (int a = 0; a < 5; a++) {
    const char *base = arena_base(tr, a);
    if (base && (const char *)p >= base && (const char *)p + bytes <= base + tr->arena_bytes[a])
      return (icl_dt){.buf = tr->arena_buf[a], .offset = (size_t)((const char *)p - base), .type = ICL_TYPE_F32,
                      .ne = {1, 1, 1, 1}};
  }
  return (icl_dt){.type = ICL_TYPE_F32, .ne = {1, 1, 1, 1}};
}

icl_dt tr_view(const icl_trainer *tr, const float *p, int64_t ne0, int64_t ne1) {
  icl_dt t = arena_view(tr, p, (size_t)(ne0 * ne1) * sizeof(float));
  t.ne[0] = ne0, t.ne[1] = ne1;
  return t;
}

const icl_dt *tr_v4(tr_views *vs, const float *p, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  if (!p) return NULL;
  icl_dt *t = &vs->t[vs->n++]; /* at most 12 per call: a fixed count in the callers (train_*.c) */
  *t = arena_view(vs->tr, p, (size_t)(ne0 * ne1 * ne2 * ne3) * sizeof(float));
  t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = ne3;
  return t;
}

const icl_dt *tr_vi(tr_views *vs, const int32_t *p, int64_t n) {
  if (!p) return NULL;
  icl_dt *t = &vs->t[vs->n++];
  *t = arena_view(vs->tr, p, (size_t)n * sizeof(int32_t));
  t->type = ICL_TYPE_I32, t->ne[0] = n;
  return t;
}

/* ---- the public object ---------------------------------------------------------------------------- */

int icl_trainer_new(const icl_attn_config *cfg, int n_threads, icl_trainer **out, icl_error *err) {
  *out = NULL;
  icl_trainer *tr = calloc(1, sizeof *tr);
  if (!tr) return icl_error_set(err, ICL_ENOMEM, "trainer: out of memory");
  tr->cfg = *cfg;
  tr->opt_kind = -1;
  int rc = tr_config_check(&tr->cfg, err);
  if (!rc) rc = icl_cpu_backend_new(n_threads, &tr->be, err);
  icl_cpu_ceilings cpu = {0};
  if (!rc) rc = icl_cpu_describe(tr->be, &cpu, err); /* the thread count n_threads = 0 resolved to */
  tr->n_threads = cpu.threads;
  if (!rc) rc = tr_layout(tr, err);
  if (rc) {
    icl_trainer_free(tr);
    return rc;
  }
  tr_init_weights(tr);
  *out = tr;
  return ICL_OK;
}

void icl_trainer_free(icl_trainer *tr) {
  if (!tr) return;
  tr_run_model_drop(tr);
  for (int a = 0; a < 5; a++)
    if (tr->arena_buf[a]) tr->be->ops->buf_free(tr->be, tr->arena_buf[a]);
  if (tr->be) tr->be->ops->destroy(tr->be);
  free(tr->p), free(tr->w), free(tr->g), free(tr->m1), free(tr->m2), free(tr->act);
  free(tr);
}

const icl_attn_config *icl_trainer_config(const icl_trainer *tr) { return &tr->cfg; }
int64_t icl_trainer_steps(const icl_trainer *tr) { return tr->step; }
double icl_trainer_grad_norm(const icl_trainer *tr) { return tr->grad_norm; }
int icl_trainer_n_params(const icl_trainer *tr) { return tr->np; }

const char *icl_trainer_param(icl_trainer *tr, int i, float **data, float **grad, int64_t *n) {
  if (i < 0 || i >= tr->np) return NULL;
  if (data) tr_run_model_drop(tr), *data = tr_w(tr, i); /* writable: the caller may change the weights */
  if (grad) *grad = tr_g(tr, i);
  if (n) *n = tr->p[i].ne[0] * tr->p[i].ne[1];
  return tr->p[i].name;
}

const float *icl_trainer_param_data(const icl_trainer *tr, int i) {
  return i < 0 || i >= tr->np ? NULL : tr_w(tr, i);
}

const float *icl_trainer_logits(const icl_trainer *tr, int64_t *n_out) {
  if (n_out) *n_out = tr_n_out(&tr->cfg);
  return tr->logits;
}

const float *icl_trainer_pattern(const icl_trainer *tr, int layer, int64_t b, int64_t *T) {
  if (layer < 0 || layer >= tr->cfg.n_layer || b < 0 || b >= tr->B || tr->N == 0) return NULL;
  if (T) *T = tr->T;
  return tr->A[layer].P + b * tr->cfg.n_head * tr->T * tr->T;
}
