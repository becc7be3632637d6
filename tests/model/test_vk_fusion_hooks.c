/* Hooks keep working under the Vulkan fusions (issue 37): on tiny llama, qwen2 and gemma3 models on lavapipe,
 * capturing any one hook point of every layer, or intervening at the points a fusion would hide, gives the same
 * captures and logits bit for bit with the fused ops as without them (ICL_VK_FUSION=0). A fusion that hid a point
 * it should have given up (or computed it differently) fails here. Each fused run is also compared, within
 * rounding, with the CPU backend (no fused ops), so a point the forward pass skips on both Vulkan paths fails too;
 * the points a folded post-norm add bypasses are also judged by an equivalent intervention at a point it does not
 * bypass (check_folded_post_points: the forward pass makes that decision alike on every backend). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "testmodel.h"
#include "testutil.h"

static const int32_t TOKS[] = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 40, 41};
enum { NTOK = sizeof TOKS / sizeof TOKS[0] };

static icl_model *load(const char *path, int fused, const char *backend) {
  icl_error e = {0};
  icl_model *m = NULL;
  icl_load_opts lo = {.backend = backend, .device = -1, .n_ctx = 32, .chunk = 16};
  if (fused) unsetenv("ICL_VK_FUSION");
  else setenv("ICL_VK_FUSION", "0", 1);
  int rc = icl_model_load(path, &lo, &m, &e);
  unsetenv("ICL_VK_FUSION");
  CHECKF(rc == 0, "%s: %s", path, e.msg);
  return rc ? NULL : m;
}

static int same_tensor(const icl_tensor *a, const icl_tensor *b) {
  return a && b && a->numel == b->numel && memcmp(a->data, b->data, (size_t)a->numel * sizeof(float)) == 0;
}

/* a close to b: both present, same size, within 1e-3 of the largest magnitude (another backend's rounding) */
static int close_tensor(const icl_tensor *a, const icl_tensor *b) {
  if (!a || !b || a->numel != b->numel) return 0;
  double worst = 0.0, scale = 1e-6;
  for (int64_t i = 0; i < a->numel; i++) {
    double d = fabs((double)a->data[i] - (double)b->data[i]);
    worst = d > worst ? d : worst;
    scale = fabs(b->data[i]) > scale ? fabs(b->data[i]) : scale;
  }
  return worst <= 1e-3 * scale;
}

/* The fused run against the CPU backend's (which has no fused ops): a hook point the forward pass skipped or an
 * intervention it did not apply, on both Vulkan paths alike, shows up here. */
static void compare_cpu(icl_model *mc, const icl_run_result *rf, const icl_run_opts *o, const char *arch,
                        const char *what, int64_t n) {
  icl_run_result rc_ = {0};
  icl_error e = {0};
  int rc = icl_model_run(mc, TOKS, n, o, &rc_, &e);
  CHECKF(rc == 0, "%s %s (cpu, %lld tokens): %s", arch, what, (long long)n, e.msg);
  if (!rc) {
    CHECKF(close_tensor(rf->logits, rc_.logits), "%s %s, %lld tokens: logits differ vulkan/cpu", arch, what,
           (long long)n);
    for (int i = 0; i < rf->n_captures && i < rc_.n_captures; i++)
      CHECKF(close_tensor(rf->captures[i], rc_.captures[i]), "%s %s, %lld tokens: capture %s differs vulkan/cpu", arch,
             what, (long long)n, rf->names[i]);
  }
  icl_run_result_free(&rc_);
}

static icl_model *g_cpu; /* the current architecture's model on the CPU backend */

static void compare_n(icl_model *mf, icl_model *mu, const icl_run_opts *o, const char *arch, const char *what,
                      int64_t n) {
  icl_run_result rf = {0}, ru = {0};
  icl_error e = {0};
  int rc = icl_model_run(mf, TOKS, n, o, &rf, &e);
  CHECKF(rc == 0, "%s %s (fused, %lld tokens): %s", arch, what, (long long)n, e.msg);
  if (!rc) rc = icl_model_run(mu, TOKS, n, o, &ru, &e);
  CHECKF(rc == 0, "%s %s (unfused, %lld tokens): %s", arch, what, (long long)n, e.msg);
  if (!rc) {
    CHECKF(same_tensor(rf.logits, ru.logits), "%s %s, %lld tokens: logits differ fused/unfused", arch, what, (long long)n);
    CHECKF(rf.n_captures == ru.n_captures && (o->n_captures == 0 || rf.n_captures > 0), "%s %s: %d and %d captures",
           arch, what, rf.n_captures, ru.n_captures);
    for (int i = 0; i < rf.n_captures && i < ru.n_captures; i++)
      CHECKF(same_tensor(rf.captures[i], ru.captures[i]), "%s %s, %lld tokens: capture %s differs fused/unfused", arch,
             what, (long long)n, rf.names[i]);
    if (g_cpu) compare_cpu(g_cpu, &rf, o, arch, what, n);
  }
  icl_run_result_free(&rf);
  icl_run_result_free(&ru);
}

