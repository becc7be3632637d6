/* Positions of hook requests through the C API (issue 43 item 3): the core alone checks them. 0-based, negative
 * from the end (-1 = the last), ranges [begin, end) with end <= 0 counting from the end; out-of-range positions,
 * empty ranges and bad knockout/mask pairs fail with ICL_EINVAL and a message naming the request's label, the field,
 * the value (1-based, a negative one as given) and the valid range, compared here in full. Negative positions mean
 * what their positive twins mean: the same plan entries, the same captures and patterns bit for bit, and the same
 * reused prefix (opts.reuse) for a knockout. Tiny llama model on the ref backend: 12 tokens in chunks of 8. */
#include <stdlib.h>
#include <string.h>

#include "hooks_plan.h"
#include "testutil.h"

#define NTOK 12
#define NH 4

static int32_t TOKS[NTOK];

/* Runs with opts (logits LAST) and checks that it fails with ICL_EINVAL and exactly the message want. */
static void expect_error(icl_model *m, icl_run_opts o, const char *want) {
  o.logits = ICL_LOGITS_LAST;
  icl_run_result r;
  icl_error e = {0};
  int rc = icl_model_run(m, TOKS, NTOK, &o, &r, &e);
  CHECKF(rc == ICL_EINVAL && !strcmp(e.msg, want), "rc %d, message:\n  got  '%s'\n  want '%s'", rc, rc ? e.msg : "",
         want);
  if (rc == 0) icl_run_result_free(&r);
}

static void expect_capture_error(icl_model *m, icl_capture c, const char *want) {
  icl_capture two[2] = {{.pattern = "blocks.0.hook_resid_post"}, c}; /* the second request: "capture[2]" */
  expect_error(m, (icl_run_opts){.captures = two, .n_captures = 2}, want);
}

static void expect_iv_error(icl_model *m, icl_intervention v, const char *want) {
  expect_error(m, (icl_run_opts){.interventions = &v, .n_interventions = 1}, want);
}

#define RANGE " out of range 1..12 (1-based; -12..-1 from the end)"

static void test_position_errors(icl_model *m) {
  const char *r = "blocks.0.hook_resid_post";
  /* captures: the label names the request, or its place in the list */
  expect_capture_error(m, (icl_capture){.pattern = r, .pos_begin = 12, .pos_end = 13, .label = "capture[7]"},
                       "capture[7].pos: position 13" RANGE);
  expect_capture_error(m, (icl_capture){.pattern = r, .pos_begin = 0, .pos_end = 13},
                       "capture[2].pos: position 13" RANGE);
  expect_capture_error(m, (icl_capture){.pattern = r, .pos_begin = -13}, "capture[2].pos: position -13" RANGE);
  expect_capture_error(m, (icl_capture){.pattern = r, .pos_begin = 2, .pos_end = -12},
                       "capture[2].pos: position -13" RANGE); /* end -12: the last position is -13 */
  expect_capture_error(m, (icl_capture){.pattern = r, .pos_begin = 3, .pos_end = 3},
                       "capture[2].pos: range 4..3 (first..last, 1-based) is empty");
  /* interventions: positions are checked before any point is matched */
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_ZERO, .layer = 1, .pos_begin = 5, .pos_end = 3,
                                        .label = "ablate[2]"},
                  "ablate[2].pos: range 6..3 (first..last, 1-based) is empty");
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_ZERO, .layer = 1, .pos_begin = -2, .pos_end = -4,
                                        .label = "ablate[1]"},
                  "ablate[1].pos: range -2..-5 (first..last, 1-based) is empty");
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_ZERO, .hook = r, .pos_begin = 20, .pos_end = 21},
                  "intervention[1].pos: position 21" RANGE);
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_ZERO, .hook = r, .pos_begin = INT64_MIN, .pos_end = INT64_MIN,
                                        .label = "ablate[3]"},
                  "ablate[3].pos: position -9223372036854775808" RANGE);
  /* knockout and mask pairs: range of each position, then k <= q, normalized (1-based) in that message */
  static int64_t far[] = {12, 0}, far_neg[] = {3, -13}, order[] = {2, 5}, order_neg[] = {-10, -1},
                 second[] = {11, 0, 4, 12}, ok_neg[] = {-1, -12};
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = far, .n_edges = 1,
                                        .label = "knockout[1]"},
                  "knockout[1].edges[1]: position 13" RANGE);
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = far_neg, .n_edges = 1},
                  "knockout.edges[1]: position -13" RANGE);
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = order, .n_edges = 1,
                                        .label = "knockout[2]"},
                  "knockout[2].edges[1]: key position after query position (6 > 3)");
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = order_neg, .n_edges = 1,
                                        .label = "knockout[1]"},
                  "knockout[1].edges[1]: key position after query position (12 > 3)");
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_MASK, .layer = 1, .edges = second, .n_edges = 2,
                                        .label = "masks[3]"},
                  "masks[3].allow[2]: position 13" RANGE);
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_MASK, .layer = 1, .edges = ok_neg, .n_edges = -1},
                  "mask.allow: -1 pairs (a count out of range)");
  expect_iv_error(m, (icl_intervention){.kind = ICL_IV_KNOCKOUT, .layer = 1, .n_edges = 2, .label = "knockout[1]"},
                  "knockout[1].edges: 2 pairs but no array");
}

