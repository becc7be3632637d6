/* Hook points: names and their layouts, the run lifecycle (resolve the requests, then per chunk apply the plan,
 * call back, capture at each site the forward pass announces) and the helpers the hook files share. Captures:
 * hooks_capture.c; interventions into plan entries: hooks_resolve.c; applying them: hooks_apply.c. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "hooks_plan.h"
#include "ops.h"

static const char *SUFFIX[HP_LAYER_COUNT] = {
    [HP_RESID_PRE] = "hook_resid_pre",    [HP_LN1] = "ln1.hook_normalized",
    [HP_Q] = "attn.hook_q",               [HP_K] = "attn.hook_k",
    [HP_V] = "attn.hook_v",               [HP_PATTERN] = "attn.hook_pattern",
    [HP_Z] = "attn.hook_z",               [HP_RESULT] = "attn.hook_result",
    [HP_ATTN_OUT] = "hook_attn_out",      [HP_LN1_POST] = "ln1_post.hook_normalized",
    [HP_RESID_MID] = "hook_resid_mid",    [HP_LN2] = "ln2.hook_normalized",
    [HP_MLP_PRE] = "mlp.hook_pre",        [HP_MLP_POST] = "mlp.hook_post",
    [HP_MLP_OUT] = "hook_mlp_out",        [HP_LN2_POST] = "ln2_post.hook_normalized",
    [HP_RESID_POST] = "hook_resid_post"};

icl_hk_geom icl_hk_geom_of(const icl_model *m, int hp) {
  const icl_hparams *h = &m->hp;
  int64_t hd = h->head_dim;
  switch (hp) {
  case HP_Q: case HP_Z: return (icl_hk_geom){hd * h->n_head, hd, h->n_head};
  case HP_K: case HP_V: return (icl_hk_geom){hd * h->n_head_kv, hd, h->n_head_kv};
  case HP_RESULT: return (icl_hk_geom){(int64_t)h->n_embd * h->n_head, h->n_embd, h->n_head};
  case HP_MLP_PRE: case HP_MLP_POST: return (icl_hk_geom){h->n_ff, 0, 0};
  case HP_PATTERN: return (icl_hk_geom){0, 0, h->n_head};
  default: return (icl_hk_geom){h->n_embd, 0, 0};
  }
}

int icl_hook_name(const icl_model *m, int layer, int hp, char *buf, size_t len) {
  if (layer < 0) {
    const char *g = hp == HP_EMBED ? "hook_embed" : hp == HP_LN_FINAL ? "ln_final.hook_normalized" : NULL;
    if (!g) return 0;
    snprintf(buf, len, "%s", g);
    return 1;
  }
  if ((hp == HP_LN1_POST || hp == HP_LN2_POST) && !m->arch->post_norms) return 0;
  if (hp >= HP_LN2 && hp <= HP_LN2_POST && m->hp.n_ff == 0) return 0; /* attention-only (icl-attn) */
  snprintf(buf, len, "blocks.%d.%s", layer, SUFFIX[hp]);
  return 1;
}

/* One dot-free segment, '*' matching any run: on a mismatch only the last star takes one more character, so the
 * time is at most len(p) x len(s) (the recursive matcher was exponential in the stars: 34 of them hung the fuzzer). */
static int glob_seg(const char *p, size_t np, const char *s, size_t ns) {
  size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;
  while (j < ns) {
    if (i < np && p[i] == '*') star = i++, mark = j;
    else if (i < np && p[i] == s[j]) i++, j++;
    else if (star != SIZE_MAX) i = star + 1, j = ++mark;
    else return 0;
  }
  while (i < np && p[i] == '*') i++;
  return i == np;
}

/* Glob match where '*' matches one dot-free run of characters: segment by segment between the dots, as a star
 * never spans one. */
static int glob(const char *p, const char *s) {
  for (;;) {
    const char *pe = strchr(p, '.'), *se = strchr(s, '.');
    size_t np = pe ? (size_t)(pe - p) : strlen(p), ns = se ? (size_t)(se - s) : strlen(s);
    if (!glob_seg(p, np, s, ns)) return 0;
    if (!pe || !se) return !pe && !se;
    p = pe + 1, s = se + 1;
  }
}

int icl_hk_for_points(struct icl_hookctx *hk, const char *pattern, icl_hk_point_fn fn, void *ud, icl_error *err) {
  const icl_model *m = hk->s->m;
  int count = 0;
  char name[96];
  for (int layer = -1; layer < m->hp.n_layer; layer++)
    for (int hp = 0; hp < (layer < 0 ? HP_COUNT : HP_LAYER_COUNT); hp++) {
      if (layer < 0 && hp < HP_LAYER_COUNT) continue;
      if (!icl_hook_name(m, layer, hp, name, sizeof name) || !glob(pattern, name)) continue;
      int rc = fn(hk, layer, hp, name, ud, err);
      if (rc) return -rc;
      count++;
    }
  if (count == 0)
    return -icl_error_set(err, ICL_EINVAL,
                          "hook point '%s' matches nothing (names look like blocks.0.hook_resid_post, "
                          "blocks.*.attn.hook_pattern; see docs/hooks.md)", pattern);
  return count;
}

