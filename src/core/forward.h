/* The forward pass over one chunk of a session (forward.c), called by the run loop (session.c) and the reduced
 * logits (logits_select.c). */
#ifndef ICL_FORWARD_H
#define ICL_FORWARD_H

#include "hooks_internal.h"
#include "session_internal.h"

/* Evaluates tokens[0..n) (n <= chunk) at positions s->n_past..; hooks may be NULL. Leaves the final normalized
 * hidden state in s->a.h. */
int icl_forward_chunk(icl_session *s, const int32_t *tokens, int64_t n, struct icl_hookctx *hk, icl_error *err);

/* Computes logits rows [r0, r0+nr) of the current chunk into s->a.logits (nr <= logit_rows). */
int icl_forward_logits(icl_session *s, int64_t r0, int64_t nr, icl_error *err);

#endif
