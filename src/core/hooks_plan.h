/* The hook context shared by the hook files. A run's requests are resolved once (hooks_resolve.c) into captures
 * and a plan: a list of entries, each one step at one hook site; the forward pass applies the plan entries of a
 * site when it reaches it (hooks_apply.c). See docs/hooks.md, "Resolve, plan, apply". */
#ifndef ICL_HOOKS_PLAN_H
#define ICL_HOOKS_PLAN_H

#include "hook_points.h"
#include "hooks_internal.h"

/* What a site is wanted for (icl_hookctx.want). */
enum { ICL_W_CAPTURE = 1, ICL_W_IV = 2, ICL_W_CALLBACK = 4 };

/* A resolved capture: site, positions [pb, pe), the selected heads (per-head points), its index in the result. */
typedef struct icl_hk_cap {
  int layer, hp;
  int64_t pb, pe;
  int *heads, nsel;
  int index;
} icl_hk_cap;

typedef enum icl_plan_op {
  ICL_PLAN_FILL, /* site[p][col + c] = fill */
  ICL_PLAN_COPY, /* site[p][col + c] = value[p - pb][vcol + c] */
  ICL_PLAN_ADD,  /* site[p][col + c] += value[p - pb][vcol + c] (col = 0, ncol = the whole row) */
  ICL_PLAN_MASK  /* attention of `layer`: pattern[head][q][k] = 0 (score -inf) for the edges (q, k), or with
                  * `allow` for every causal (q, k) that is not an edge */
} icl_plan_op;

/* One plan entry. FILL/COPY/ADD act on the positions [pb, pe) of site (layer, hp), columns [col, col + ncol) of
 * each row of `row` floats; the value rows are vstride floats apart in vbuf (vrows = 1: one row for every
 * position). MASK entries keep the caller's validated heads (NULL = all) and own their checked edge pairs, 0-based
 * from the start of the run (icl_hooks_end frees them). */
typedef struct icl_plan_entry {
  icl_plan_op op;
  int layer, hp;
  int64_t pb, pe;
  int64_t row, col, ncol;
  float fill;
  icl_buf *vbuf; /* owned by the context (icl_hookctx.vbufs) */
  int64_t vcol, vstride, vrows;
  const int *heads;
  int n_heads;
  int64_t *edges;
  int64_t n_edges;
  int allow; /* MASK: the edges are the ones kept (ICL_IV_MASK), not the ones masked */
} icl_plan_entry;

struct icl_hookctx {
  icl_model *m;
  const icl_run_opts *o;
  icl_run_result *res;
  int64_t n, p0, nc;       /* run length; the current chunk [p0, p0 + nc) */
  icl_hk_cap *caps;
  int ncaps;
  icl_plan_entry *plan;
  int nplan;
  icl_buf **vbufs;         /* uploaded values, one per value-carrying request */
  int nvbufs;
  unsigned char *want;     /* [(layer+1)*HP_COUNT + hp]: ICL_W_* bits */
  int *ko_layer;           /* per layer: 1 if a MASK entry targets it */
  float *mask_host;        /* [nh, chunk, n] */
  unsigned char *allowed;  /* [chunk, n]: one allow entry's edges in the chunk (NULL without allow entries) */
  icl_buf *mask_buf;
  icl_dt mask_view;
};

/* The want bits of site (layer, hp). */
unsigned char *icl_hk_want(struct icl_hookctx *hk, int layer, int hp);

/* Calls fn for every hook point whose name matches pattern; returns the match count or an error (< 0). */
typedef int (*icl_hk_point_fn)(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud,
                               icl_error *err);
int icl_hk_for_points(struct icl_hookctx *hk, const char *pattern, icl_hk_point_fn fn, void *ud, icl_error *err);

/* Resolve (hooks_resolve.c): every intervention request of the run into plan entries (values uploaded);
 * knockouts and masks into MASK entries (and the mask's memory). */
int icl_hk_resolve_interventions(struct icl_hookctx *hk, icl_error *err);
int icl_hk_resolve_knockouts(struct icl_hookctx *hk, icl_error *err);

/* Captures (hooks_capture.c): resolve capture requests and callbacks, allocate results, read a site. */
int icl_hk_resolve_captures(struct icl_hookctx *hk, icl_error *err);
int icl_hk_resolve_callbacks(struct icl_hookctx *hk, icl_error *err);
int icl_hk_setup_results(struct icl_hookctx *hk, icl_error *err);
icl_tensor *icl_hk_capture_tensor(struct icl_hookctx *hk, const icl_hk_cap *k, int64_t npos);
int icl_hk_capture(struct icl_hookctx *hk, const icl_hk_cap *k, const icl_dt *view, int64_t n, icl_error *err);
int icl_hk_callback(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, icl_error *err);

/* Apply (hooks_apply.c): the FILL/COPY/ADD entries of site (layer, hp) on its chunk view of n positions. */
int icl_hk_apply(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, int64_t n, icl_error *err);

#endif
