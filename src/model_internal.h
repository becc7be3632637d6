/* Model, layer and session structures shared by model.c, forward.c, session.c and hooks.c. */
#ifndef ICL_MODEL_INTERNAL_H
#define ICL_MODEL_INTERNAL_H

#include "arch.h"
#include "backend.h"
#include "icl/model.h"

typedef struct icl_layer {
  icl_dt attn_norm;            /* f32 [d] */
  icl_dt wq, wk, wv, wo;       /* [d, nh*hd], [d, nkv*hd] x2, [nh*hd, d] any weight type */
  icl_dt bq, bk, bv;           /* f32 biases (qwen2), buf NULL if absent */
  icl_dt q_norm, k_norm;       /* f32 [hd] (gemma3) */
  icl_dt post_attn_norm;       /* f32 [d] (gemma3) */
  icl_dt ffn_norm;             /* f32 [d] */
  icl_dt w_gate, w_up, w_down; /* [d, ff] x2, [ff, d] */
  icl_dt post_ffn_norm;        /* f32 [d] (gemma3) */
  icl_dt attn_norm_b, ffn_norm_b; /* f32 [d] LayerNorm biases (icl-attn norm = layer), buf NULL if absent */
  icl_dt bo, b_up, b_down;     /* f32 [d], [ff], [d] optional biases (icl-attn) */
  icl_dt smear_keep, smear_prev; /* f32 [nh*hd]: sigmoid(alpha_h), 1 - sigmoid(alpha_h) per key element (smeared) */
  int window;                  /* sliding window of this layer, 0 = global */
  float rope_base;             /* RoPE base of this layer */
} icl_layer;

struct icl_model {
  char path[1024];
  const icl_arch *arch;
  icl_hparams hp;
  int window;           /* the file's sliding window */
  icl_tokenizer *tok;
  icl_backend *be;
  char device[256];
  icl_dt tok_embd;      /* [d, vocab] */
  icl_dt output_norm;   /* f32 [d] */
  icl_dt output;        /* [d, vocab]; == tok_embd when tied */
  icl_layer *layers;    /* [n_layer] */
  icl_feat feat;        /* norm, positions, output head... (arch.h) */
  icl_dt tok_table;     /* [d, n_tokens + 1]: token_embd plus a zero row for id -1 (icl-attn) */
  icl_dt pos_embd;      /* f32 [d, n_ctx_train] learned positions, buf NULL if absent */
  icl_dt inp_proj, inp_proj_b; /* [input_length, d], f32 [d]; buf NULL: inputs added as they are */
  icl_dt output_norm_b; /* f32 [d] (norm = layer) */
  icl_dt output_b;      /* f32 [n_vocab] optional */
  icl_dt *cls_w, *cls_b; /* [n_cls]: classifier hidden layers [d, d], f32 [d] */
  icl_buf **bufs;       /* every weight buffer, freed with the model */
  int n_bufs;
  size_t weight_bytes;
  int n_ctx, chunk;
  icl_session *run_session; /* reused by icl_model_run */
  int32_t *run_tokens;      /* [n_ctx]: the tokens of the last successful icl_model_run */
  int64_t run_clean;        /* its leading positions that no intervention reached (0 after a failure) */
};

/* Uploads host bytes as a weight buffer of the model (freed with it), described by *out. */
int icl_model_upload(icl_model *m, const void *data, size_t nbytes, uint32_t type, const int64_t *ne, icl_dt *out,
                     icl_error *err);

/* Binds tensor name of shape [ne0, ne1] (ne1 = 0: a vector; vec_f32: converted to f32); absent and not required:
 * out->buf = NULL. */
int icl_model_bind(icl_model *m, const icl_gguf *g, const char *name, int required, int64_t ne0, int64_t ne1,
                   int vec_f32, icl_dt *out, icl_error *err);

/* Binds every tensor of an icl-attn model by presence (model_attn.c). */
int icl_model_bind_attn(icl_model *m, const icl_gguf *g, icl_error *err);

/* Device activations for one chunk of up to `chunk` tokens: one buffer per view (session.c alloc_acts). */
typedef struct icl_acts {
  icl_dt x;            /* residual [d, C] */
  icl_dt h;            /* normed / scratch [d, C] */
  icl_dt q;            /* [hd, nh, C] */
  icl_dt z;            /* attention output per head [hd, nh, C] */
  icl_dt o;            /* attention or FFN output [d, C] */
  icl_dt gate, up;     /* [ff, C] */
  icl_dt ids, pos;     /* i32 [C] */
  icl_dt inputs;       /* [input_length, C] continuous inputs of the chunk (icl-attn), buf NULL if none */
  icl_dt logits;       /* [vocab, L] for L = logit sub-chunk rows */
  int logit_rows;
  icl_buf *pattern_buf; /* f32 [n_ctx, C, nh] when patterns are needed, else NULL (knockout masks: hooks.c) */
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
};

struct icl_hookctx;

/* Evaluates tokens[0..n) (n <= chunk) at positions s->n_past..; hooks may be NULL. Leaves the final normalized
 * hidden state in s->a.h. */
int icl_forward_chunk(icl_session *s, const int32_t *tokens, int64_t n, struct icl_hookctx *hk, icl_error *err);

/* Computes logits rows [r0, r0+nr) of the current chunk into s->a.logits (nr <= logit_rows). */
int icl_forward_logits(icl_session *s, int64_t r0, int64_t nr, icl_error *err);

/* Allocates the pattern buffer and the hook_result scratch on demand. */
int icl_session_need_pattern(icl_session *s, icl_error *err);
int icl_session_need_result(icl_session *s, icl_error *err);

/* Hook point ids within a layer. */
typedef enum icl_hp {
  HP_RESID_PRE, HP_LN1, HP_Q, HP_K, HP_V, HP_PATTERN, HP_Z, HP_RESULT, HP_ATTN_OUT, HP_LN1_POST, HP_RESID_MID,
  HP_LN2, HP_MLP_PRE, HP_MLP_POST, HP_MLP_OUT, HP_LN2_POST, HP_RESID_POST, HP_LAYER_COUNT
} icl_hp;
/* Points outside layers use layer -1: HP_EMBED, HP_LN_FINAL */
enum { HP_EMBED = HP_LAYER_COUNT, HP_LN_FINAL, HP_COUNT };

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
