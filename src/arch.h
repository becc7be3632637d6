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
} icl_arch;

/* The architecture entry for general.architecture, or NULL if unsupported. */
const icl_arch *icl_arch_find(const char *name);

/* Comma-separated list of supported architectures (for messages). */
const char *icl_arch_list(void);

/* Reads hyperparameters from g for arch a; errors name the file and the missing/bad key. */
int icl_arch_read_hparams(const icl_gguf *g, const icl_arch *a, icl_hparams *hp, int *window, icl_error *err);

#endif
