/* Tiny random models of each architecture, written with icl's own GGUF writer (for tests and examples). */
#ifndef ICL_TESTMODEL_H
#define ICL_TESTMODEL_H

#include <stdint.h>

#include "icl/icl.h"

/* Shape of a tiny model; zero fields take defaults (d 256, 4 heads of 64, 2 KV heads, ff 512, 2 layers or 6 for
 * gemma3, sliding window 5). */
typedef struct icl_tiny_spec {
  const char *arch;   /* "llama", "qwen2", "gemma3" */
  uint32_t wtype;     /* weight type of the matrices (icl_type) */
  uint64_t seed;
  int n_layer, d, n_head, n_head_kv, head_dim, ff, window;
} icl_tiny_spec;

/* Writes a tiny random model with a byte-level BPE vocabulary (256 byte tokens, BOS, EOS) to path. */
int icl_write_tiny_model(const char *path, const icl_tiny_spec *spec, icl_error *err);

#endif
