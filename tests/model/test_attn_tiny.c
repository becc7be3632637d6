/* icl-attn end to end: tiny random models of each option combination (the meta-learning and Olsson configs,
 * smeared keys, RoPE, MLP) through every backend vs the scalar reference forward (src/ref_forward_attn.c),
 * chunked vs one-chunk runs and incremental evaluation, every hook point, ablation, knockout and patching,
 * and load errors that name the key. Usage: test_attn_tiny [backend]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "icl/model.h"
#include "ref.h"
#include "ref_forward.h"
#include "testmodel.h"
#include "testmodel_attn.h"
#include "testutil.h"

#define NTOK 23

typedef struct cfg {
  const char *name;
  icl_attn_spec spec;
} cfg;

static const cfg CFGS[] = {
    {"meta", {.seed = 1, .n_layer = 2, .d = 64, .n_head = 2, .input_length = 128, .inp_proj = 1, .vocab = 32,
              .norm = "none", .position = "none", .scale = 1.0f, .no_wo = 1, .n_classes = 32, .n_cls_hidden = 1}},
    {"olsson", {.seed = 2, .n_layer = 2, .d = 32, .n_head = 4, .vocab = 16, .norm = "layer", .position = "learned"}},
    {"smeared", {.seed = 3, .n_layer = 1, .d = 32, .n_head = 4, .vocab = 16, .smeared = 1, .untied = 1,
                 .biases = 1}},
    {"rope", {.seed = 4, .n_layer = 2, .d = 32, .n_head = 2, .vocab = 16, .norm = "rms", .position = "rope",
              .untied = 1, .biases = 1}},
    {"mlp", {.seed = 5, .n_layer = 2, .d = 32, .n_head = 4, .vocab = 16, .ff = 64, .biases = 1,
             .input_length = 32}},
    {"olsson-f16", {.seed = 7, .n_layer = 2, .d = 32, .n_head = 4, .vocab = 16, .wtype = ICL_TYPE_F16,
                    .smeared = 1}},
    {"rope-smeared", {.seed = 6, .n_layer = 2, .d = 32, .n_head = 4, .vocab = 16, .norm = "rms",
                      .position = "rope", .smeared = 1, .no_wo = 1, .scale = 1.0f}},
};
enum { NCFG = sizeof CFGS / sizeof CFGS[0] };

static int32_t toks[NCFG][NTOK], toks_b[NCFG][NTOK];
static float *inputs[NCFG]; /* [NTOK, input_length] or NULL */

/* F32 weights: every backend stays close to the double-accumulated reference; F16 weights: the backends may
 * round activations to f16 for the products. */
static double tol(const char *backend, int c) {
  if (CFGS[c].spec.wtype == ICL_TYPE_F16 && strcmp(backend, "ref")) return 1e-5;
  return !strcmp(backend, "ref") ? 1e-10 : 1e-8;
}

/* Tokens of config c: the meta-learning layout alternates item (-1, input vector) and label positions. */
static void make_data(int c) {
  const icl_attn_spec *p = &CFGS[c].spec;
  uint64_t s = 100 + (uint64_t)c;
  for (int i = 0; i < NTOK; i++) {
    toks[c][i] = (int32_t)(t_rand_u64(&s) % (uint64_t)p->vocab);
    toks_b[c][i] = (int32_t)(t_rand_u64(&s) % (uint64_t)p->vocab);
    if (p->input_length && p->inp_proj && i % 2 == 0) toks[c][i] = toks_b[c][i] = -1;
  }
  if (!p->input_length) return;
  inputs[c] = malloc((size_t)NTOK * (size_t)p->input_length * sizeof(float));
  t_rand_fill(inputs[c], (int64_t)NTOK * p->input_length, 7 + (uint64_t)c, -1.0f, 1.0f);
}

static icl_model *load(const char *path, const char *backend, int chunk) {
  icl_load_opts o = {.backend = backend, .device = -1, .n_ctx = 64, .chunk = chunk};
  icl_model *m = NULL;
  icl_error e = {0};
  if (icl_model_load(path, &o, &m, &e)) fprintf(stderr, "load %s on %s: %s\n", path, backend, e.msg);
  return m;
}

