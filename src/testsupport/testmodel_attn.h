/* Tiny random icl-attn models (docs/gguf.md) for tests, written with icl's own GGUF writer. */
#ifndef ICL_TESTMODEL_ATTN_H
#define ICL_TESTMODEL_ATTN_H

#include <stdint.h>

#include "icl/icl.h"

/* Options of a tiny icl-attn model; zero fields take defaults (1 layer, d 32, 4 heads of 8, ctx 64, vocab 16,
 * norm "layer", position "learned", scale 1/sqrt(d_head), unembed). */
typedef struct icl_attn_spec {
  uint64_t seed;
  int n_layer, d, n_head, head_dim, n_ctx;
  int vocab;            /* token_embd rows; -1 = no token embedding */
  int input_length;     /* continuous input width (0 = none) */
  int inp_proj;         /* 1: inp_proj.weight + bias; 0: inputs added as they are (input_length = d) */
  const char *norm;     /* "layer", "rms", "none" */
  const char *position; /* "learned", "rope", "none" */
  float scale;          /* attention.scale; 0 = 1/sqrt(d_head) */
  int no_wo;            /* 1: no attn_output (n_head*d_head = d) */
  int smeared;          /* smeared keys */
  int biases;           /* q/k/v/o, MLP and output biases */
  int ff;               /* MLP width (0 = attention-only) */
  int n_classes;        /* > 0: classifier head with this many classes */
  int n_cls_hidden;     /* classifier hidden layers */
  int untied;           /* unembed: write output.weight */
  uint32_t wtype;       /* type of the matrices and embeddings (0 = F32; e.g. ICL_TYPE_F16); vectors stay F32 */
} icl_attn_spec;

/* Writes a random icl-attn model with the given options to path. */
int icl_write_attn_model(const char *path, const icl_attn_spec *spec, icl_error *err);

#endif
