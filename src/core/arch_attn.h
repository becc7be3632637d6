/* The icl-attn configuration of a GGUF file as plain values, for the trainer (which cannot include arch.h: its
 * enums share names with include/icl/train.h). Read by the same code as icl_arch_attn_read, so a checkpoint the
 * trainer resumes is the model inference runs. */
#ifndef ICL_ARCH_ATTN_H
#define ICL_ARCH_ATTN_H

#include "icl/gguf.h"

typedef struct icl_attn_file {
  int n_layer, n_head, d_model, d_head, n_ctx; /* block_count, head_count, embedding_length, key_length, ctx */
  int vocab;                                   /* rows of token_embd.weight (0 = none) */
  int n_out;                                   /* rows of output.weight (vocabulary or classes) */
  int input_len, d_ff, cls_hidden, smeared_key, rope_dims;
  const char *norm, *position, *output;        /* "layer"|"rms"|"none", "learned"|"rope"|"none", "unembed"|"classifier" */
  float eps, rope_base, attn_scale;
} icl_attn_file;

/* Reads and checks g's icl-attn keys and tensor names (icl_arch_attn_read); errors name the file and the key. */
int icl_attn_file_read(const icl_gguf *g, icl_attn_file *out, icl_error *err);

#endif
