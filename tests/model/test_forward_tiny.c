/* End-to-end: tiny random models of each architecture through every backend vs the scalar reference forward,
 * and the hook machinery (captures, ablation, patching, knockout, callbacks) against exact expectations. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "backend.h"
#include "ref.h"
#include "ref_forward.h"
#include "testmodel.h"
#include "testutil.h"

#define NTOK 24

static int32_t TOKS[NTOK], TOKS_B[NTOK];

static icl_model *load(const char *path, const char *backend) {
  icl_load_opts o = {.backend = backend, .device = -1, .n_ctx = 64, .chunk = 8};
  icl_model *m = NULL;
  icl_error e = {0};
  if (icl_model_load(path, &o, &m, &e)) fprintf(stderr, "load %s on %s: %s\n", path, backend, e.msg);
  return m;
}

static icl_tensor *run_logits(icl_model *m, const int32_t *t, const icl_run_opts *base, icl_run_result *keep) {
  return t_run_logits(m, t, NTOK, base, keep, "tiny");
}
static const icl_tensor *find(const icl_run_result *r, const char *name) { return t_find_capture(r, name); }

/* Tolerance per backend: float32 arithmetic in another order than the reference's doubles. */
static double tol(const char *backend) { return !strcmp(backend, "ref") ? 1e-9 : 2e-3; }

static void check_vs_ref(const char *path, const char *backend, const char *what, const int *zh, int nz,
                         const icl_run_opts *o) {
  icl_model *m = load(path, backend);
  CHECKF(m != NULL, "%s: load", what);
  if (!m) return;
  icl_tensor *got = run_logits(m, TOKS, o, NULL);
  float *want = malloc((size_t)NTOK * 258 * sizeof *want);
  icl_error e = {0};
  int64_t V = 0;
  int rc = icl_ref_forward(path, TOKS, NTOK, zh, nz, want, &V, &e);
  CHECKF(rc == 0 && V == 258, "%s: ref forward: %s", what, e.msg);
  if (got && rc == 0) {
    double nm = icl_nmse(want, got->data, NTOK * V);
    CHECKF(nm < tol(backend), "%s on %s: logits NMSE %.3g >= %.3g", what, backend, nm, tol(backend));
    printf("  %-34s %-7s NMSE %.3g\n", what, backend, nm);
  }
  free(want);
  icl_tensor_free(got);
  icl_model_free(m);
}

/* quick: each weight type but F32 on one architecture (types taken in turn over the three), 6 of the 21
 * pairs: F32 matrices are rare in real models and its matmul pipelines are the dearest for lavapipe's LLVM
 * to compile (about a minute of CPU cold); the full run keeps every pair. */
static void test_archs(const char *backend, int quick) {
  const char *archs[] = {"llama", "qwen2", "gemma3"};
  uint32_t types[] = {ICL_TYPE_F32, ICL_TYPE_F16, ICL_TYPE_Q8_0, ICL_TYPE_Q4_1, ICL_TYPE_Q5_0, ICL_TYPE_Q4_K,
                      ICL_TYPE_Q6_K};
  for (size_t a = 0; a < 3; a++)
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
      if (!strcmp(backend, "ref") && t > 2) continue; /* the ref backend is the oracle's own ops: few cases */
      if (quick && (t % 3 != a || types[t] == ICL_TYPE_F32)) continue;
      char path[256], what[96];
      snprintf(path, sizeof path, "/tmp/icl-tiny-%d-%s-%s.gguf", (int)getpid(), archs[a], icl_type_name(types[t]));
      icl_tiny_spec sp = {.arch = archs[a], .wtype = types[t], .seed = a * 10 + t};
      icl_error e = {0};
      int rc = icl_write_tiny_model(path, &sp, &e);
      CHECKF(rc == 0, "write tiny %s: %s", path, e.msg);
      if (rc) continue;
      snprintf(what, sizeof what, "%s %s", archs[a], icl_type_name(types[t]));
      check_vs_ref(path, backend, what, NULL, 0, NULL);
      unlink(path);
    }
}

static int zero_head_cb(void *ud, const char *hook, icl_tensor *v, int64_t pos0, icl_error *err) {
  (void)hook; (void)pos0; (void)err;
  /* v [pos, head, d_head]: zero head 2 */
  for (int64_t p = 0; p < v->shape[0]; p++) memset(v->data + (p * v->shape[1] + 2) * v->shape[2], 0, v->shape[2] * 4);
  (*(int *)ud)++;
  return 0;
}