/* Logits of a run (all positions) with the config's inputs and extra options; keep receives the captures. */
static icl_tensor *run(icl_model *m, int c, const int32_t *t, const icl_run_opts *base, icl_run_result *keep) {
  icl_run_opts o = base ? *base : (icl_run_opts){0};
  o.inputs = inputs[c], o.inputs_width = CFGS[c].spec.input_length;
  return t_run_logits(m, t, NTOK, &o, keep, CFGS[c].name);
}

static int same(const icl_tensor *a, const icl_tensor *b) {
  return a && b && a->numel == b->numel && !memcmp(a->data, b->data, (size_t)a->numel * 4);
}

/* Logits vs the reference forward, optionally with (layer, head) pairs zeroed at hook_z. */
static void check_ref(const char *path, int c, icl_model *m, const char *backend, const int *zh, int nz,
                      const icl_run_opts *o) {
  const icl_hparams *hp = icl_model_hparams(m);
  icl_tensor *got = run(m, c, toks[c], o, NULL);
  float *want = malloc((size_t)NTOK * (size_t)hp->n_vocab * sizeof *want);
  int64_t V = 0;
  icl_error e = {0};
  int rc = icl_ref_forward_inputs(path, toks[c], NTOK, inputs[c], zh, nz, want, &V, &e);
  CHECKF(rc == 0 && V == hp->n_vocab, "%s: ref forward: %s", CFGS[c].name, e.msg);
  if (got && !rc) {
    double nm = icl_nmse(want, got->data, NTOK * V);
    CHECKF(nm < tol(backend, c), "%s on %s (%d zeroed): NMSE %.3g", CFGS[c].name, backend, nz, nm);
    printf("  %-13s %-7s zeroed %d  NMSE %.3g\n", CFGS[c].name, backend, nz, nm);
  }
  CHECK(got != NULL);
  free(want);
  icl_tensor_free(got);
}

/* Chunks of 8 vs one chunk, and incremental evaluation in pieces (3 + 9 + 11) vs one run. */
static void check_chunking(const char *path, int c, icl_model *m8, const char *backend) {
  icl_model *m1 = load(path, backend, 64);
  CHECK(m1 != NULL);
  if (!m1) return;
  int64_t V = icl_model_hparams(m8)->n_vocab;
  icl_tensor *a = run(m8, c, toks[c], NULL, NULL), *b = run(m1, c, toks[c], NULL, NULL);
  double nm = a && b ? icl_nmse(b->data, a->data, NTOK * V) : 1;
  CHECKF(nm < 1e-10, "%s on %s: chunks of 8 vs one chunk: NMSE %.3g", CFGS[c].name, backend, nm);
  if (!inputs[c]) { /* session evaluation has no inputs: only configs without them */
    icl_session *s = NULL;
    icl_error e = {0};
    float *inc = malloc((size_t)(NTOK * V) * sizeof *inc);
    int rc = icl_session_new(m1, &s, &e);
    const int cuts[] = {0, 3, 12, NTOK};
    for (int i = 0; i < 3 && !rc; i++)
      rc = icl_session_eval(s, toks[c] + cuts[i], cuts[i + 1] - cuts[i], inc + cuts[i] * V, 1, &e);
    CHECKF(rc == 0, "incremental eval: %s", e.msg);
    nm = b && !rc ? icl_nmse(b->data, inc, NTOK * V) : 1;
    CHECKF(nm < 1e-10, "%s on %s: incremental 3+9+11 vs one run: NMSE %.3g", CFGS[c].name, backend, nm);
    icl_session_free(s);
    free(inc);
  }
  icl_tensor_free(a);
  icl_tensor_free(b);
  icl_model_free(m1);
}

