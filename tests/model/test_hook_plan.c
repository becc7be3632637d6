/* Hooks as resolve -> plan -> apply (src/hooks_plan.h): the plan entries each request resolves to (FILL per chosen
 * head, COPY from each accepted value layout, ADD over whole rows, MASK per knockout), what applying them does to
 * the site (captured at the same site, so after the plan: exact values against a clean run's capture, across a
 * chunk boundary; ref, cpu and vulkan backends), and the errors for values whose shape fits none of the site's
 * layouts. Tiny llama model: d 256, 4 heads of 64, 2 layers; 12 tokens in chunks of 8. */
#include <stdlib.h>
#include <string.h>

#include "hooks_plan.h"
#include "testutil.h"

#define NTOK 12
#define D 256
#define HD 64
#define NH 4

static int32_t TOKS[NTOK];

static icl_tensor *filled(int nd, int64_t a, int64_t b, int64_t c, float base) {
  int64_t shape[3] = {a, b, c};
  icl_tensor *t = icl_tensor_new(nd, shape);
  for (int64_t i = 0; t && i < t->numel; i++) t->data[i] = base + (float)(i % 97) * 0.125f;
  return t;
}

/* Resolves opts for the model and hands the context to fn (the plan is inspected, not run). */
static void with_plan(icl_model *m, const icl_run_opts *o, void (*fn)(const struct icl_hookctx *)) {
  icl_error e = {0};
  icl_run_result res = {0};
  struct icl_hookctx *hk = NULL;
  int rc = icl_hooks_begin(m, NTOK, o, &res, &hk, &e);
  CHECKF(rc == 0, "resolve: %s", e.msg);
  if (!rc) fn(hk);
  icl_hooks_end(hk);
  icl_run_result_free(&res);
}

static int entry_is(const icl_plan_entry *p, icl_plan_op op, int layer, int hp, int64_t col, int64_t ncol,
                    int64_t vcol, int64_t vstride, int64_t vrows) {
  return p->op == op && p->layer == layer && p->hp == hp && p->col == col && p->ncol == ncol && p->vcol == vcol &&
         p->vstride == vstride && p->vrows == vrows;
}

static void plan_of_all_kinds(const struct icl_hookctx *hk) {
  CHECKF(hk->nplan == 8, "8 plan entries, got %d", hk->nplan);
  if (hk->nplan != 8) return;
  const icl_plan_entry *p = hk->plan;
  /* zero hook_z heads {1, 3} at positions 2..8: one FILL per head */
  CHECK(entry_is(&p[0], ICL_PLAN_FILL, 1, HP_Z, 1 * HD, HD, 0, 0, 0) && p[0].row == D && p[0].pb == 2 && p[0].pe == 9);
  CHECK(entry_is(&p[1], ICL_PLAN_FILL, 1, HP_Z, 3 * HD, HD, 0, 0, 0) && p[1].fill == 0.0f);
  /* patch head 2 with [7, 1, 64]: one COPY, value rows of 64 per position */
  CHECK(entry_is(&p[2], ICL_PLAN_COPY, 0, HP_Z, 2 * HD, HD, 0, HD, 7) && p[2].pb == 3 && p[2].pe == 10);
  /* mean over hook_v's KV heads {1, 0} from an all-heads [2, 64] row: packed [head 1 | head 0], one per position */
  CHECK(entry_is(&p[3], ICL_PLAN_COPY, 0, HP_V, HD, HD, 0, 2 * HD, NTOK));
  CHECK(entry_is(&p[4], ICL_PLAN_COPY, 0, HP_V, 0, HD, HD, 2 * HD, NTOK) && p[3].vbuf == p[4].vbuf && p[3].vbuf);
  /* add: a broadcast row and one row per position, whole rows */
  CHECK(entry_is(&p[5], ICL_PLAN_ADD, 0, HP_RESID_POST, 0, D, 0, D, 1));
  CHECK(entry_is(&p[6], ICL_PLAN_ADD, 1, HP_RESID_PRE, 0, D, 0, D, NTOK));
  /* knockout: one MASK entry of layer 1 with its heads and edges */
  CHECK(p[7].op == ICL_PLAN_MASK && p[7].layer == 1 && p[7].n_heads == 1 && p[7].heads[0] == 3 && p[7].n_edges == 2);
  CHECK(hk->ko_layer[1] && !hk->ko_layer[0] && hk->nvbufs == 4);
}

