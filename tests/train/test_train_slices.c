/* The trainer's sliced forward (train_fwd.c): sequences cut into slices, each run from the embedding to its logits
 * on its own sub-backend (run_split), then the loss on all rows; and the sliced backward (train_bwd.c): the dx chain
 * by the same slices, then every parameter sum on all rows. Every saved activation, the logits, dlogits and the loss,
 * then every gradient, dres and the per-layer gradients the sums read, must have the bits of the run as one slice,
 * for slices of unequal size (an empty one included), more slices than threads, and on 1 and 2 threads (the
 * 2-thread trainer against the 1-thread one too). Each run starts from outputs filled with NaN, so a row no slice
 * wrote fails as well as a wrong one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "testutil.h"
#include "train_internal.h"

/* The forward's outputs of a trainer as (pointer, floats) pairs. */
typedef struct outs {
  float *p[16 + 12 * TR_MAX_LAYERS];
  int64_t n[16 + 12 * TR_MAX_LAYERS];
  const char *what[16 + 12 * TR_MAX_LAYERS];
  int count;
} outs;

static void add(outs *o, const char *what, float *p, int64_t n) {
  if (!p) return;
  o->p[o->count] = p, o->n[o->count] = n, o->what[o->count++] = what;
}

static outs outputs(icl_trainer *tr) {
  const icl_attn_config *c = icl_trainer_config(tr);
  int64_t N = tr->N, d = c->d_model, qd = (int64_t)c->n_head * c->d_head, ff = c->d_ff, nv = tr_n_out(c);
  outs o = {.count = 0};
  add(&o, "residual", tr->res, d * N * (c->n_layer + 1));
  for (int l = 0; l < c->n_layer; l++) {
    tr_acts *a = &tr->A[l];
    add(&o, "h", a->h, d * N), add(&o, "q", a->q, qd * N), add(&o, "k", a->k, qd * N), add(&o, "v", a->v, qd * N);
    add(&o, "z", a->z, qd * N), add(&o, "P", a->P, tr->T * tr->T * c->n_head * tr->B);
    if (a->ks != a->k) add(&o, "ks", a->ks, qd * N);
    if (ff) add(&o, "mid", a->mid, d * N), add(&o, "h2", a->h2, d * N);
    if (ff) add(&o, "u", a->u, ff * N), add(&o, "a", a->a, ff * N);
  }
  add(&o, "hf", tr->hf, d * N);
  for (int i = 0; i < c->cls_hidden; i++) add(&o, "cls hidden", tr->ch[i], d * N);
  add(&o, "logits", tr->logits, nv * N), add(&o, "dlogits", tr->dlogits, nv * N);
  return o;
}

/* The backward's outputs: every gradient, dres, and the per-layer gradients the parameter sums read. */
static outs grads(icl_trainer *tr) {
  const icl_attn_config *c = icl_trainer_config(tr);
  int64_t N = tr->N, d = c->d_model, qd = (int64_t)c->n_head * c->d_head, ff = c->d_ff;
  outs o = {.count = 0};
  add(&o, "parameter gradients", tr->g, tr->n_floats), add(&o, "dres", tr->dres, d * N);
  add(&o, "dhf", tr->dhf, d * N);
  for (int i = 0; i < c->cls_hidden; i++) add(&o, "d cls hidden", tr->dcls[i], d * N);
  for (int l = 0; l < c->n_layer; l++) {
    tr_grads *g = &tr->G[l];
    add(&o, "r_attn", g->r_attn, d * N), add(&o, "dh", g->dh, d * N), add(&o, "dq", g->dq, qd * N);
    add(&o, "dks", g->dks, qd * N), add(&o, "dv", g->dv, qd * N);
    if (g->dk != g->dks) add(&o, "dk", g->dk, qd * N);
    if (ff) add(&o, "r_mlp", g->r_mlp, d * N), add(&o, "du", g->du, ff * N), add(&o, "dh2", g->dh2, d * N);
  }
  return o;
}

static void poison(const outs *o) {
  for (int i = 0; i < o->count; i++)
    for (int64_t j = 0; j < o->n[i]; j++) o->p[i][j] = NAN;
}

