/* The hooks of one run, as the run loop (session.c) and the forward pass (forward.c) see them. */
#ifndef ICL_HOOKS_INTERNAL_H
#define ICL_HOOKS_INTERNAL_H

#include "hook_points.h"
#include "model_internal.h"

struct icl_hookctx;

/* Resolves captures and interventions and allocates the captures' results; fails up front (clear message) when
 * names, heads, positions or memory needs are wrong. Allocates nothing of the session: the run asks
 * icl_hook_wants what to provide. */
int icl_hooks_begin(icl_model *m, int64_t n, const icl_run_opts *o, icl_run_result *res, struct icl_hookctx **out,
                    icl_error *err);

/* Prepares a chunk [pos0, pos0+n): knockout masks, streaming buffers. */
int icl_hooks_chunk_begin(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err);

/* Finishes a chunk: streaming callback. */
int icl_hooks_chunk_end(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err);

/* Frees the context (not the results); NULL allowed. */
void icl_hooks_end(struct icl_hookctx *hk);

/* Called by the forward pass at each hook point with the chunk's view of the point: [inner, n], or
 * [hd, heads, n] per head (the view's shape is checked against the point's layout, so a new architecture cannot
 * announce a view the hooks would misread). Applies the plan, the callback, the captures. Returns an error code. */
int icl_hook_point(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, icl_error *err);

/* 1 if the forward pass must compute point (layer, hp) (only hook_result is optional). */
int icl_hook_wants(const struct icl_hookctx *hk, int layer, int hp);

/* 1 if an intervention or callback may change point (layer, hp). */
int icl_hook_modifies(const struct icl_hookctx *hk, int layer, int hp);

/* Sets *out to the knockout mask for a layer's attention (NULL: no knockout there); uploads it to the device, so
 * a failed sync or write is returned as an error, never read as "no knockout". */
int icl_hook_mask(struct icl_hookctx *hk, int layer, const icl_dt **out, icl_error *err);

/* 1 if the layer's attention pattern must be written. */
int icl_hook_needs_pattern(const struct icl_hookctx *hk, int layer);

#endif
