/* Models: loading a GGUF file onto a backend, sessions with a KV cache, and hooked runs. */
#ifndef ICL_MODEL_H
#define ICL_MODEL_H

#include <stdint.h>

#include "icl/hooks.h"
#include "icl/icl.h"
#include "icl/tensor.h"
#include "icl/tokenizer.h"

typedef struct icl_model icl_model;
typedef struct icl_session icl_session;

/* Hyperparameters read from the file. */
typedef struct icl_hparams {
  char arch[32];     /* "llama", "gemma3", "qwen2", "icl-attn" */
  char name[128];    /* general.name or the file name */
  int n_layer;
  int n_embd;        /* d_model */
  int n_head;
  int n_head_kv;
  int head_dim;      /* key/value length per head */
  int n_ff;
  int n_vocab;
  int n_ctx_train;
  int n_rot;
  float eps;
  float rope_base;
  int n_tokens;       /* rows of token_embd: token ids 0..n_tokens-1 (n_vocab is the logits width) */
  int input_length;   /* icl-attn: width of continuous per-position inputs (0 = none) */
  int allow_no_token; /* icl-attn: token id -1 means "no token embedding at this position" */
} icl_hparams;

/* Options for icl_model_load; zero-initialized means defaults. */
typedef struct icl_load_opts {
  const char *backend; /* NULL or "auto", "cpu", "vulkan" */
  int device;          /* Vulkan device index; -1 = ICL_DEVICE or the preferred one */
  int n_threads;       /* CPU backend threads; 0 = ICL_THREADS or the core count */
  int n_ctx;           /* KV cache capacity in tokens; 0 = min(training context, 4096) */
  int chunk;           /* tokens per forward chunk; 0 = 512 */
  int precision;       /* ICL_PRECISION_EXACT (0, batch-independent results) or ICL_PRECISION_FAST (decoding) */
} icl_load_opts;

/* Loads and validates a model; errors name the file and the key or tensor at fault. */
int icl_model_load(const char *path, const icl_load_opts *opts, icl_model **out, icl_error *err);

/* Frees the model and its device memory; NULL allowed. */
void icl_model_free(icl_model *m);

/* The model's hyperparameters. */
const icl_hparams *icl_model_hparams(const icl_model *m);

/* The model's tokenizer. */
const icl_tokenizer *icl_model_tokenizer(const icl_model *m);

/* Name of the backend in use ("cpu", "vulkan") and, for Vulkan, the device name. */
const char *icl_model_backend(const icl_model *m);
const char *icl_model_device(const icl_model *m);

/* Work the model's backend has issued since it was loaded: dispatches, barriers, submits, host waits, bytes bound
 * for reading (docs/vulkan.md, "Counts"). */
typedef struct icl_work_counts {
  uint64_t dispatches, barriers, submits, host_waits, bytes_read;
} icl_work_counts;

/* Fills *out with the backend's counts; 0, or ICL_EINVAL (err set) when the backend counts nothing (cpu, ref). */
int icl_model_work_counts(const icl_model *m, icl_work_counts *out, icl_error *err);

/* Bytes of device memory held by the weights and by the current session buffers. */
size_t icl_model_weight_bytes(const icl_model *m);

/* The context (KV cache capacity in tokens) sessions and runs of this model get. */
int icl_model_n_ctx(const icl_model *m);

/* Attention geometry of one layer (what recomputing hook_pattern from hook_q / hook_k needs). */
typedef struct icl_layer_info {
  float rope_base;  /* RoPE base of this layer */
  int window;       /* sliding window in tokens (a query sees itself and window - 1 keys before), 0 = global */
  int rope_neox;    /* 1: NeoX RoPE (rotates dims i and i + d_head/2), 0: interleaved (dims 2i and 2i + 1) */
  float attn_scale; /* scores are q.k * attn_scale before the mask and softmax */
} icl_layer_info;

/* Fills out for layer 0..n_layer-1; an error names the layer when it is out of range. */
int icl_model_layer_info(const icl_model *m, int layer, icl_layer_info *out, icl_error *err);

/* A weight by its GGUF name (token_embd.weight, blk.N.attn_q.weight, ...) dequantized to f32 as the forward pass
 * uses it: *out [rows, columns] as the file stores it ([columns] for a vector); output.weight of a tied model is
 * the embedding. Errors name the model and the weight. */
int icl_model_weight(icl_model *m, const char *name, icl_tensor **out, icl_error *err);

/* Rows sel[0..n_sel-1] (0-based; token ids for token_embd.weight and output.weight) of a weight as icl_model_weight
 * decodes them: *out [n_sel, columns]; sel NULL gives every row. A row out of range is an error naming it. */
int icl_model_weight_rows(icl_model *m, const char *name, const int64_t *sel, int64_t n_sel, icl_tensor **out,
                          icl_error *err);

/* The sliding window of the model's sliding layers (0 when it has none). */
int icl_model_window(const icl_model *m);

/* Creates a session (KV cache of the model's n_ctx) for incremental evaluation. */
int icl_session_new(icl_model *m, icl_session **out, icl_error *err);

/* Frees a session; NULL allowed. */
void icl_session_free(icl_session *s);

/* Forgets the cached context. */
void icl_session_reset(icl_session *s);

/* Tokens evaluated so far. */
int64_t icl_session_pos(const icl_session *s);

/* Evaluates n tokens after the cached context. logits: NULL, or room for n_vocab floats (last position
 * only, want_all = 0) or n*n_vocab floats (all positions, want_all = 1). */
int icl_session_eval(icl_session *s, const int32_t *tokens, int64_t n, float *logits, int want_all, icl_error *err);

/* Peak device bytes used by the session's buffers (KV cache + activations). */
size_t icl_session_peak_bytes(const icl_session *s);

/* Runs tokens from an empty context with captures and interventions (see hooks.h); fills res. */
int icl_model_run(icl_model *m, const int32_t *tokens, int64_t n, const icl_run_opts *opts, icl_run_result *res,
                  icl_error *err);

#endif
