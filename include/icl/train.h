/* Training small attention models (the icl-attn family, docs/training.md) on the CPU backend:
 * explicit forward and backward per op, one buffer per activation and gradient, SGD/AdamW,
 * checkpoints as GGUF files that icl_model_load opens like any model. */
#ifndef ICL_TRAIN_H
#define ICL_TRAIN_H

#include <stdint.h>

#include "icl/icl.h"
#include "icl/model.h"

enum { ICL_NORM_NONE = 0, ICL_NORM_LAYER = 1, ICL_NORM_RMS = 2 };
enum { ICL_POS_NONE = 0, ICL_POS_LEARNED = 1, ICL_POS_ROPE = 2 };
enum { ICL_OUT_UNEMBED = 0, ICL_OUT_CLASSIFIER = 1 };
enum { ICL_OPTIM_ADAMW = 0, ICL_OPTIM_SGD = 1 };

/* The model's shape and options (the GGUF keys of docs/gguf.md, icl-attn). */
typedef struct icl_attn_config {
  int n_layer, n_head, d_model, d_head; /* d_head 0 = d_model / n_head */
  int n_ctx;                            /* positions (rows of the learned position table) */
  int vocab;                            /* rows of the token embedding; 0 = continuous inputs only */
  int input_len;                        /* width of continuous per-position inputs; 0 = none */
  int inp_proj;                         /* 1: Linear(input_len, d_model) on the inputs; 0: added as they are */
  int position;                         /* ICL_POS_* (rope: NEOX pairing over all of d_head) */
  float rope_base;                      /* rope only; 0 = 10000 */
  int norm;                             /* ICL_NORM_* */
  float norm_eps;                       /* 0 = 1e-5 */
  int no_scale;                         /* 1: attention scale 1.0 instead of 1/sqrt(d_head) */
  int w_o;                              /* 1: output projection per layer (0 needs n_head*d_head == d_model) */
  int qkv_bias, o_bias;                 /* biases on q/k/v and on W_O */
  int smeared_key;                      /* per-head learned alpha (Olsson et al.) */
  int d_ff;                             /* 0 = attention-only; else MLP down(gelu(up(norm(x)))) with biases */
  int output;                           /* ICL_OUT_* */
  int n_classes, cls_hidden;            /* classifier: output width and Linear+ReLU layers before it */
  int out_bias;                         /* bias on the output layer */
  float init_std;                       /* 0 = 0.02 */
  uint64_t seed;                        /* initialisation seed */
} icl_attn_config;

/* Optimizer and schedule: lr(step) rises linearly over warmup steps, then follows a cosine from lr
 * to lr*min_lr over the remaining steps up to decay_steps (0 = constant after warmup). */
typedef struct icl_optim_config {
  int kind;             /* ICL_OPTIM_* */
  float lr, min_lr;     /* min_lr: fraction of lr at the end of the cosine */
  int64_t warmup, decay_steps;
  float beta1, beta2, eps; /* AdamW (0 = 0.9, 0.999, 1e-8) */
  float momentum;          /* SGD */
  float weight_decay;      /* decoupled; never applied to norms, embeddings, biases, smear alphas */
  float clip;              /* global gradient-norm clip; 0 = none */
} icl_optim_config;

/* One batch: B sequences of T positions. tokens (-1 = no token) and targets (-1 = not scored)
 * int32 [B*T]; inputs f32 [B*T*input_len] or NULL; mask f32 [B*T] loss weights or NULL. */
typedef struct icl_train_batch {
  int64_t B, T;
  const int32_t *tokens, *targets;
  const float *inputs, *mask;
} icl_train_batch;

typedef struct icl_trainer icl_trainer;

/* Creates a model with seeded initial weights (docs/training.md) on a CPU backend of n_threads (0 = default). */
int icl_trainer_new(const icl_attn_config *cfg, int n_threads, icl_trainer **out, icl_error *err);
/* Frees the trainer (NULL is fine). */
void icl_trainer_free(icl_trainer *tr);
/* The model's configuration (defaults filled in). */
const icl_attn_config *icl_trainer_config(const icl_trainer *tr);
/* Forward pass: fills the logits and returns the loss in *loss (0 when no position is scored). */
int icl_trainer_forward(icl_trainer *tr, const icl_train_batch *batch, double *loss, icl_error *err);
/* Backward pass of the last forward: the gradients of every parameter (overwritten). */
int icl_trainer_backward(icl_trainer *tr, icl_error *err);
/* One optimizer step: forward, backward, clip, update; *loss = the loss before the update. Fails, weights
 * untouched, on an invalid opt, an optimizer kind other than the moments' one, a non-finite loss or gradient; a
 * non-finite weight after the update is an error too (the net then cannot be saved). */
