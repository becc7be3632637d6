/* Architectures as data: what the forward pass reads to build a model's layers. */
#ifndef ICL_ARCH_H
#define ICL_ARCH_H

#include "icl/gguf.h"
#include "icl/model.h"

typedef enum { ICL_ACT_SILU = 0, ICL_ACT_GELU = 1 } icl_act;

typedef struct icl_arch {
  const char *name;      /* general.architecture */
  int rope_mode;         /* ICL_ROPE_NORMAL / ICL_ROPE_NEOX */
  icl_act act;           /* gated FFN activation */
  int qk_norm;           /* per-head RMSNorm of q and k (attn_q_norm, attn_k_norm) */
  int post_norms;        /* post_attention_norm and post_ffw_norm around the sublayers */
  int qkv_bias;          /* attn_q/k/v.bias */
  int embed_scale;       /* embeddings multiplied by sqrt(d_model) */
  int swa_period;        /* layer il is sliding-window iff il % swa_period < swa_period - 1 (0 = none) */
  float swa_rope_base;   /* RoPE base of sliding-window layers (0 = the global base) */
  int default_window;    /* sliding window when the file has no <arch>.attention.sliding_window */
  int from_file;         /* the features below are options read from <arch>.* keys (icl-attn, arch_attn.c) */
} icl_arch;

typedef enum { ICL_NORM_RMS = 0, ICL_NORM_LAYER = 1, ICL_NORM_NONE = 2 } icl_norm_kind;
typedef enum { ICL_POS_ROPE = 0, ICL_POS_LEARNED = 1, ICL_POS_NONE = 2 } icl_pos_kind;
typedef enum { ICL_OUT_UNEMBED = 0, ICL_OUT_CLASSIFIER = 1 } icl_out_kind;

/* Per-model features the forward pass branches on: fixed by the arch entry, or read from the file. */
typedef struct icl_feat {
  icl_norm_kind norm;  /* every norm of the model */
  icl_pos_kind pos;    /* how positions enter */
  icl_out_kind out;    /* logits over a vocabulary or a classifier head */
  float attn_scale;    /* multiplies q.k */
  int smeared_key;     /* keys mixed with the previous position's key (blk.L.attn_smear) */
  int gated_ffn;       /* down(act(gate) * up) rather than down(gelu(up)) */
  int n_cls;           /* classifier hidden layers cls.0..n_cls-1 (Linear + ReLU) */
} icl_feat;

/* The architecture entry for general.architecture, or NULL if unsupported. */
const icl_arch *icl_arch_find(const char *name);

/* Comma-separated list of supported architectures (for messages). */
const char *icl_arch_list(void);

/* Reads hyperparameters from g for arch a; errors name the file and the missing/bad key. */
int icl_arch_read_hparams(const icl_gguf *g, const icl_arch *a, icl_hparams *hp, int *window, icl_error *err);

/* Features of a fixed architecture (llama, qwen2, gemma3) with hyperparameters hp. */
void icl_arch_feat_fixed(const icl_arch *a, const icl_hparams *hp, icl_feat *f);

/* icl-attn: reads hyperparameters and options from g (arch_attn.c); errors name file, key, value, expectation. */
int icl_arch_attn_read(const icl_gguf *g, const icl_arch *a, icl_hparams *hp, icl_feat *f, icl_error *err);

#endif