/* The resolved plan of a request with negative positions: the entries' rows and the MASK entry's own edges are
 * 0-based from the start. */
static void plan_of_negatives(icl_model *m) {
  static int64_t edges[] = {-1, -4, 10, -12, -2, 10};
  icl_intervention iv[] = {{.kind = ICL_IV_ZERO, .layer = 1, .pos_begin = -3},                /* [9, 12) */
                           {.kind = ICL_IV_ZERO, .layer = 0, .pos_begin = 2, .pos_end = -1}, /* [2, 11) */
                           {.kind = ICL_IV_KNOCKOUT, .layer = 1, .edges = edges, .n_edges = 3}};
  icl_run_opts o = {.interventions = iv, .n_interventions = 3};
  icl_run_result res = {0};
  struct icl_hookctx *hk = NULL;
  icl_error e = {0};
  int rc = icl_hooks_begin(m, NTOK, &o, &res, &hk, &e);
  CHECKF(rc == 0, "resolve: %s", e.msg);
  const icl_plan_entry *p = rc ? NULL : hk->plan;
  CHECKF(p && hk->nplan == 2 * NH + 1, "%d plan entries", hk ? hk->nplan : -1);
  if (p && hk->nplan == 2 * NH + 1) {
    CHECKF(p[0].pb == 9 && p[0].pe == 12, "pos_begin -3: rows [%lld, %lld)", (long long)p[0].pb, (long long)p[0].pe);
    CHECKF(p[NH].pb == 2 && p[NH].pe == 11, "[2, -1): rows [%lld, %lld)", (long long)p[NH].pb, (long long)p[NH].pe);
    const icl_plan_entry *k = &p[2 * NH];
    static const int64_t want[] = {11, 8, 10, 0, 10, 10};
    CHECK(k->op == ICL_PLAN_MASK && k->n_edges == 3 && k->edges != edges && !memcmp(k->edges, want, sizeof want));
  }
  icl_hooks_end(hk);
  icl_run_result_free(&res);
}

/* Runs with one capture and the interventions; returns the capture (NULL after a failed check). */
static icl_tensor *capture(icl_model *m, icl_capture c, const icl_intervention *iv, int niv) {
  icl_tensor *t = t_run_capture(m, TOKS, NTOK, c, iv, niv);
  CHECKF(t != NULL, "run capturing %s", c.pattern);
  return t;
}

static int same(const icl_tensor *a, const icl_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || a->numel != b->numel) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return !memcmp(a->data, b->data, (size_t)a->numel * sizeof(float));
}