/* The plan of one request of each kind and layout (hook_v has the model's 2 KV heads). */
static void test_plan(icl_model *m) {
  static int zh[] = {1, 3}, ph[] = {2}, mh[] = {1, 0}, kh[] = {3};
  static int64_t edges[] = {9, 3, 11, 0};
  icl_tensor *pv = filled(3, 7, 1, HD, 1), *mv = filled(2, 2, HD, 0, 2), *av = filled(1, D, 0, 0, 3),
             *ap = filled(2, NTOK, D, 0, 4);
  icl_intervention iv[] = {
      {.kind = ICL_IV_ZERO, .hook = "blocks.1.attn.hook_z", .heads = zh, .n_heads = 2, .pos_begin = 2, .pos_end = 9},
      {.kind = ICL_IV_PATCH, .hook = "blocks.0.attn.hook_z", .heads = ph, .n_heads = 1, .pos_begin = 3, .pos_end = 10,
       .value = pv},
      {.kind = ICL_IV_MEAN, .hook = "blocks.0.attn.hook_v", .heads = mh, .n_heads = 2, .value = mv},
      {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_post", .value = av, .coef = 2},
      {.kind = ICL_IV_ADD, .hook = "blocks.1.hook_resid_pre", .value = ap, .coef = 1},
      {.kind = ICL_IV_KNOCKOUT, .layer = 1, .heads = kh, .n_heads = 1, .edges = edges, .n_edges = 2}};
  icl_run_opts o = {.interventions = iv, .n_interventions = 6};
  with_plan(m, &o, plan_of_all_kinds);
  icl_tensor_free(pv), icl_tensor_free(mv), icl_tensor_free(av), icl_tensor_free(ap);
}

/* Runs with the interventions and a capture of `hook` (after the plan at that site); returns the capture. */
static icl_tensor *captured(icl_model *m, const char *hook, const icl_intervention *iv, int niv) {
  return t_run_capture(m, TOKS, NTOK, (icl_capture){.pattern = hook}, iv, niv);
}

/* Positions [b, e) and heads in the mask changed; everything else equal to the clean capture. */
static int64_t changed_ok(const icl_tensor *clean, const icl_tensor *got, int64_t b, int64_t e, unsigned heads,
                          float (*want)(int64_t, int64_t, int64_t, float, void *), void *ud) {
  int64_t bad = 0;
  for (int64_t p = 0; p < NTOK; p++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < HD; i++) {
        int64_t k = (p * NH + h) * HD + i;
        int in = p >= b && p < e && ((heads >> h) & 1);
        float w = in ? want(p, h, i, clean->data[k], ud) : clean->data[k];
        bad += got->data[k] != w;
      }
  return bad;
}

static float want_zero(int64_t p, int64_t h, int64_t i, float c, void *ud) { (void)p, (void)h, (void)i, (void)c, (void)ud; return 0; }
static float want_patch(int64_t p, int64_t h, int64_t i, float c, void *ud) { /* value [7, 1, 64] from position 3 */
  (void)h, (void)c;
  return ((const icl_tensor *)ud)->data[(p - 3) * HD + i];
}
static float want_head_row(int64_t p, int64_t h, int64_t i, float c, void *ud) { /* value [4, 64]: head h's row */
  (void)p, (void)c;
  return ((const icl_tensor *)ud)->data[h * HD + i];
}
static float want_add(int64_t p, int64_t h, int64_t i, float c, void *ud) { /* value [4, 64] times 0.5 */
  (void)p;
  return c + ((const icl_tensor *)ud)->data[h * HD + i] * 0.5f;
}

typedef float (*want_fn)(int64_t p, int64_t h, int64_t i, float clean, void *ud);

/* One intervention at hook_z of layer 0: the site's capture equals want() at positions [b, e) of the heads in
 * the bit mask, and the clean capture elsewhere, bit for bit. */
static void check_case(icl_model *m, const icl_tensor *clean, const icl_intervention *iv, int64_t b, int64_t e,
                       unsigned heads, want_fn want, void *ud, const char *what) {
  icl_tensor *t = clean ? captured(m, "blocks.0.attn.hook_z", iv, 1) : NULL;
  int64_t bad = t ? changed_ok(clean, t, b, e, heads, want, ud) : -1;
  CHECKF(bad == 0, "%s: %lld values differ (-1: no run)", what, (long long)bad);
  icl_tensor_free(t);
}

/* Applying FILL, COPY (per position, broadcast all-heads) and ADD: exact values at the site, all else unchanged. */
static void test_apply(icl_model *m, const char *backend) {
  static int zh[] = {1, 3}, ph[] = {2}, mh[] = {3, 0};
  const char *z = "blocks.0.attn.hook_z";
  icl_tensor *clean = captured(m, z, NULL, 0), *pv = filled(3, 7, 1, HD, 1), *hv = filled(2, NH, HD, 0, -2);
  icl_intervention zero = {.kind = ICL_IV_ZERO, .hook = z, .heads = zh, .n_heads = 2, .pos_begin = 2, .pos_end = 9};
  icl_intervention patch = {.kind = ICL_IV_PATCH, .hook = z, .heads = ph, .n_heads = 1, .pos_begin = 3,
                            .pos_end = 10, .value = pv};
  icl_intervention mean = {.kind = ICL_IV_MEAN, .hook = z, .heads = mh, .n_heads = 2, .value = hv};
  icl_intervention add = {.kind = ICL_IV_ADD, .hook = z, .value = hv, .coef = 0.5f, .pos_begin = -5};
  char what[128];
  snprintf(what, sizeof what, "%s: FILL of heads 1, 3 at positions 2..8", backend);
  check_case(m, clean, &zero, 2, 9, 0xA, want_zero, NULL, what);
  snprintf(what, sizeof what, "%s: COPY of one row per position into head 2", backend);
  check_case(m, clean, &patch, 3, 10, 0x4, want_patch, pv, what);
  snprintf(what, sizeof what, "%s: broadcast COPY of an all-heads row into heads 3, 0", backend);
  check_case(m, clean, &mean, 0, NTOK, 0x9, want_head_row, hv, what);
  snprintf(what, sizeof what, "%s: ADD of a broadcast [4, 64] row times 0.5 at the last 5 positions", backend);
  check_case(m, clean, &add, NTOK - 5, NTOK, 0xF, want_add, hv, what);
  icl_tensor_free(clean), icl_tensor_free(pv), icl_tensor_free(hv);
}

/* MASK: the knocked-out edge of head 3 has pattern 0, the same edge of head 0 does not. */
static void test_mask(icl_model *m, const char *backend) {
  static int kh[] = {3};
  static int64_t edges[] = {9, 3};
  icl_intervention ko = {.kind = ICL_IV_KNOCKOUT, .layer = 1, .heads = kh, .n_heads = 1, .edges = edges, .n_edges = 1};
  icl_tensor *p = captured(m, "blocks.1.attn.hook_pattern", &ko, 1); /* [heads, q, k] */
  CHECKF(p && p->data[(3 * NTOK + 9) * NTOK + 3] == 0.0f && p->data[(0 * NTOK + 9) * NTOK + 3] > 0.0f,
         "%s: MASK zeroes edge 9 -> 3 of head 3 only", backend);
  icl_tensor_free(p);
}

/* A value whose shape fits none of the layouts fails before the run, naming request, hook, shapes given and
 * expected (an element count that happens to match is no longer enough). */
static void expect_shape_error(icl_model *m, const icl_intervention *iv, const char *const *needles) {
  icl_run_opts o = {.interventions = iv, .n_interventions = 1, .logits = ICL_LOGITS_ALL};
  icl_run_result r;
  icl_error e = {0};
  int rc = icl_model_run(m, TOKS, NTOK, &o, &r, &e);
  int all = rc == ICL_EINVAL;
  for (int i = 0; needles[i]; i++) all = all && strstr(e.msg, needles[i]);
  CHECKF(all, "rc %d, message: %s (wanted '%s'...)", rc, e.msg, needles[0]);
  if (rc == 0) icl_run_result_free(&r);
}

static void test_shape_errors(icl_model *m) {
  static int h2[] = {2};
  icl_tensor *sq = filled(2, 16, 16, 0, 0), *flat = filled(1, (int64_t)NTOK * D, 0, 0, 0),
             *three = filled(2, 3, HD, 0, 0), *short_rows = filled(2, 2, D, 0, 0);
  icl_intervention add = {.kind = ICL_IV_ADD, .hook = "blocks.0.hook_resid_post", .value = sq, .label = "add[1]"};
  const char *n1[] = {"add[1] (blocks.0.hook_resid_post)", "shape [16, 16]", "expected [256] (one row, broadcast)",
                      "[12, 256] (one row per position)", NULL};
  expect_shape_error(m, &add, n1);
  icl_intervention patch = {.kind = ICL_IV_PATCH, .hook = "blocks.1.hook_resid_pre", .value = flat};
  const char *n2[] = {"blocks.1.hook_resid_pre: value of shape [3072]", "expected [12, 256] (one row per position)",
                      NULL};
  expect_shape_error(m, &patch, n2);
  icl_intervention mean = {.kind = ICL_IV_MEAN, .hook = "blocks.0.attn.hook_z", .heads = h2, .n_heads = 1,
                           .value = three, .label = "ablate[2]"};
  const char *n3[] = {"ablate[2] (blocks.0.attn.hook_z)", "shape [3, 64]",
                      "expected [4, 64], [256], [1, 64], [64] (one row, broadcast)", NULL};
  expect_shape_error(m, &mean, n3);
  icl_intervention rows = {.kind = ICL_IV_PATCH, .hook = "blocks.0.hook_resid_post", .value = short_rows,
                           .pos_begin = 2, .pos_end = 5, .label = "patch[1]"};
  const char *n4[] = {"patch[1] (blocks.0.hook_resid_post)", "shape [2, 256]", "expected [3, 256]",
                      "positions 3..5, 1-based: 3 of them", NULL};
  expect_shape_error(m, &rows, n4);
  icl_tensor_free(sq), icl_tensor_free(flat), icl_tensor_free(three), icl_tensor_free(short_rows);
}

/* The C API expresses what Lua can: short hook names with a layer resolve as the full name does; the core checks
 * layer, heads and edges and names the field after the request's label. */
static const struct icl_hookctx *g_short;
static void short_z_plan(const struct icl_hookctx *hk) {
  CHECKF(hk->nplan == 2 && hk->plan[0].layer == 1 && hk->plan[0].hp == HP_Z && hk->plan[0].col == HD &&
         hk->plan[1].hp == HP_K && hk->plan[1].layer == 0 && hk->plan[1].col == HD,
         "short hooks: %d entries", hk->nplan);
  g_short = hk;
}

static void test_short_hooks(icl_model *m) {
  static int h1[] = {1}, h9[] = {9}, hk3[] = {0, 3};
  static int64_t bad_order[] = {2, 5}, bad_pos[] = {12, 0};
  icl_intervention two[] = {{.kind = ICL_IV_ZERO, .layer = 1, .heads = h1, .n_heads = 1},
                            {.kind = ICL_IV_ZERO, .hook = "k", .layer = 0, .heads = h1, .n_heads = 1}};
  icl_run_opts o = {.interventions = two, .n_interventions = 2};
  with_plan(m, &o, short_z_plan);
  CHECK(g_short != NULL);
  struct { icl_intervention iv; const char *needle; } bad[] = {
      {{.kind = ICL_IV_ZERO, .layer = -1, .label = "ablate[1]"}, "ablate[1].layer: required with the short hook 'z'"},
      {{.kind = ICL_IV_ZERO, .layer = 2, .label = "ablate[1]"}, "ablate[1].layer: 2 out of range 0..1"},
      {{.kind = ICL_IV_ZERO, .hook = "w", .layer = 0, .label = "ablate[3]"}, "ablate[3].hook: 'w' is not z, result"},
      {{.kind = ICL_IV_ADD, .layer = 0, .label = "add[1]"}, "add[1].hook: required"},
      {{.kind = ICL_IV_ZERO, .layer = 0, .heads = h9, .n_heads = 1, .label = "ablate[2]"}, "ablate[2].head: 9 out of range 0..3"},
      {{.kind = ICL_IV_ZERO, .hook = "v", .layer = 0, .heads = hk3, .n_heads = 2, .label = "ablate[1]"},
       "ablate[1].heads[2]: 3 out of range 0..1"}, /* hook_v has the model's 2 KV heads */
      {{.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = bad_order, .n_edges = 1, .label = "knockout[1]"},
       "knockout[1].edges[1]: key position after query position (6 > 3)"},
      {{.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = bad_pos, .n_edges = 1, .label = "knockout[2]"},
       "knockout[2].edges[1]: position 13 out of range 1..12"},
      {{.kind = ICL_IV_KNOCKOUT, .layer = 5, .label = "knockout[1]"}, "knockout[1].layer: 5 out of range 0..1"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *needles[] = {bad[i].needle, NULL};
    expect_shape_error(m, &bad[i].iv, needles);
  }
}

static void test_backend(const char *backend) {
  icl_model *m = t_tiny_llama(backend, 9, 8);
  if (!m) return;
  if (!strcmp(backend, "ref")) test_plan(m), test_shape_errors(m), test_short_hooks(m);
  test_apply(m, backend);
  test_mask(m, backend);
  icl_model_free(m);
}

int main(void) {
  for (int i = 0; i < NTOK; i++) TOKS[i] = (i * 53 + 7) % 256;
  test_backend("ref");
  test_backend("cpu");
  if (t_vulkan_built()) test_backend("vulkan");
  else printf("backend vulkan: not built (-DICL_VULKAN=OFF), not tested\n");
  return t_done();
}
