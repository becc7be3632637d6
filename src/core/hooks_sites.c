/* The run context's view of its sites: the want bits of each, and the sites a request's pattern names. Used by the
 * resolve, capture and apply files (so they never call up into the lifecycle of hooks.c). */
#include "hooks_plan.h"

/* icl_hook_points_match with a callback that takes the context. */
typedef struct for_points_ud {
  struct icl_hookctx *hk;
  icl_hk_point_fn fn;
  void *ud;
} for_points_ud;

static int for_point(void *ud, int layer, int hp, const char *name, icl_error *err) {
  for_points_ud *f = ud;
  return f->fn(f->hk, layer, hp, name, f->ud, err);
}

int icl_hk_for_points(struct icl_hookctx *hk, const char *pattern, icl_hk_point_fn fn, void *ud, icl_error *err) {
  for_points_ud f = {hk, fn, ud};
  return icl_hook_points_match(hk->m, pattern, for_point, &f, err);
}

unsigned char *icl_hk_want(struct icl_hookctx *hk, int layer, int hp) {
  return &hk->want[(layer + 1) * HP_COUNT + hp];
}