/* hook_k of a smeared model equals smear(W_k ln1 + b_k) computed here from the file's weights. */
static void check_smeared_k(const char *path, int c, const icl_run_result *r, const icl_hparams *hp) {
  icl_gguf *g = NULL;
  icl_error e = {0};
  if (icl_gguf_open(path, &g, &e)) return;
  const icl_gguf_tensor *wk = icl_gguf_find_tensor(g, "blk.0.attn_k.weight"),
                        *bk = icl_gguf_find_tensor(g, "blk.0.attn_k.bias"),
                        *al = icl_gguf_find_tensor(g, "blk.0.attn_smear");
  const icl_tensor *h = t_find_capture(r, "blocks.0.ln1.hook_normalized"), *k = t_find_capture(r, "blocks.0.attn.hook_k");
  int d = hp->n_embd, hd = hp->head_dim, qd = hp->n_head * hd;
  float *W = malloc((size_t)(d * qd) * sizeof *W);
  if (wk) icl_ref_dequant(wk->type, wk->data, W, (int64_t)d * qd);
  double worst = 0;
  for (int p = 0; wk && al && h && k && p < NTOK; p++)
    for (int j = 0; j < qd; j++) {
      double raw[2];
      for (int q = 0; q < 2; q++) {
        int pp = p - q < 0 ? 0 : p - q;
        double acc = bk ? ((const float *)bk->data)[j] : 0.0;
        for (int i = 0; i < d; i++) acc += (double)W[j * d + i] * h->data[pp * d + i];
        raw[q] = acc;
      }
      double keep = 1.0 / (1.0 + exp(-(double)((const float *)al->data)[j / hd]));
      worst = fmax(worst, fabs(keep * raw[0] + (1 - keep) * raw[1] - k->data[p * qd + j]));
    }
  CHECKF(wk && al && h && k && worst < 1e-4, "%s: hook_k is not the smeared key (off by %g)", CFGS[c].name, worst);
  free(W);
  icl_gguf_close(g);
}

/* The residual stream adds up: embed = resid_pre(0), resid_mid = resid_pre + attn_out, resid_post(l) =
 * resid_pre(l+1); without W_O attn_out is hook_z flattened and the results are z in the head's columns. */
static void check_stream(int c, const icl_run_result *r, const icl_hparams *hp) {
  int64_t d = hp->n_embd;
  char a[64], b[64], o[64];
  CHECK(same(t_find_capture(r, "hook_embed"), t_find_capture(r, "blocks.0.hook_resid_pre")));
  double worst = 0;
  for (int l = 0; l < hp->n_layer; l++) {
    snprintf(a, sizeof a, "blocks.%d.hook_resid_pre", l), snprintf(b, sizeof b, "blocks.%d.hook_attn_out", l);
    snprintf(o, sizeof o, "blocks.%d.hook_resid_mid", l);
    const icl_tensor *pre = t_find_capture(r, a), *ao = t_find_capture(r, b), *mid = t_find_capture(r, o);
    CHECKF(pre && ao && mid, "%s: layer %d stream points missing", CFGS[c].name, l);
    for (int64_t i = 0; pre && ao && mid && i < NTOK * d; i++)
      worst = fmax(worst, fabs(pre->data[i] + ao->data[i] - mid->data[i]));
    if (l + 1 < hp->n_layer) {
      snprintf(a, sizeof a, "blocks.%d.hook_resid_post", l), snprintf(b, sizeof b, "blocks.%d.hook_resid_pre", l + 1);
      CHECK(same(t_find_capture(r, a), t_find_capture(r, b)));
    }
  }
  CHECKF(worst < 1e-5, "%s: resid_pre + attn_out != resid_mid (%g)", CFGS[c].name, worst);
  if (!CFGS[c].spec.no_wo) return;
  const icl_tensor *z = t_find_capture(r, "blocks.0.attn.hook_z"), *ao = t_find_capture(r, "blocks.0.hook_attn_out"),
                   *res = t_find_capture(r, "blocks.0.attn.hook_result");
  CHECKF(z && ao && z->numel == ao->numel && !memcmp(z->data, ao->data, (size_t)ao->numel * 4),
         "%s: without W_O attn_out is not hook_z", CFGS[c].name);
  int nh = hp->n_head, hd = hp->head_dim, bad = 0;
  for (int64_t p = 0; res && z && p < NTOK; p++)
    for (int h = 0; h < nh; h++)
      for (int64_t i = 0; i < d; i++)
        bad += res->data[(p * nh + h) * d + i] != (i / hd == h ? z->data[p * d + i] : 0.0f);
  CHECKF(res && bad == 0, "%s: hook_result without W_O: %d entries differ", CFGS[c].name, bad);
}

