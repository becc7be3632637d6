/* The whole forward pass in plain scalar C, one token at a time (llama2.c style), independent of the backend
 * contract and the hook machinery: the oracle for end-to-end tests on tiny models. */
#ifndef ICL_REF_FORWARD_H
#define ICL_REF_FORWARD_H

#include <stdint.h>

#include "icl/icl.h"

/* Runs tokens through the model in path and writes logits [n, n_vocab] (n_vocab = rows of token_embd; icl-attn
 * goes to icl_ref_forward_inputs).
 * zero_heads: n_zero (layer, head) pairs whose hook_z is zeroed at every position; may be NULL. */
int icl_ref_forward(const char *path, const int32_t *tokens, int64_t n, const int *zero_heads, int n_zero,
                    float *logits, int64_t *n_vocab, icl_error *err);

/* icl-attn (ref_forward_attn.c): as icl_ref_forward, with continuous inputs [n, input_length] (NULL = zeros);
 * token -1 = no token embedding; n_vocab receives the logits width (classes for a classifier). */
int icl_ref_forward_inputs(const char *path, const int32_t *tokens, int64_t n, const float *inputs,
                           const int *zero_heads, int n_zero, float *logits, int64_t *n_vocab, icl_error *err);

#endif
