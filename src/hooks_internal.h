/* Hook machinery used by the run loop (session.c) and the forward pass (forward.c). */
#ifndef ICL_HOOKS_INTERNAL_H
#define ICL_HOOKS_INTERNAL_H

#include "model_internal.h"

/* Resolves captures and interventions, allocates results and device buffers; fails up front (clear message) when
 * names, heads, positions or memory needs are wrong. */
int icl_hooks_begin(icl_session *s, int64_t n, const icl_run_opts *o, icl_run_result *res, struct icl_hookctx **out,
                    icl_error *err);

/* Prepares a chunk [pos0, pos0+n): knockout masks, streaming buffers. */
int icl_hooks_chunk_begin(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err);

/* Finishes a chunk: streaming callback. */
int icl_hooks_chunk_end(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err);

/* Frees the context (not the results); NULL allowed. */
void icl_hooks_end(struct icl_hookctx *hk);

/* Hook point name of (layer, hp) into buf; returns 0 if the point does not exist for this model. */
int icl_hook_name(const icl_model *m, int layer, int hp, char *buf, size_t len);

#endif