/* Copies of the outputs and the loss. */
typedef struct snap {
  float *f[16 + 12 * TR_MAX_LAYERS];
  double loss;
} snap;

static snap take(const outs *o, double loss) {
  snap s = {.loss = loss};
  for (int i = 0; i < o->count; i++) {
    s.f[i] = malloc((size_t)o->n[i] * sizeof(float));
    memcpy(s.f[i], o->p[i], (size_t)o->n[i] * sizeof(float));
  }
  return s;
}

static void drop(const outs *o, snap *s) {
  for (int i = 0; i < o->count; i++) free(s->f[i]);
}

/* Every output of o bit for bit against s; the count of differing outputs. */
static int compare(const char *label, const outs *o, const snap *s, double loss) {
  int bad = 0;
  for (int i = 0; i < o->count; i++)
    if (memcmp(o->p[i], s->f[i], (size_t)o->n[i] * sizeof(float))) {
      int64_t j = 0;
      while (!memcmp(&o->p[i][j], &s->f[i][j], sizeof(float))) j++;
      CHECKF(0, "%s: %s differs first at element %lld of %lld (%.9g, want %.9g)", label, o->what[i], (long long)j,
             (long long)o->n[i], (double)o->p[i][j], (double)s->f[i][j]);
      bad++;
    }
  CHECKF(memcmp(&loss, &s->loss, sizeof loss) == 0, "%s: loss %.17g, want %.17g", label, loss, s->loss);
  return bad;
}

static void randomize(icl_trainer *tr) {
  uint64_t seed = 11;
  for (int i = 0; i < icl_trainer_n_params(tr); i++) {
    float *w;
    int64_t n;
    const char *name = icl_trainer_param(tr, i, &w, NULL, &n);
    int nw = strstr(name, "norm.weight") != NULL;
    for (int64_t j = 0; j < n; j++) w[j] = nw ? t_rand_f(&seed, 0.5f, 1.5f) : t_rand_f(&seed, -0.6f, 0.6f);
  }
}

