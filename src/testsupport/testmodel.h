/* Tiny random models of each architecture, written with icl's own GGUF writer (for tests and examples). */
#ifndef ICL_TESTMODEL_H
#define ICL_TESTMODEL_H

#include <stdint.h>

#include "icl/gguf.h"
#include "icl/icl.h"

/* Shape of a tiny model; zero fields take defaults (d 256, 4 heads of 64, 2 KV heads, ff 512, 2 layers or 6 for
 * gemma3, sliding window 5). */
typedef struct icl_tiny_spec {
  const char *arch;   /* "llama", "qwen2", "gemma3" */
  uint32_t wtype;     /* weight type of the matrices (icl_type) */
  uint32_t vtype;     /* weight type of attn_v (0: wtype; a file that mixes types within q/k/v, as Gemma 3's does) */
  uint64_t seed;
  int n_layer, d, n_head, n_head_kv, head_dim, ff, window;
} icl_tiny_spec;

/* The test models' one generator: splitmix64 step of *s, mapped to a uniform float in [-1, 1). */
float icl_testmodel_uniform(uint64_t *s);

/* Writes a tiny random model with a byte-level BPE vocabulary (256 byte tokens, BOS, EOS) to path. */
int icl_write_tiny_model(const char *path, const icl_tiny_spec *spec, icl_error *err);

/* Writes a random-weight model with the exact tensor table (names, shapes, per-tensor types), hyperparameters
 * and vocabulary size of a real model: like = "smollm2" (SmolLM2-135M-Instruct Q4_1) or "gemma3" (Gemma 3
 * 270M Q4_K_M). The vocabulary is synthetic (special tokens, bytes, letter strings). */
int icl_write_like_model(const char *path, const char *like, uint64_t seed, icl_error *err);

/* The names icl_write_like_model accepts, NULL-terminated, and the real file each one copies. */
extern const char *const icl_like_names[];
extern const char *const icl_like_files[];

/* Adds a random [ne0, ne1] tensor (center + scale * uniform[-1, 1)) quantized to type; s is the RNG state. */
int icl_testmodel_tensor(icl_gguf_writer *w, const char *name, uint32_t type, int64_t ne0, int64_t ne1,
                         float center, float scale, uint64_t *s, icl_error *err);

#endif