/* One run on both models with the same options, over all tokens (the tiled matmuls) and over one token (the
 * mat-vecs, where q, k, v and gate, up are grouped); captures and all logits compared bit for bit. */
static void compare(icl_model *mf, icl_model *mu, const icl_run_opts *o, const char *arch, const char *what) {
  compare_n(mf, mu, o, arch, what, NTOK);
  compare_n(mf, mu, o, arch, what, 1);
}

static const icl_tensor *find(const icl_run_result *r, const char *name) {
  for (int i = 0; i < r->n_captures; i++)
    if (strcmp(r->names[i], name) == 0) return r->captures[i];
  return NULL;
}

/* |a - (hi - lo)| small against the values' size, element by element */
static void check_difference(const icl_tensor *a, const icl_tensor *hi, const icl_tensor *lo, const char *what) {
  CHECKF(a && hi && lo && a->numel == hi->numel && a->numel == lo->numel, "%s: captures missing", what);
  if (!a || !hi || !lo || a->numel != hi->numel || a->numel != lo->numel) return;
  double worst = 0.0, scale = 1e-6;
  for (int64_t i = 0; i < a->numel; i++) {
    double d = fabs((double)a->data[i] - ((double)hi->data[i] - (double)lo->data[i]));
    worst = d > worst ? d : worst;
    scale = fabs(a->data[i]) > scale ? fabs(a->data[i]) : scale;
  }
  CHECKF(worst <= 1e-4 * scale, "%s: differs from the residual stream's step by %g (values up to %g)", what, worst,
         scale);
}

/* The points the fusions bypass are still computed when asked for: each sublayer output is the residual stream's
 * step across it, and zeroing it leaves the stream unchanged, bit for bit (on the fused backend; the other runs
 * above show the unfused backend agrees). */
static void check_bypassed_points(icl_model *m, const char *arch) {
  icl_capture c[] = {{.pattern = "blocks.*.hook_resid_pre"}, {.pattern = "blocks.*.hook_resid_mid"},
                     {.pattern = "blocks.*.hook_resid_post"}, {.pattern = "blocks.*.hook_attn_out"},
                     {.pattern = "blocks.*.hook_mlp_out"}};
  for (int64_t n = 1; n <= NTOK; n += NTOK - 1) {
    icl_run_opts o = {.logits = ICL_LOGITS_LAST, .captures = c, .n_captures = 5};
    icl_run_result r = {0};
    icl_error e = {0};
    CHECKF(icl_model_run(m, TOKS, n, &o, &r, &e) == 0, "%s: %s", arch, e.msg);
    char what[96];
    for (int l = 0; l < 2; l++) {
      char pre[64], mid[64], post[64], ao[64], mo[64];
      snprintf(pre, sizeof pre, "blocks.%d.hook_resid_pre", l), snprintf(mid, sizeof mid, "blocks.%d.hook_resid_mid", l);
      snprintf(post, sizeof post, "blocks.%d.hook_resid_post", l), snprintf(ao, sizeof ao, "blocks.%d.hook_attn_out", l);
      snprintf(mo, sizeof mo, "blocks.%d.hook_mlp_out", l);
      snprintf(what, sizeof what, "%s %s, %lld tokens", arch, ao, (long long)n);
      check_difference(find(&r, ao), find(&r, mid), find(&r, pre), what);
      snprintf(what, sizeof what, "%s %s, %lld tokens", arch, mo, (long long)n);
      check_difference(find(&r, mo), find(&r, post), find(&r, mid), what);
    }
    icl_run_result_free(&r);
    icl_intervention iv = {.kind = ICL_IV_ZERO, .hook = "blocks.0.hook_attn_out"};
    o.interventions = &iv, o.n_interventions = 1;
    CHECKF(icl_model_run(m, TOKS, n, &o, &r, &e) == 0, "%s: %s", arch, e.msg);
    CHECKF(same_tensor(find(&r, "blocks.0.hook_resid_pre"), find(&r, "blocks.0.hook_resid_mid")),
           "%s, %lld tokens: zeroing blocks.0.hook_attn_out changed the residual stream", arch, (long long)n);
    icl_run_result_free(&r);
  }
}