/* One configuration: the 1-thread trainer's single slice is the reference for every slicing on 1 and 2 threads. */
static void check_config(const char *label, icl_attn_config cfg, int64_t B, int64_t T) {
  int64_t N = B * T, in_len = cfg.input_len > 0 ? cfg.input_len : 1;
  int32_t *tok = malloc((size_t)N * sizeof *tok), *tgt = malloc((size_t)N * sizeof *tgt);
  float *mask = malloc((size_t)N * sizeof *mask), *in = malloc((size_t)(N * in_len) * sizeof *in);
  uint64_t s = 7;
  int nout = cfg.output == ICL_OUT_CLASSIFIER ? cfg.n_classes : cfg.vocab;
  for (int64_t i = 0; i < N; i++) {
    float nv = (float)(cfg.vocab > 0 ? cfg.vocab : 1);
    tok[i] = t_rand_f(&s, 0, 1) < 0.1f ? -1 : (int32_t)(t_rand_f(&s, 0, 0.999f) * nv);
    tgt[i] = t_rand_f(&s, 0, 1) < 0.15f ? -1 : (int32_t)(t_rand_f(&s, 0, 0.999f) * (float)nout);
  }
  t_rand_fill(mask, N, 3, 0.2f, 2.0f);
  t_rand_fill(in, N * in_len, 4, -1.0f, 1.0f);
  icl_train_batch batch = {.B = B, .T = T, .tokens = cfg.vocab > 0 ? tok : NULL, .targets = tgt, .mask = mask,
                           .inputs = cfg.input_len > 0 ? in : NULL};
  /* slicings of B sequences: one, unequal, an empty slice, more slices than threads, one per sequence */
  int64_t cuts[5][TR_MAX_SLICES + 1] = {{0, B}, {0, 1, B}, {0, B - 2, B - 2, B}, {0, 1, 3, B - 1, B}, {0}};
  int ncut[5] = {1, 2, 3, 4, (int)B};
  for (int64_t i = 0; i <= B; i++) cuts[4][i] = i;
  snap ref = {.loss = 0}, gref = {.loss = 0};
  outs ro = {.count = 0}, gro = {.count = 0};
  icl_trainer *tr1 = NULL;
  for (int threads = 1; threads <= 2; threads++) {
    icl_trainer *tr;
    icl_error err;
    if (icl_trainer_new(&cfg, threads, &tr, &err)) {
      CHECKF(0, "%s: %s", label, err.msg);
      break;
    }
    randomize(tr);
    double loss;
    CHECKF(icl_trainer_forward(tr, &batch, &loss, &err) == ICL_OK, "%s: %s", label, err.msg); /* sizes the buffers */
    outs o = outputs(tr);
    poison(&o);
    CHECKF(icl_trainer_forward(tr, &batch, &loss, &err) == ICL_OK, "%s: %s", label, err.msg);
    if (threads == 1) ro = o, tr1 = tr, ref = take(&o, loss); /* one slice on the backend itself: unsliced */
    int bad = 0;
    char what[160];
    snprintf(what, sizeof what, "%s, %d thread(s), default slices", label, threads);
    if (threads > 1) bad += compare(what, &o, &ref, loss);
    for (int k = 0; k < 5; k++) {
      poison(&o);
      CHECKF(tr_forward_slices(tr, ncut[k], cuts[k], &err) == ICL_OK, "%s: %s", label, err.msg);
      snprintf(what, sizeof what, "%s, %d thread(s), %d slices", label, threads, ncut[k]);
      bad += compare(what, &o, &ref, tr->loss);
    }
    int64_t wrong[3] = {0, 1, B - 1}; /* not ending at B: refused */
    CHECK(tr_forward_slices(tr, 2, wrong, &err) == ICL_EINVAL);
    /* the backward from the reference's dlogits: the 1-thread single slice is its reference */
    CHECKF(tr_forward_slices(tr, 1, cuts[0], &err) == ICL_OK, "%s: %s", label, err.msg);
    outs go = grads(tr);
    poison(&go);
    CHECKF(tr_backward(tr, &err) == ICL_OK, "%s: %s", label, err.msg);
    if (threads == 1) gref = take(&go, 0.0), gro = go;
    snprintf(what, sizeof what, "%s, %d thread(s), backward, default slices", label, threads);
    if (threads > 1) bad += compare(what, &go, &gref, 0.0);
    for (int k = 0; k < 5; k++) {
      poison(&go);
      CHECKF(tr_backward_slices(tr, ncut[k], cuts[k], &err) == ICL_OK, "%s: %s", label, err.msg);
      snprintf(what, sizeof what, "%s, %d thread(s), backward, %d slices", label, threads, ncut[k]);
      bad += compare(what, &go, &gref, 0.0);
    }
    CHECK(tr_backward_slices(tr, 2, wrong, &err) == ICL_EINVAL);
    snprintf(what, sizeof what, "%s, %d thread(s), backward refused: gradients as they were", label, threads);
    bad += compare(what, &go, &gref, 0.0);
    printf("%s, %d thread(s): %d outputs, %d gradients, %d slicings each: %d differ\n", label, threads, o.count,
           go.count, threads > 1 ? 6 : 5, bad);
    if (tr != tr1) icl_trainer_free(tr);
  }
  drop(&ro, &ref);
  drop(&gro, &gref);
  icl_trainer_free(tr1);
  free(tok), free(tgt), free(mask), free(in);
}

/* run_split itself: each item runs once, on a sub-backend (never the parent; at most one per thread), the lowest
 * failing item's error comes back; a backend without it (ref) runs the items in turn on itself. */
typedef struct probe {
  icl_backend *sub[16];
  int runs[16];
  int fail_from; /* items from this one fail; 16: none */
} probe;

static int probe_item(void *ctx, int i, icl_backend *sub, icl_error *err) {
  probe *p = ctx;
  p->sub[i] = sub, p->runs[i]++;
  return i >= p->fail_from ? icl_error_set(err, ICL_EINVAL, "item %d failed", i) : ICL_OK;
}

