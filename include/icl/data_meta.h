/* In-context meta-learning data (Minegishi et al., ICML 2025; docs/experiments.md): K Gaussian classes with
 * base labels, T tasks that relabel every class, sequences x1 y1 .. xN yN xq whose query label is the query
 * class's label under the context's task. Deterministic: the dataset is a function of the seed, every
 * sequence a function of (seed, stream, step, index in the batch). */
#ifndef ICL_DATA_META_H
#define ICL_DATA_META_H

#include <stdint.h>

#include "icl/icl.h"

enum { ICL_META_OFFSET_TASK = 0, ICL_META_OFFSET_RANDOM = 1 };
enum { ICL_META_TRAIN = 0, ICL_META_RANDOM_LABELS = 1 };

/* Task parameters; K..P at 0 take the paper's defaults (64, 3, 4, 32, 63, 65); the others are literal. */
typedef struct icl_meta_config {
  int K;             /* classes (64) */
  int T;             /* tasks (3) */
  int N;             /* context pairs (4) */
  int L;             /* labels (32) */
  int D;             /* item dimensions (63) */
  int P;             /* one-hot position width (65); inputs are D + P wide */
  float eps;         /* item noise (the paper: 0.1) */
  float alpha;       /* Zipf exponent of the task frequencies (0 = uniform) */
  float alpha_class; /* Zipf exponent of the class frequencies (0 = uniform, as in the paper's code) */
  int offsets;       /* ICL_META_OFFSET_TASK: o_{t,k} = t (the code); _RANDOM: o_{t,k} ~ U{0..L-1}, o_{0,k} = 0 */
  int label_pos;     /* 1: label positions also carry their pair's one-hot position (the code: no) */
  uint64_t seed;
} icl_meta_config;

typedef struct icl_meta_task icl_meta_task;

/* One batch, caller-allocated: tokens, targets int32 [B, 2N+1]; inputs f32 [B, 2N+1, D+P];
 * classes int32 [B, N+1] (context classes then the query's); tasks int32 [B]. */
typedef struct icl_meta_batch {
  int32_t *tokens, *targets, *classes, *tasks;
  float *inputs;
} icl_meta_batch;

/* Draws the class means, base labels and task offsets from cfg->seed (defaults filled in). */
int icl_meta_new(const icl_meta_config *cfg, icl_meta_task **out, icl_error *err);
/* Frees the task (NULL is fine). */
void icl_meta_free(icl_meta_task *m);
/* The configuration with defaults filled in. */
const icl_meta_config *icl_meta_config_of(const icl_meta_task *m);
/* Sequence length 2N+1. */
int icl_meta_seq_len(const icl_meta_task *m);
/* Label of class k under task t: (b_k + o_{t,k}) mod L. */
int icl_meta_label(const icl_meta_task *m, int t, int k);
/* Mean vector mu_k (D floats). */
const float *icl_meta_mean(const icl_meta_task *m, int k);
/* Probability of task t (Zipf with alpha). */
double icl_meta_task_prob(const icl_meta_task *m, int t);
/* Fills B sequences of stream `stream` at `step`; mode ICL_META_TRAIN or _RANDOM_LABELS (context classes
 * drawn with repetition, context labels uniform, the query as in training). */
int icl_meta_sample(const icl_meta_task *m, int64_t B, uint64_t stream, int64_t step, int mode,
                    const icl_meta_batch *out, icl_error *err);

#endif