static int all_zero(const icl_tensor *t) {
  for (int64_t i = 0; t && i < t->numel; i++)
    if (t->data[i] != 0.0f) return 0;
  return 1;
}

/* The folded norms' points (and q, k), judged without the forward pass's own decisions (every backend runs the same
 * forward.c): a captured norm output is computed (not left zero), and zeroing it zeroes the sublayer, so the
 * residual stream is unchanged across it, bit for bit (no bias on that path: llama and gemma3 for ln1, all three
 * for ln2; gemma3's post-norms). */
static void check_norm_points(icl_model *m, const char *arch) {
  int gemma = strcmp(arch, "gemma3") == 0, ln1_clean = strcmp(arch, "qwen2") != 0;
  struct { const char *hook, *before, *after; int on; } zs[] = {
      {"blocks.0.ln1.hook_normalized", "blocks.0.hook_resid_pre", "blocks.0.hook_resid_mid", ln1_clean},
      {"blocks.1.ln2.hook_normalized", "blocks.1.hook_resid_mid", "blocks.1.hook_resid_post", 1},
      {"blocks.1.ln1_post.hook_normalized", "blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid", gemma},
      {"blocks.0.ln2_post.hook_normalized", "blocks.0.hook_resid_mid", "blocks.0.hook_resid_post", gemma}};
  icl_capture c[] = {{.pattern = "blocks.*.hook_resid_pre"}, {.pattern = "blocks.*.hook_resid_mid"},
                     {.pattern = "blocks.*.hook_resid_post"}, {.pattern = "blocks.*.ln1.hook_normalized"},
                     {.pattern = "blocks.*.ln2.hook_normalized"}, {.pattern = "blocks.*.attn.hook_q"},
                     {.pattern = "blocks.*.attn.hook_k"}};
  for (int64_t n = 1; n <= NTOK; n += NTOK - 1) {
    icl_run_opts o = {.logits = ICL_LOGITS_LAST, .captures = c, .n_captures = 7};
    icl_run_result r = {0};
    icl_error e = {0};
    CHECKF(icl_model_run(m, TOKS, n, &o, &r, &e) == 0, "%s: %s", arch, e.msg);
    /* (q and k: gemma3's q/k norms with RoPE) */
    const char *norms[] = {"blocks.0.ln1.hook_normalized", "blocks.1.ln2.hook_normalized", "blocks.0.attn.hook_q",
                           "blocks.1.attn.hook_k"};
    for (int i = 0; i < 4; i++)
      CHECKF(find(&r, norms[i]) && !all_zero(find(&r, norms[i])), "%s, %lld tokens: %s not computed", arch,
             (long long)n, norms[i]);
    icl_run_result_free(&r);
    for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
      if (!zs[i].on) continue;
      icl_intervention iv = {.kind = ICL_IV_ZERO, .hook = zs[i].hook};
      o.interventions = &iv, o.n_interventions = 1;
      CHECKF(icl_model_run(m, TOKS, n, &o, &r, &e) == 0, "%s: %s", arch, e.msg);
      CHECKF(same_tensor(find(&r, zs[i].before), find(&r, zs[i].after)),
             "%s, %lld tokens: zeroing %s left %s != %s", arch, (long long)n, zs[i].hook, zs[i].after, zs[i].before);
      icl_run_result_free(&r);
    }
  }
}

/* The points a decoded token's folded post-norm add bypasses (add_rms_matmul_*: gemma3), judged without the forward
 * pass's own decisions: an intervention there must equal, within rounding, one at a point it does not bypass that
 * enters the residual stream the same way (adding v to resid_mid is adding it to attn_out; zeroing the next norm's
 * output zeroes the sublayer). Only ln_final is captured (a resid capture would turn the fold off), the fold's one
 * token and a whole prompt. A fold that skipped the point (on every backend alike) fails here. */