static void check_run_split(void) {
  icl_backend *cpu, *ref;
  icl_error err;
  if (icl_cpu_backend_new(2, &cpu, &err) || icl_ref_backend_new(&ref, &err)) {
    CHECKF(0, "backends: %s", err.msg);
    return;
  }
  CHECK(cpu->ops->run_split != NULL && ref->ops->run_split == NULL);
  for (int round = 0; round < 2; round++) { /* the second call reuses the sub-backends */
    probe p = {.fail_from = 16};
    CHECK(icl_op_run_split(cpu, 7, probe_item, &p, &err) == ICL_OK);
    icl_backend *seen[2] = {NULL, NULL};
    for (int i = 0; i < 7; i++) {
      CHECKF(p.runs[i] == 1 && p.sub[i] && p.sub[i] != cpu, "item %d: %d runs, on the parent %d", i, p.runs[i],
             p.sub[i] == cpu);
      if (p.sub[i] != seen[0] && p.sub[i] != seen[1]) {
        CHECKF(!seen[1], "item %d: a third sub-backend on 2 threads", i);
        seen[seen[0] ? 1 : 0] = p.sub[i];
      }
    }
  }
  probe f = {.fail_from = 3};
  CHECK(icl_op_run_split(cpu, 6, probe_item, &f, &err) == ICL_EINVAL);
  CHECKF(strcmp(err.msg, "item 3 failed") == 0, "error '%s', want item 3's", err.msg);
  probe r = {.fail_from = 2};
  CHECK(icl_op_run_split(ref, 5, probe_item, &r, &err) == ICL_EINVAL);
  CHECK(r.runs[0] == 1 && r.runs[1] == 1 && r.runs[2] == 1 && r.runs[3] == 0 && r.sub[0] == ref && r.sub[2] == ref);
  CHECK(icl_op_run_split(cpu, 0, probe_item, &r, &err) == ICL_EINVAL);
  cpu->ops->destroy(cpu);
  ref->ops->destroy(ref);
}

int main(void) {
  check_run_split();
  check_config("all options (learned pos, layer norm, W_O+bias, qkv bias, smeared key, MLP, unembed+bias)",
               (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 6, .vocab = 7,
                                 .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .o_bias = 1,
                                 .qkv_bias = 1, .smeared_key = 1, .d_ff = 12, .out_bias = 1, .seed = 1},
               7, 5);
  check_config("tokens + projected inputs, rms norm, no W_O, no scale, classifier 1 hidden",
               (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 5, .vocab = 7,
                                 .input_len = 5, .inp_proj = 1, .norm = ICL_NORM_RMS, .no_scale = 1,
                                 .output = ICL_OUT_CLASSIFIER, .n_classes = 3, .cls_hidden = 1, .seed = 2},
               6, 5);
  check_config("rope, smeared key, rms norm, W_O, unembed",
               (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 8, .d_head = 4, .n_ctx = 5, .vocab = 7,
                                 .position = ICL_POS_ROPE, .norm = ICL_NORM_RMS, .w_o = 1, .smeared_key = 1,
                                 .qkv_bias = 1, .seed = 4},
               5, 5);
  check_config("inputs only (no projection), no norm, 1 head W_O, classifier 0 hidden",
               (icl_attn_config){.n_layer = 1, .n_head = 1, .d_model = 8, .d_head = 6, .n_ctx = 5, .input_len = 8,
                                 .w_o = 1, .output = ICL_OUT_CLASSIFIER, .n_classes = 3, .seed = 3},
               5, 5);
  /* whole 32-row weight tiles and 8-token groups straddling the slices (9 positions): the meta bench's kind */
  check_config("d_model 64, 2 heads of 32, MLP 128, layer norm, learned pos",
               (icl_attn_config){.n_layer = 2, .n_head = 2, .d_model = 64, .d_head = 32, .n_ctx = 9, .vocab = 40,
                                 .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .d_ff = 128,
                                 .seed = 5},
               11, 9);
  check_config("the meta bench's model (d_model 128, 1 head, layer norm, learned pos, W_O), 40 sequences",
               (icl_attn_config){.n_layer = 2, .n_head = 1, .d_model = 128, .n_ctx = 9, .vocab = 64,
                                 .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .seed = 6},
               40, 9);
  return t_done();
}