int icl_hk_overlap(int64_t pb, int64_t pe, int64_t p0, int64_t n, int64_t *b, int64_t *e) {
  *b = pb > p0 ? pb : p0;
  *e = pe < p0 + n ? pe : p0 + n;
  return *b < *e;
}

unsigned char *icl_hk_want(struct icl_hookctx *hk, int layer, int hp) {
  return &hk->want[(layer + 1) * HP_COUNT + hp];
}

int icl_hk_pos_range(int64_t b, int64_t e, int64_t n, int64_t *pb, int64_t *pe, const char *what, icl_error *err) {
  if (b == 0 && e == 0) e = n;
  if (b < 0) b += n;
  if (e <= 0) e += n;
  if (b < 0 || e > n || b >= e)
    return icl_error_set(err, ICL_EINVAL, "%s: positions %lld..%lld (1-based) are outside the run of %lld tokens",
                         what, (long long)b + 1, (long long)e, (long long)n);
  *pb = b;
  *pe = e;
  return ICL_OK;
}

int icl_hk_head_list(const int *heads, int nh, int max_heads, const char *what, int **out, int *nsel, icl_error *err) {
  int n = heads ? nh : max_heads;
  int *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", what);
  for (int i = 0; i < n; i++) {
    h[i] = heads ? heads[i] : i;
    if (h[i] < 0 || h[i] >= max_heads) {
      free(h);
      return icl_error_set(err, ICL_EINVAL, "%s: head %d out of range 0..%d", what, heads[i], max_heads - 1);
    }
  }
  *out = h;
  *nsel = n;
  return ICL_OK;
}

int64_t icl_hk_view_positions(const icl_dt *v, int hp) {
  if (hp == HP_PATTERN) return v->ne[1];
  return v->ne[2] > 1 ? v->ne[2] : v->ne[1];
}

/* The site's view must have the point's layout: [row, n] ([hsz, heads, n] per head; the pattern [kv, n, heads])
 * for the chunk's n positions, so that a new architecture cannot announce a view the plan would misread. */
static int check_view(const struct icl_hookctx *hk, int layer, int hp, const icl_dt *v, icl_error *err) {
  icl_hk_geom g = icl_hk_geom_of(hk->s->m, hp);
  int ok = hp == HP_PATTERN ? v->ne[1] == hk->nc && v->ne[2] == g.heads && v->ne[0] == hk->p0 + hk->nc
           : g.heads        ? v->ne[0] == g.hsz && v->ne[1] == g.heads && v->ne[2] == hk->nc
                            : v->ne[0] == g.row && v->ne[1] == hk->nc && v->ne[2] == 1;
  if (ok && v->ne[3] == 1) return ICL_OK;
  char name[96], shape[64];
  icl_hook_name(hk->s->m, layer, hp, name, sizeof name);
  return icl_error_set(err, ICL_EINVAL, "hook %s: the forward pass gives a view of shape %s; the point's layout is "
                       "%lld floats per position (%d heads of %lld) for %lld positions", name,
                       icl_dt_shape_str(v, shape, sizeof shape), (long long)g.row, g.heads, (long long)g.hsz,
                       (long long)hk->nc);
}

int icl_hook_point(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, icl_error *err) {
  int rc = check_view(hk, layer, hp, view, err);
  unsigned char w = *icl_hk_want(hk, layer, hp);
  if (rc || !w) return rc;
  int64_t n = icl_hk_view_positions(view, hp);
  if (w & ICL_W_IV) rc = icl_hk_apply(hk, layer, hp, view, n, err);
  if (!rc && (w & ICL_W_CALLBACK)) rc = icl_hk_callback(hk, layer, hp, view, err);
  for (int i = 0; i < hk->ncaps && !rc; i++)
    if (hk->caps[i].layer == layer && hk->caps[i].hp == hp) rc = icl_hk_capture(hk, &hk->caps[i], view, n, err);
  return rc;
}

int icl_hook_wants(const struct icl_hookctx *hk, int layer, int hp) {
  return hk->want[(layer + 1) * HP_COUNT + hp] != 0;
}

int icl_hook_modifies(const struct icl_hookctx *hk, int layer, int hp) {
  return (hk->want[(layer + 1) * HP_COUNT + hp] & (ICL_W_IV | ICL_W_CALLBACK)) != 0;
}

int icl_hook_needs_pattern(const struct icl_hookctx *hk, int layer) { return icl_hook_wants(hk, layer, HP_PATTERN); }