static void check_folded_post_points(icl_model *m, const char *arch) {
  int gemma = strcmp(arch, "gemma3") == 0, ln1_clean = strcmp(arch, "qwen2") != 0;
  icl_tensor *v = icl_tensor_new(1, (int64_t[]){icl_model_hparams(m)->n_embd});
  for (int64_t i = 0; v && i < v->numel; i++) v->data[i] = 0.5f * (float)(i % 5) - 1.0f;
  struct { icl_intervention a, b; int on; } pairs[] = {
      {{.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_mid", .value = v, .coef = 1.0f},
       {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_attn_out", .value = v, .coef = 1.0f}, 1},
      {{.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_post", .value = v, .coef = 1.0f},
       {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_mlp_out", .value = v, .coef = 1.0f}, 1},
      {{.kind = ICL_IV_ADD, .hook = "blocks.1.hook_resid_pre", .value = v, .coef = 1.0f},
       {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_mlp_out", .value = v, .coef = 1.0f}, 1},
      {{.kind = ICL_IV_ADD, .hook = "blocks.0.ln1_post.hook_normalized", .value = v, .coef = 1.0f},
       {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_attn_out", .value = v, .coef = 1.0f}, gemma},
      {{.kind = ICL_IV_ADD, .hook = "blocks.0.ln2_post.hook_normalized", .value = v, .coef = 1.0f},
       {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_mlp_out", .value = v, .coef = 1.0f}, gemma},
      {{.kind = ICL_IV_ZERO, .hook = "blocks.0.ln2.hook_normalized"},
       {.kind = ICL_IV_ZERO, .hook = "blocks.0.hook_mlp_out"}, 1},
      {{.kind = ICL_IV_ZERO, .hook = "blocks.1.ln1.hook_normalized"},
       {.kind = ICL_IV_ZERO, .hook = "blocks.1.hook_attn_out"}, ln1_clean},
  };
  icl_capture c = {.pattern = "ln_final.hook_normalized"};
  for (size_t i = 0; v && i < sizeof pairs / sizeof pairs[0]; i++) {
    if (!pairs[i].on) continue;
    for (int64_t n = 1; n <= NTOK; n += NTOK - 1) {
      icl_run_result ra = {0}, rb = {0};
      icl_error e = {0};
      icl_run_opts o = {.logits = ICL_LOGITS_LAST, .captures = &c, .n_captures = 1,
                        .interventions = &pairs[i].a, .n_interventions = 1};
      int rc = icl_model_run(m, TOKS, n, &o, &ra, &e);
      o.interventions = &pairs[i].b;
      if (!rc) rc = icl_model_run(m, TOKS, n, &o, &rb, &e);
      CHECKF(rc == 0, "%s %s: %s", arch, pairs[i].a.hook, e.msg);
      CHECKF(rc || (close_tensor(ra.captures[0], rb.captures[0]) && close_tensor(ra.logits, rb.logits)),
             "%s, %lld tokens: the intervention at %s differs from the same at %s", arch, (long long)n,
             pairs[i].a.hook, pairs[i].b.hook);
      icl_run_result_free(&ra), icl_run_result_free(&rb);
    }
  }
  icl_tensor_free(v);
}

static void check_arch(const char *arch) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-fusion-hooks-%d-%s.gguf", (int)getpid(), arch);
  icl_tiny_spec sp = {.arch = arch, .wtype = ICL_TYPE_Q8_0, .seed = 5, .n_layer = 2};
  icl_error e = {0};
  CHECKF(icl_write_tiny_model(path, &sp, &e) == 0, "%s: %s", arch, e.msg);
  icl_model *mf = load(path, 1, "vulkan"), *mu = load(path, 0, "vulkan");
  g_cpu = load(path, 1, "cpu");
  unlink(path);
  if (!mf || !mu || !g_cpu) {
    icl_model_free(mf), icl_model_free(mu), icl_model_free(g_cpu);
    g_cpu = NULL;
    return;
  }
  static const char *POINTS[] = {
      "hook_embed",           "blocks.*.hook_resid_pre",  "blocks.*.ln1.hook_normalized", "blocks.*.attn.hook_q",
      "blocks.*.attn.hook_k", "blocks.*.attn.hook_v",     "blocks.*.attn.hook_pattern",   "blocks.*.attn.hook_z",
      "blocks.*.attn.hook_result", "blocks.*.hook_attn_out", "blocks.*.hook_resid_mid", "blocks.*.ln2.hook_normalized",
      "blocks.*.mlp.hook_pre", "blocks.*.mlp.hook_post",  "blocks.*.hook_mlp_out",        "blocks.*.hook_resid_post",
      "ln_final.hook_normalized"};
  check_bypassed_points(mf, arch);
  check_norm_points(mf, arch);
  check_folded_post_points(mf, arch);
  icl_run_opts plain = {.logits = ICL_LOGITS_ALL};
  compare(mf, mu, &plain, arch, "no hooks");
  size_t n_points = sizeof POINTS / sizeof POINTS[0] + (strcmp(arch, "gemma3") == 0 ? 2 : 0);
  for (size_t i = 0; i < n_points; i++) {
    static const char *POST[] = {"blocks.*.ln1_post.hook_normalized", "blocks.*.ln2_post.hook_normalized"};
    icl_capture c = {.pattern = i < sizeof POINTS / sizeof POINTS[0] ? POINTS[i] : POST[i - sizeof POINTS / sizeof POINTS[0]]};
    icl_run_opts o = {.logits = ICL_LOGITS_ALL, .captures = &c, .n_captures = 1};
    compare(mf, mu, &o, arch, c.pattern);
  }
  /* interventions at the points the fusions would hide, and one upstream of them */
  const int head0[] = {0};
  icl_tensor *vec = icl_tensor_new(1, (int64_t[]){icl_model_hparams(mf)->n_embd});
  for (int64_t i = 0; vec && i < vec->numel; i++) vec->data[i] = 0.01f * (float)(i % 7) - 0.03f;
  icl_intervention ivs[] = {
      {.kind = ICL_IV_ZERO, .hook = "blocks.1.attn.hook_z", .heads = head0, .n_heads = 1},
      {.kind = ICL_IV_ZERO, .hook = "blocks.0.hook_attn_out"},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.hook_mlp_out", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_attn_out", .value = vec, .coef = -1.0f},
      /* the norms folded into q/k/v and gate/up */
      {.kind = ICL_IV_ADD, .hook = "blocks.0.ln1.hook_normalized", .value = vec, .coef = 3.0f},
      {.kind = ICL_IV_ZERO, .hook = "blocks.1.ln2.hook_normalized"},
      /* the points a decoded token's post-norm adds bypass when folded into the next norm's consumer (gemma3's
       * add_rms_matmul_*), captured downstream only (from ivs[DOWN] on: ln_final, as a resid_post capture would turn
       * the fold off) */
      {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_mid", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_post", .value = vec, .coef = -2.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.hook_resid_pre", .value = vec, .coef = 3.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_mlp_out", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ZERO, .hook = "blocks.1.hook_attn_out"},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.ln2.hook_normalized", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.ln1.hook_normalized", .value = vec, .coef = 2.0f},
      /* gemma3 only (from ivs[GEMMA] on): the post-norms, folded or added into the residual */
      {.kind = ICL_IV_ZERO, .hook = "blocks.0.ln2_post.hook_normalized"},
      {.kind = ICL_IV_ADD, .hook = "blocks.0.ln1_post.hook_normalized", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.ln1_post.hook_normalized", .value = vec, .coef = 2.0f},
      {.kind = ICL_IV_ZERO, .hook = "blocks.0.ln2_post.hook_normalized"},
  };
  const char *names[] = {"zero z head 0", "zero attn_out", "add to mlp_out", "add to attn_out", "add to ln1",
                         "zero ln2", "add to resid_mid", "add to resid_post", "add to resid_pre (layer 1)",
                         "add to mlp_out (ln_final captured)", "zero attn_out (ln_final captured)",
                         "add to ln2 (ln_final captured)", "add to ln1 (ln_final captured)",
                         "zero ln2_post (ln_final captured)", "add to ln1_post (ln_final captured)", "add to ln1_post",
                         "zero ln2_post"};
  enum { DOWN = 6, GEMMA = 13, ALL = sizeof ivs / sizeof ivs[0], RESID_CAPTURED = 15 }; /* from 15: resid_post again */
  _Static_assert(sizeof names / sizeof names[0] == ALL, "a name per intervention");
  size_t n_ivs = strcmp(arch, "gemma3") == 0 ? ALL : GEMMA;
  for (size_t i = 0; vec && i < n_ivs; i++) {
    int downstream = i >= DOWN && i < RESID_CAPTURED;
    icl_capture c = {.pattern = downstream ? "ln_final.hook_normalized" : "blocks.*.hook_resid_post"};
    icl_run_opts o = {.logits = ICL_LOGITS_ALL, .captures = &c, .n_captures = 1, .interventions = &ivs[i],
                      .n_interventions = 1};
    compare(mf, mu, &o, arch, names[i]);
  }
  icl_tensor_free(vec);
  icl_model_free(mf);
  icl_model_free(mu);
  icl_model_free(g_cpu);
  g_cpu = NULL;
  printf("%s: %zu hook points captured and %zu interventions: fused and unfused runs agree bit for bit\n", arch,
         n_points, n_ivs);
}

int main(void) {
  if (!t_vulkan_built()) {
    printf("Vulkan support not built: no fusion to check\n");
    return 77;
  }
  const char *archs[] = {"llama", "qwen2", "gemma3"};
  for (int i = 0; i < 3; i++) check_arch(archs[i]);
  return t_done();
}
