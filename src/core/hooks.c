/* The hooks of one run: its lifecycle (resolve the requests, then per chunk apply the plan, call back, capture at
 * each site the forward pass announces). It calls down only: captures
 * (hooks_capture.c), interventions into plan entries (hooks_resolve.c), applying them (hooks_apply.c), and the
 * hook points themselves (hook_points.c). What the run needs allocated, it answers when asked (session.c). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "hooks_plan.h"
#include "ops.h"

/* The site's view must have the point's layout: [row, n] ([hsz, heads, n] per head; the pattern [kv, n, heads])
 * for the chunk's n positions, so that a new architecture cannot announce a view the plan would misread. */
static int check_view(const struct icl_hookctx *hk, int layer, int hp, const icl_dt *v, icl_error *err) {
  icl_hk_geom g = icl_hk_geom_of(hk->m, hp);
  int ok = hp == HP_PATTERN ? v->ne[1] == hk->nc && v->ne[2] == g.heads && v->ne[0] == hk->p0 + hk->nc
           : g.heads        ? v->ne[0] == g.hsz && v->ne[1] == g.heads && v->ne[2] == hk->nc
                            : v->ne[0] == g.row && v->ne[1] == hk->nc && v->ne[2] == 1;
  if (ok && v->ne[3] == 1) return ICL_OK;
  char name[96], shape[64];
  icl_hook_name(hk->m, layer, hp, name, sizeof name);
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

int icl_hooks_begin(icl_model *m, int64_t n, const icl_run_opts *o, icl_run_result *res, struct icl_hookctx **out,
                    icl_error *err) {
  struct icl_hookctx *hk = calloc(1, sizeof *hk);
  if (!hk) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  *out = hk;
  hk->m = m, hk->o = o, hk->res = res, hk->n = n;
  hk->want = calloc((size_t)(m->hp.n_layer + 1) * HP_COUNT, 1);
  hk->ko_layer = calloc((size_t)m->hp.n_layer, sizeof *hk->ko_layer);
  if (!hk->want || !hk->ko_layer) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  int rc = icl_hk_resolve_captures(hk, err); /* resolve: captures, then the plan (interventions, knockouts) */
  if (!rc) rc = icl_hk_resolve_interventions(hk, err);
  if (!rc) rc = icl_hk_resolve_callbacks(hk, err);
  if (!rc) rc = icl_hk_resolve_knockouts(hk, err);
  if (!rc) rc = icl_hk_setup_results(hk, err);
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
  int rc = hk->m->be->ops->sync(hk->m->be, err);
  if (!rc && hk->o->on_chunk(hk->o->chunk_ud, pos0, n, hk->res, err)) rc = err->code ? err->code : ICL_EINVAL;
  return rc;
}

void icl_hooks_end(struct icl_hookctx *hk) {
  if (!hk) return;
  icl_backend *be = hk->m->be;
  icl_error e; /* teardown: the run's result is already decided; the sync only keeps buffers alive until unused */
  be->ops->sync(be, &e);
  for (int i = 0; i < hk->ncaps; i++) free(hk->caps[i].heads);
  for (int i = 0; i < hk->nvbufs; i++) be->ops->buf_free(be, hk->vbufs[i]);
  if (hk->mask_buf) be->ops->buf_free(be, hk->mask_buf);
  free(hk->mask_host);
  free(hk->allowed);
  free(hk->caps);
  for (int i = 0; i < hk->nplan; i++)
    if (hk->plan[i].op == ICL_PLAN_MASK) free(hk->plan[i].edges);
  free(hk->plan);
  free(hk->vbufs);
  free(hk->want);
  free(hk->ko_layer);
  free(hk);
}
