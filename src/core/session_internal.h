/* A session: the KV cache and one chunk's activations (owner: session.c; the forward pass reads and writes them). */
#ifndef ICL_SESSION_INTERNAL_H
#define ICL_SESSION_INTERNAL_H

#include "model_internal.h"

/* Device activations for one chunk of up to `chunk` tokens: one buffer per view (session.c alloc_acts). */
typedef struct icl_acts {
  icl_dt x;            /* residual [d, C] */
  icl_dt x2;           /* [d, C]: a folded post-norm add writes the new residual here, then x and x2 swap */
  icl_dt h;            /* normed / scratch [d, C] */
  icl_dt q;            /* [hd, nh, C] */
  icl_dt z;            /* attention output per head [hd, nh, C] */
  icl_dt o;            /* attention or FFN output [d, C] */
  icl_dt gate, up;     /* [ff, C] */
  icl_dt ids, pos;     /* i32 [C] */
  icl_dt inputs;       /* [input_length, C] continuous inputs of the chunk (icl-attn), buf NULL if none */
  icl_dt logits;       /* [vocab, L] for L = logit sub-chunk rows */
  int logit_rows;
  icl_buf *pattern_buf; /* f32 [n_ctx, C, nh] when patterns are needed, else NULL (knockout masks: hooks_resolve.c) */
  icl_dt result;        /* [d, nh, C] per-head outputs for hook_result, lazily allocated */
  icl_buf *result_buf;
  icl_buf *zmask_buf;   /* [hd, nh, C] scratch for hook_result */
} icl_acts;

struct icl_session {
  icl_model *m;
  int64_t n_past;
  icl_buf **kv_bufs;    /* [2 * n_layer]: layer il's k buffer at 2*il, its v buffer at 2*il + 1 */
  icl_dt *k, *v;        /* per layer [hd, nkv, n_ctx] f32 */
  icl_acts a;
  size_t bytes;
  icl_dt k_last;        /* [nkv*hd, n_layer] raw (unsmeared) key of the last position evaluated (smeared_key) */
  const float *inputs;  /* [n, input_length] host inputs of the current run, row 0 = position inputs_pos0 */
  int64_t inputs_pos0, inputs_n;
  int32_t *run_tokens;  /* [n_ctx]: the tokens of the last successful icl_model_run (its run session only) */
  int64_t run_clean;    /* their leading positions that no intervention reached (0 after a failure) */
};

#endif
