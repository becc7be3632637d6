/* Reduced logits (ICL_LOGITS_SELECT): selected ids and the log-sum-exp per position, per LM-head sub-chunk. */
#ifndef ICL_LOGITS_SELECT_H
#define ICL_LOGITS_SELECT_H

#include "session_internal.h"

/* Checks opts' ids and allocates res->logits [n, n_logit_ids] (none when no ids) and res->lse [n]. */
int icl_logits_select_alloc(const icl_model *m, int64_t n, const icl_run_opts *o, icl_run_result *res, icl_error *err);

/* Computes the LM head of the chunk just evaluated (positions pos0.., nc rows) sub-chunk by sub-chunk and keeps
 * only the selected logits and the log-sum-exp of each row (the lse_select op, on the device). */
int icl_logits_select_chunk(icl_session *s, int64_t pos0, int64_t nc, const icl_run_opts *o, icl_run_result *res,
                            icl_error *err);

#endif