static void test_hooks(const char *backend, const char *arch) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-tiny-hooks-%d-%s.gguf", (int)getpid(), arch);
  icl_tiny_spec sp = {.arch = arch, .wtype = ICL_TYPE_Q8_0, .seed = 99};
  icl_error e = {0};
  CHECK(icl_write_tiny_model(path, &sp, &e) == 0);
  icl_model *m = load(path, backend);
  CHECK(m != NULL);
  if (!m) return;
  const icl_hparams *hp = icl_model_hparams(m);
  int64_t V = hp->n_vocab, d = hp->n_embd;
  icl_tensor *plain = run_logits(m, TOKS, NULL, NULL);

  /* captures leave logits bit-identical */
  icl_capture caps[] = {{.pattern = "blocks.*.hook_resid_post"}, {.pattern = "blocks.*.attn.hook_pattern"},
                        {.pattern = "blocks.1.attn.hook_z"}, {.pattern = "hook_embed"},
                        {.pattern = "blocks.0.hook_resid_pre"}, {.pattern = "blocks.1.hook_attn_out"},
                        {.pattern = "blocks.1.attn.hook_result"}, {.pattern = "blocks.0.hook_resid_post", .pos_begin = -5}};
  icl_run_opts oc = {.captures = caps, .n_captures = 8};
  icl_run_result rc;
  icl_tensor *captured = run_logits(m, TOKS, &oc, &rc);
  CHECKF(plain && captured && !memcmp(plain->data, captured->data, (size_t)NTOK * V * 4),
         "%s %s: captures changed the logits", backend, arch);
  CHECK(rc.n_captures == 2 * hp->n_layer + 5 + 1);

  /* patterns: rows sum to 1, causal, windowed on sliding layers */
  for (int l = 0; l < hp->n_layer; l++) {
    char nm[64];
    snprintf(nm, sizeof nm, "blocks.%d.attn.hook_pattern", l);
    const icl_tensor *p = find(&rc, nm);
    CHECKF(p && p->shape[0] == hp->n_head && p->shape[1] == NTOK && p->shape[2] == NTOK, "%s shape", nm);
    if (!p) continue;
    int sliding = !strcmp(arch, "gemma3") && l % 6 < 5;
    double worst = 0;
    int bad_mask = 0;
    for (int h = 0; h < hp->n_head; h++)
      for (int q = 0; q < NTOK; q++) {
        double s = 0;
        for (int k = 0; k < NTOK; k++) {
          float v = p->data[((int64_t)h * NTOK + q) * NTOK + k];
          s += v;
          if ((k > q || (sliding && q - k >= 5)) && v != 0.0f) bad_mask++;
        }
        worst = fmax(worst, fabs(s - 1));
      }
    CHECKF(worst < 1e-4, "%s %s: pattern row sum off by %g", backend, nm, worst);
    CHECKF(bad_mask == 0, "%s %s: %d masked entries non-zero", backend, nm, bad_mask);
  }
  /* resid_pre of layer 0 equals the embedding; sliced capture equals the tail of the full one */
  const icl_tensor *emb = find(&rc, "hook_embed"), *rp0 = find(&rc, "blocks.0.hook_resid_pre");
  CHECK(emb && rp0 && !memcmp(emb->data, rp0->data, (size_t)emb->numel * 4));
  /* hook_result summed over heads equals hook_attn_out */
  const icl_tensor *res = find(&rc, "blocks.1.attn.hook_result"), *ao = find(&rc, "blocks.1.hook_attn_out");
  if (res && ao && !strcmp(arch, "llama")) {
    double worst = 0;
    for (int64_t p = 0; p < NTOK; p++)
      for (int64_t i = 0; i < d; i++) {
        double s = 0;
        for (int h = 0; h < hp->n_head; h++) s += res->data[(p * hp->n_head + h) * d + i];
        worst = fmax(worst, fabs(s - ao->data[p * d + i]));
      }
    CHECKF(worst < 1e-3, "%s: sum of hook_result differs from hook_attn_out by %g", backend, worst);
  }

  /* zero ablation of (layer 1, head 2) at hook_z matches the reference forward with that head zeroed */
  int heads[1] = {2}, zh[2] = {1, 2};
  icl_intervention iv = {.kind = ICL_IV_ZERO, .hook = "blocks.1.attn.hook_z", .heads = heads, .n_heads = 1};
  icl_run_opts oz = {.interventions = &iv, .n_interventions = 1};
  char what[96];
  snprintf(what, sizeof what, "%s zero-ablate L1H2", arch);
  check_vs_ref(path, backend, what, zh, 1, &oz);
  icl_tensor *abl = run_logits(m, TOKS, &oz, NULL);
  CHECK(abl && plain && icl_nmse(plain->data, abl->data, NTOK * V) > 1e-8);

  /* the host callback doing the same gives the same logits */
  int calls = 0;
  const char *pts[] = {"blocks.1.attn.hook_z"};
  icl_run_opts ocb = {.hook_points = pts, .n_hook_points = 1, .hook = zero_head_cb, .hook_ud = &calls};
  icl_tensor *cb = run_logits(m, TOKS, &ocb, NULL);
  CHECKF(cb && abl && icl_nmse(abl->data, cb->data, NTOK * V) < 1e-12, "callback ablation differs");
  CHECK(calls == (NTOK + 7) / 8);

  /* mean ablation with a zero vector equals zero ablation */
  int64_t hs[1] = {hp->head_dim};
  icl_tensor *zeros = icl_tensor_new(1, hs);
  icl_intervention ivm = iv;
  ivm.kind = ICL_IV_MEAN, ivm.value = zeros;
  icl_run_opts om = {.interventions = &ivm, .n_interventions = 1};
  icl_tensor *mean = run_logits(m, TOKS, &om, NULL);
  CHECK(mean && abl && !memcmp(mean->data, abl->data, (size_t)NTOK * V * 4));

  /* patching resid_pre of layer 0 with its own value is the identity; with run B's value it gives B's logits */
  const icl_tensor *own = find(&rc, "blocks.0.hook_resid_pre");
  icl_intervention ivp = {.kind = ICL_IV_PATCH, .hook = "blocks.0.hook_resid_pre", .value = own};
  icl_run_opts op = {.interventions = &ivp, .n_interventions = 1};
  icl_tensor *same = run_logits(m, TOKS, &op, NULL);
  CHECK(same && plain && !memcmp(same->data, plain->data, (size_t)NTOK * V * 4));
  icl_capture cb0 = {.pattern = "blocks.0.hook_resid_pre"};
  icl_run_opts ob = {.captures = &cb0, .n_captures = 1};
  icl_run_result rb;
  icl_tensor *logits_b = run_logits(m, TOKS_B, &ob, &rb);
  ivp.value = rb.captures[0];
  icl_tensor *patched = run_logits(m, TOKS, &op, NULL);
  CHECKF(patched && logits_b && !memcmp(patched->data, logits_b->data, (size_t)NTOK * V * 4),
         "%s %s: patching run B's resid_pre does not reproduce B", backend, arch);

  /* steering: adding coef*v to resid_post of layer 0 shifts resid_pre of layer 1 by exactly that */
  int64_t ds[1] = {d};
  icl_tensor *vec = icl_tensor_new(1, ds);
  for (int64_t i = 0; i < d; i++) vec->data[i] = (float)(i % 7) - 3.0f;
  icl_intervention iva = {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_post", .value = vec, .coef = 0.5f,
                          .pos_begin = 3, .pos_end = 6};
  icl_capture c1 = {.pattern = "blocks.1.hook_resid_pre"};
  icl_run_opts oa = {.interventions = &iva, .n_interventions = 1, .captures = &c1, .n_captures = 1};
  icl_run_result ra;
  icl_tensor *la = run_logits(m, TOKS, &oa, &ra);
  const icl_tensor *rpost0 = find(&rc, "blocks.0.hook_resid_post");
  if (la && rpost0) {
    double worst = 0;
    for (int64_t p = 0; p < NTOK; p++)
      for (int64_t i = 0; i < d; i++) {
        double want = rpost0->data[p * d + i] + (p >= 3 && p < 6 ? 0.5 * vec->data[i] : 0);
        worst = fmax(worst, fabs(ra.captures[0]->data[p * d + i] - want));
      }
    CHECKF(worst < 1e-5, "%s: steering off by %g", backend, worst);
    icl_run_result_free(&ra);
  }

  /* knockout of edge (10 -> 8) on layer 0 (inside Gemma's window of 5): that pattern entry is 0 and rows still sum to 1 */
  int64_t edges[2] = {10, 8};
  icl_intervention ivk = {.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = edges, .n_edges = 1};
  icl_capture cp = {.pattern = "blocks.0.attn.hook_pattern"};
  icl_run_opts ok = {.interventions = &ivk, .n_interventions = 1, .captures = &cp, .n_captures = 1};
  icl_run_result rk;
  icl_tensor *lk = run_logits(m, TOKS, &ok, &rk);
  if (lk) {
    const icl_tensor *p = rk.captures[0];
    double s = 0;
    for (int k = 0; k < NTOK; k++) s += p->data[10 * NTOK + k];
    CHECK(p->data[10 * NTOK + 8] == 0.0f && fabs(s - 1) < 1e-4);
    CHECK(plain && icl_nmse(plain->data, lk->data, NTOK * V) > 0);
    icl_run_result_free(&rk);
  }

  /* results do not depend on how the run is cut into chunks (23 tokens: 3 chunks of 8 vs one of 23) */
  {
    icl_load_opts lo = {.backend = backend, .device = -1, .n_ctx = 64, .chunk = 23};
    icl_model *m2 = NULL;
    CHECK(icl_model_load(path, &lo, &m2, &e) == 0);
    icl_run_opts o23 = {.logits = ICL_LOGITS_ALL};
    icl_run_result r8, r23;
    if (m2 && !icl_model_run(m, TOKS, 23, &o23, &r8, &e) && !icl_model_run(m2, TOKS, 23, &o23, &r23, &e)) {
      double nm = icl_nmse(r8.logits->data, r23.logits->data, 23 * V);
      CHECKF(nm < 1e-10, "%s %s: chunking changes the logits (NMSE %.3g)", backend, arch, nm);
      icl_run_result_free(&r8);
      icl_run_result_free(&r23);
    }
    icl_model_free(m2);
  }

  /* bad requests fail up front with a message naming the problem */
  icl_capture bad = {.pattern = "blocks.99.hook_resid_post"};
  icl_run_opts obad = {.captures = &bad, .n_captures = 1};
  icl_run_result rbad;
  CHECK(icl_model_run(m, TOKS, NTOK, &obad, &rbad, &e) == ICL_EINVAL && strstr(e.msg, "blocks.99"));
  int badh[1] = {17};
  icl_intervention ivbad = {.kind = ICL_IV_ZERO, .hook = "blocks.0.attn.hook_z", .heads = badh, .n_heads = 1};
  icl_run_opts obh = {.interventions = &ivbad, .n_interventions = 1};
  CHECK(icl_model_run(m, TOKS, NTOK, &obh, &rbad, &e) == ICL_EINVAL &&
        strstr(e.msg, "blocks.0.attn.hook_z.head: 17 out of range"));

  icl_tensor *all[] = {plain, captured, abl, cb, mean, same, logits_b, patched, la, lk, zeros, vec};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) icl_tensor_free(all[i]);
  icl_run_result_free(&rc);
  icl_run_result_free(&rb);
  icl_model_free(m);
  unlink(path);
}

/* test_forward_tiny [BACKEND] [--quick]: every backend, or one; --quick: 6 (arch, type) pairs, no F32 */
int main(int argc, char **argv) {
  uint64_t s = 5;
  for (int i = 0; i < NTOK; i++) TOKS[i] = (int32_t)(t_rand_u64(&s) % 258), TOKS_B[i] = (int32_t)(t_rand_u64(&s) % 258);
  const char *backends[] = {"ref", "cpu", "vulkan"}, *only = NULL;
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) quick = 1;
    else only = argv[i];
  }
  int nb = only ? 1 : 3;
  for (int b = 0; b < nb; b++) {
    const char *be = only ? only : backends[b];
    if (!strcmp(be, "vulkan") && !t_vulkan_built()) {
      printf("backend vulkan: not built (-DICL_VULKAN=OFF), not tested\n");
      continue;
    }
    printf("backend %s\n", be);
    test_archs(be, quick);
    test_hooks(be, "llama");
    test_hooks(be, "gemma3");
  }
  return t_done();
}