/* Negative positions select what their positive twins select, bit for bit. */
static void test_negative_twins(icl_model *m) {
  const char *r = "blocks.1.hook_resid_post", *pat = "blocks.1.attn.hook_pattern";
  struct { int64_t nb, ne, pb, pe; } ranges[] = {{-3, 0, 9, 12}, {-3, -1, 9, 11}, {2, -1, 2, 11}, {-1, 0, 11, 12}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    icl_capture cn = {.pattern = r, .pos_begin = ranges[i].nb, .pos_end = ranges[i].ne}, cp = cn;
    cp.pos_begin = ranges[i].pb, cp.pos_end = ranges[i].pe;
    icl_tensor *neg = capture(m, cn, NULL, 0), *pos = capture(m, cp, NULL, 0);
    CHECKF(same(neg, pos) && neg->shape[0] == ranges[i].pe - ranges[i].pb, "capture [%lld, %lld) = [%lld, %lld)",
           (long long)ranges[i].nb, (long long)ranges[i].ne, (long long)ranges[i].pb, (long long)ranges[i].pe);
    icl_tensor_free(neg), icl_tensor_free(pos);
  }
  static int kh[] = {2};
  static int64_t e_neg[] = {-1, -4, -3, 0}, e_pos[] = {11, 8, 9, 0};
  icl_intervention kn = {.kind = ICL_IV_KNOCKOUT, .layer = 1, .heads = kh, .n_heads = 1, .edges = e_neg, .n_edges = 2};
  icl_intervention kp = kn;
  kp.edges = e_pos;
  icl_capture cpat = {.pattern = pat};
  icl_tensor *a = capture(m, cpat, &kn, 1), *b = capture(m, cpat, &kp, 1);
  CHECKF(same(a, b) && a->data[(2 * NTOK + 11) * NTOK + 8] == 0.0f && a->data[(2 * NTOK + 9) * NTOK + 0] == 0.0f &&
             a->data[(1 * NTOK + 11) * NTOK + 8] > 0.0f,
         "knockout {-1, -4}, {-3, 0} = {11, 8}, {9, 0}: those edges of head 2 only");
  icl_tensor_free(a), icl_tensor_free(b);
  static int64_t allow_neg[] = {-1, -1, -1, 0, 3, -12}, allow_pos[] = {11, 11, 11, 0, 3, 0};
  icl_intervention mn = {.kind = ICL_IV_MASK, .layer = 0, .edges = allow_neg, .n_edges = 3};
  icl_intervention mp = mn;
  mp.edges = allow_pos;
  a = capture(m, (icl_capture){.pattern = "blocks.0.attn.hook_pattern"}, &mn, 1);
  b = capture(m, (icl_capture){.pattern = "blocks.0.attn.hook_pattern"}, &mp, 1);
  CHECKF(same(a, b) && a->data[11 * NTOK + 5] == 0.0f && a->data[11 * NTOK + 0] > 0.0f,
         "mask allowing {-1, -1}, {-1, 0}, {3, -12} = {11, 11}, {11, 0}, {3, 0}");
  icl_tensor_free(a), icl_tensor_free(b);
}

/* opts.reuse: a knockout whose earliest query is -1 (the last position) leaves every earlier position reusable. */
static void test_reuse_negative_edge(icl_model *m) {
  static int64_t last[] = {-1, 0};
  icl_intervention ko = {.kind = ICL_IV_KNOCKOUT, .layer = 0, .edges = last, .n_edges = 1};
  icl_run_opts o = {.logits = ICL_LOGITS_LAST, .reuse = 1};
  icl_run_result r;
  icl_error e = {0};
  int rc = icl_model_run(m, TOKS, NTOK, &o, &r, &e);
  if (!rc) icl_run_result_free(&r);
  o.interventions = &ko, o.n_interventions = 1;
  rc = rc ? rc : icl_model_run(m, TOKS, NTOK, &o, &r, &e);
  CHECKF(rc == 0 && r.reused == NTOK - 1, "knockout at query -1 after a clean run: %lld positions reused (%s)",
         rc ? -1LL : (long long)r.reused, rc ? e.msg : "ok");
  if (!rc) icl_run_result_free(&r);
}

int main(void) {
  for (int i = 0; i < NTOK; i++) TOKS[i] = (i * 53 + 7) % 256;
  icl_model *m = t_tiny_llama("ref", 9, 8);
  if (!m) return t_done();
  test_position_errors(m);
  plan_of_negatives(m);
  test_negative_twins(m);
  test_reuse_negative_edge(m);
  icl_model_free(m);
  return t_done();
}
