/* The loaded model and its layers (owner: model.c, model_attn.c); read by the run path, never changed by it. */
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
  icl_session *run_session; /* icl_model_run's session and run cache (owned by session.c, which creates it) */
  void (*run_session_free)(icl_session *); /* set with run_session: how the model frees what it holds */
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

#endif