/* Number of hook points the model should have. */
static int expected_points(const icl_hparams *hp) {
  /* resid_pre ln1 q k v pattern z result attn_out resid_mid resid_post, + ln2 mlp.pre mlp.post mlp_out */
  int per = 11 + (hp->n_ff > 0 ? 4 : 0);
  return 2 + hp->n_layer * per; /* + hook_embed, ln_final */
}

static void check_hooks(const char *path, int c, icl_model *m, const char *backend) {
  const icl_hparams *hp = icl_model_hparams(m);
  icl_tensor *plain = run(m, c, toks[c], NULL, NULL);
  icl_capture caps[] = {{.pattern = "hook_embed"}, {.pattern = "blocks.*.*"}, {.pattern = "blocks.*.*.*"},
                        {.pattern = "ln_final.hook_normalized"}};
  icl_run_opts oc = {.captures = caps, .n_captures = 4};
  icl_run_result rc;
  icl_tensor *cap = run(m, c, toks[c], &oc, &rc);
  CHECKF(same(plain, cap), "%s on %s: captures changed the logits", CFGS[c].name, backend);
  CHECKF(cap && rc.n_captures == expected_points(hp), "%s: %d hook points, expected %d", CFGS[c].name,
         cap ? rc.n_captures : -1, expected_points(hp));
  if (cap) {
    check_stream(c, &rc, hp);
    if (CFGS[c].spec.smeared && !(CFGS[c].spec.position && !strcmp(CFGS[c].spec.position, "rope")))
      check_smeared_k(path, c, &rc, hp);
    icl_run_result_free(&rc);
  }
  icl_capture mlp = {.pattern = "blocks.0.mlp.hook_post"};
  icl_run_opts om = {.captures = &mlp, .n_captures = 1};
  icl_run_result rm;
  icl_error e = {0};
  int got = icl_model_run(m, toks[c], NTOK, &om, &rm, &e);
  CHECKF(hp->n_ff > 0 ? got == 0 : got == ICL_EINVAL, "%s: mlp.hook_post on a model %s an MLP: rc %d",
         CFGS[c].name, hp->n_ff > 0 ? "with" : "without", got);
  if (!got) icl_run_result_free(&rm);
  icl_tensor_free(plain);
  icl_tensor_free(cap);
}

/* Zero ablation vs the reference; knockout zeroes the pattern entry; patching B's resid_pre gives B. */
static void check_interventions(const char *path, int c, icl_model *m, const char *backend) {
  int last = icl_model_hparams(m)->n_layer - 1, heads[1] = {1}, zh[2] = {last, 1};
  char hook[64];
  snprintf(hook, sizeof hook, "blocks.%d.attn.hook_z", last);
  icl_intervention iv = {.kind = ICL_IV_ZERO, .hook = hook, .heads = heads, .n_heads = 1};
  icl_run_opts oz = {.interventions = &iv, .n_interventions = 1};
  check_ref(path, c, m, backend, zh, 1, &oz);

  int64_t edges[2] = {10, 8};
  icl_intervention ivk = {.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = edges, .n_edges = 1};
  icl_capture cp = {.pattern = "blocks.0.attn.hook_pattern"};
  icl_run_opts ok = {.interventions = &ivk, .n_interventions = 1, .captures = &cp, .n_captures = 1};
  icl_run_result rk;
  icl_tensor *lk = run(m, c, toks[c], &ok, &rk);
  if (lk) {
    const float *p = rk.captures[0]->data;
    double s = 0;
    for (int k = 0; k < NTOK; k++) s += p[10 * NTOK + k];
    CHECKF(p[10 * NTOK + 8] == 0.0f && fabs(s - 1) < 1e-4, "%s: knockout", CFGS[c].name);
    icl_run_result_free(&rk);
  }
  icl_capture c0 = {.pattern = "blocks.0.hook_resid_pre"};
  icl_run_opts ob = {.captures = &c0, .n_captures = 1};
  icl_run_result rb;
  icl_tensor *lb = run(m, c, toks_b[c], &ob, &rb), *patched = NULL;
  if (lb) {
    icl_intervention ivp = {.kind = ICL_IV_PATCH, .hook = "blocks.0.hook_resid_pre", .value = rb.captures[0]};
    icl_run_opts op = {.interventions = &ivp, .n_interventions = 1};
    patched = run(m, c, toks[c], &op, NULL);
    CHECKF(same(patched, lb), "%s on %s: patching B's resid_pre does not give B", CFGS[c].name, backend);
    icl_run_result_free(&rb);
  }
  icl_tensor_free(lk), icl_tensor_free(lb), icl_tensor_free(patched);
}