int icl_trainer_step(icl_trainer *tr, const icl_train_batch *batch, const icl_optim_config *opt, double *loss,
                     icl_error *err);
/* Logits of the last forward, [B*T][n_out] row-major; *n_out receives the width. */
const float *icl_trainer_logits(const icl_trainer *tr, int64_t *n_out);
/* Attention pattern of the last forward for layer l and sequence b: [n_head][T][T] (query rows,
 * key columns), or NULL when out of range; *T receives the positions. */
const float *icl_trainer_pattern(const icl_trainer *tr, int layer, int64_t b, int64_t *T);
/* Steps taken so far. */
int64_t icl_trainer_steps(const icl_trainer *tr);
/* Checks every field of an optimizer configuration (finite, in range); the error names the field. */
int icl_optim_check(const icl_optim_config *opt, icl_error *err);
/* Learning rate of the schedule at a step. */
float icl_optim_lr(const icl_optim_config *opt, int64_t step);
/* Gradient norm before clipping of the last step. */
double icl_trainer_grad_norm(const icl_trainer *tr);

/* The current weights as a loaded model (the checkpoint icl_trainer_save writes, bound as icl_model_load binds it,
 * on the CPU backend): icl_model_run gives what it gives on icl_model_load of that checkpoint, bit for bit. Owned by
 * the trainer and valid until its next step, icl_trainer_param with data, or icl_trainer_free. */
int icl_trainer_model(icl_trainer *tr, icl_model **out, icl_error *err);

/* Parameter tensors: count, and for i < count its GGUF name, data (writable: asking for it ends the model of
 * icl_trainer_model), gradient and element count. */
int icl_trainer_n_params(const icl_trainer *tr);
const char *icl_trainer_param(icl_trainer *tr, int i, float **data, float **grad, int64_t *n);
/* Read-only weights of parameter i (unlike icl_trainer_param's data, leaves icl_trainer_model's model), or NULL. */
const float *icl_trainer_param_data(const icl_trainer *tr, int i);

/* Saves the model as an icl-attn GGUF file and the optimizer state, tied to the weights by a hash, as path.optim;
 * an overwrite leaves the old or the new pair loadable (docs/training.md). Non-finite weights are not saved. */
int icl_trainer_save(const icl_trainer *tr, const char *path, icl_error *err);
/* Opens a checkpoint written by icl_trainer_save (and its .optim sidecar when present: it must belong to these
 * weights and this step) to go on training; the configuration is read as icl_model_load reads it. */
int icl_trainer_load(const char *path, int n_threads, icl_trainer **out, icl_error *err);

/* Induction data: B sequences of T tokens from [0, vocab), each a random segment (its length drawn
 * uniformly from seg_min..seg_max per sequence) followed by repeats of it (the last cut at T); a
 * function of (seed, step) only. targets = next token (-1 at the last position); with
 * repeated_only the first segment's targets are -1 (scored only where the next token is predictable). */
void icl_data_repeated_segments(int64_t B, int64_t T, int vocab, int seg_min, int seg_max, int repeated_only,
                                uint64_t seed, int64_t step, int32_t *tokens, int32_t *targets);

/* Induction data without a fixed period: B sequences of T fresh random tokens from [0, vocab) in which a
 * segment (length uniform in seg_min..seg_max, at an offset uniform in 0..gap_max) is copied again and again,
 * each copy after a gap of 0..gap_max fresh tokens (the last cut at T); targets = next token at every position
 * (-1 at the last). A function of (seed, step) only. */
void icl_data_spaced_repeats(int64_t B, int64_t T, int vocab, int seg_min, int seg_max, int gap_max, uint64_t seed,
                             int64_t step, int32_t *tokens, int32_t *targets);

/* Byte-level natural text: B windows of T bytes at offsets drawn from (seed, step, sequence) over text[0, n)
 * (n > T); tokens are the bytes (vocabulary 256), targets the next byte at every position. */
void icl_data_text_windows(const uint8_t *text, int64_t n, int64_t B, int64_t T, uint64_t seed, int64_t step,
                           int32_t *tokens, int32_t *targets);

/* Token-level text: B windows of T ids at offsets drawn as icl_data_text_windows draws them, over an id stream
 * ids[0, n) (n > T; e.g. a tokenized corpus); targets the next id at every position. */
void icl_data_token_windows(const int32_t *ids, int64_t n, int64_t B, int64_t T, uint64_t seed, int64_t step,
                            int32_t *tokens, int32_t *targets);

#endif