/* ---- run lifecycle ---- */

static int alloc_device_needs(struct icl_hookctx *hk, icl_error *err) {
  icl_model *m = hk->s->m;
  int rc = ICL_OK;
  for (int il = 0; il < m->hp.n_layer && !rc; il++) {
    if (icl_hook_wants(hk, il, HP_PATTERN)) rc = icl_session_need_pattern(hk->s, err);
    if (!rc && icl_hook_wants(hk, il, HP_RESULT)) rc = icl_session_need_result(hk->s, err);
  }
  return rc;
}

static int alloc_logits(struct icl_hookctx *hk, icl_error *err) {
  const icl_run_opts *o = hk->o;
  icl_model *m = hk->s->m;
  if (o->logits != ICL_LOGITS_ALL && o->logits != ICL_LOGITS_LAST) return ICL_OK; /* SELECT: logits_select.c */
  int64_t all = o->stream && o->on_chunk && hk->n > m->chunk ? m->chunk : hk->n; /* streaming: a chunk's rows */
  int64_t shape[2] = {o->logits == ICL_LOGITS_ALL ? all : 1, m->hp.n_vocab};
  hk->res->logits = icl_tensor_new(2, shape);
  if (!hk->res->logits)
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld x %lld logits", (long long)shape[0],
                         (long long)shape[1]);
  return ICL_OK;
}

int icl_hooks_begin(icl_session *s, int64_t n, const icl_run_opts *o, icl_run_result *res, struct icl_hookctx **out,
                    icl_error *err) {
  icl_model *m = s->m;
  struct icl_hookctx *hk = calloc(1, sizeof *hk);
  if (!hk) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  *out = hk;
  hk->s = s, hk->o = o, hk->res = res, hk->n = n;
  hk->want = calloc((size_t)(m->hp.n_layer + 1) * HP_COUNT, 1);
  hk->ko_layer = calloc((size_t)m->hp.n_layer, sizeof *hk->ko_layer);
  if (!hk->want || !hk->ko_layer) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  int rc = icl_hk_resolve_captures(hk, err); /* resolve: captures, then the plan (interventions, knockouts) */
  if (!rc) rc = icl_hk_resolve_interventions(hk, err);
  if (!rc) rc = icl_hk_resolve_callbacks(hk, err);
  if (!rc) rc = icl_hk_resolve_knockouts(hk, err);
  if (!rc) rc = icl_hk_setup_results(hk, err);
  if (!rc) rc = alloc_device_needs(hk, err);
  if (!rc) rc = alloc_logits(hk, err);
  return rc;
}

int icl_hooks_chunk_begin(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err) {
  hk->p0 = pos0;
  hk->nc = n;
  if (!hk->o->stream) return ICL_OK;
  for (int i = 0; i < hk->ncaps; i++) { /* streaming: tensors hold this chunk's positions only */
    icl_hk_cap *k = &hk->caps[i];
    int64_t b, e;
    icl_tensor_free(hk->res->captures[i]);
    hk->res->captures[i] = NULL;
    if (!icl_hk_overlap(k->pb, k->pe, pos0, n, &b, &e)) continue;
    hk->res->captures[i] = icl_hk_capture_tensor(hk, k, e - b);
    if (!hk->res->captures[i]) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  }
  return ICL_OK;
}

int icl_hooks_chunk_end(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err) {
  if (!hk->o->on_chunk) return ICL_OK;
  int rc = hk->s->m->be->ops->sync(hk->s->m->be, err);
  if (!rc && hk->o->on_chunk(hk->o->chunk_ud, pos0, n, hk->res, err)) rc = err->code ? err->code : ICL_EINVAL;
  return rc;
}

void icl_hooks_end(struct icl_hookctx *hk) {
  if (!hk) return;
  icl_backend *be = hk->s->m->be;
  icl_error e; /* teardown: the run's result is already decided; the sync only keeps buffers alive until unused */
  be->ops->sync(be, &e);
  for (int i = 0; i < hk->ncaps; i++) free(hk->caps[i].heads);
  for (int i = 0; i < hk->nvbufs; i++) be->ops->buf_free(be, hk->vbufs[i]);
  if (hk->mask_buf) be->ops->buf_free(be, hk->mask_buf);
  free(hk->mask_host);
  free(hk->caps);
  free(hk->plan);
  free(hk->vbufs);
  free(hk->want);
  free(hk->ko_layer);
  free(hk);
}

void icl_run_result_free(icl_run_result *res) {
  if (!res) return;
  icl_tensor_free(res->logits);
  icl_tensor_free(res->lse);
  for (int i = 0; i < res->n_captures; i++) {
    if (res->names) free(res->names[i]);
    if (res->captures) icl_tensor_free(res->captures[i]);
  }
  free(res->names);
  free(res->captures);
  memset(res, 0, sizeof *res);
}