static void test_config(int c, const char *backend) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-attn-%d-%s.gguf", (int)getpid(), CFGS[c].name);
  icl_error e = {0};
  int rc = icl_write_attn_model(path, &CFGS[c].spec, &e);
  CHECKF(rc == 0, "write %s: %s", CFGS[c].name, e.msg);
  icl_model *m = rc ? NULL : load(path, backend, 8);
  CHECK(m != NULL);
  if (m) {
    CHECK(icl_model_tokenizer(m) == NULL);
    check_ref(path, c, m, backend, NULL, 0, NULL);
    check_chunking(path, c, m, backend);
    check_hooks(path, c, m, backend);
    check_interventions(path, c, m, backend);
  }
  icl_model_free(m);
  unlink(path);
}

/* Bad inputs fail with messages naming the problem. */
static void test_errors(const char *backend) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-attn-%d-bad.gguf", (int)getpid());
  icl_attn_spec bad = CFGS[1].spec;
  bad.norm = "batch";
  icl_error e = {0};
  icl_model *m = NULL;
  icl_load_opts lo = {.backend = backend, .device = -1, .n_ctx = 64};
  CHECK(icl_write_attn_model(path, &bad, &e) == 0);
  CHECKF(icl_model_load(path, &lo, &m, &e) == ICL_EFORMAT && strstr(e.msg, "icl-attn.norm") &&
         strstr(e.msg, "'batch'") && strstr(e.msg, "'layer'"), "bad norm: %s", e.msg);
  lo.n_ctx = 128; /* learned positions cover 64 */
  CHECK(icl_write_attn_model(path, &CFGS[1].spec, &e) == 0);
  CHECKF(icl_model_load(path, &lo, &m, &e) == ICL_EINVAL && strstr(e.msg, "context_length"), "n_ctx: %s", e.msg);
  lo.n_ctx = 64;
  CHECK(icl_model_load(path, &lo, &m, &e) == 0);
  float in[NTOK];
  int32_t t[NTOK] = {0};
  t[3] = 16;
  icl_run_opts o = {.inputs = in, .inputs_width = 1};
  icl_run_result r;
  CHECKF(m && icl_model_run(m, t, NTOK, &o, &r, &e) == ICL_EINVAL && strstr(e.msg, "input_length"), "inputs: %s",
         e.msg);
  o.inputs = NULL;
  CHECKF(m && icl_model_run(m, t, NTOK, &o, &r, &e) == ICL_EINVAL && strstr(e.msg, "16"), "token: %s", e.msg);
  icl_model_free(m);
  /* token -1 is icl-attn's alone: a llama model rejects it */
  icl_tiny_spec ls = {.arch = "llama", .d = 64, .n_head = 2, .n_head_kv = 1, .head_dim = 32, .ff = 64, .n_layer = 1};
  t[3] = -1;
  m = NULL;
  CHECK(icl_write_tiny_model(path, &ls, &e) == 0 && icl_model_load(path, &lo, &m, &e) == 0);
  CHECKF(m && icl_model_run(m, t, NTOK, NULL, &r, &e) == ICL_EINVAL && strstr(e.msg, "tokens[4]: -1 out of range 0..257"),
         "llama token -1: %s", e.msg);
  icl_model_free(m);
  unlink(path);
}

int main(int argc, char **argv) {
  for (int c = 0; c < NCFG; c++) make_data(c);
  const char *backends[] = {"ref", "cpu", "vulkan"};
  int nb = argc > 1 ? 1 : 3;
  for (int b = 0; b < nb; b++) {
    const char *be = argc > 1 ? argv[1] : backends[b];
    if (!strcmp(be, "vulkan") && !t_vulkan_built()) {
      printf("backend vulkan: not built (-DICL_VULKAN=OFF), not tested\n");
      continue;
    }
    printf("backend %s\n", be);
    for (int c = 0; c < NCFG; c++) test_config(c, be);
    test_errors(be);
  }
  for (int c = 0; c < NCFG; c++) free(inputs[c]);
  return t_done();
}
