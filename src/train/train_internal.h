/* The trainer's state (include/icl/train.h): parameters, gradients and optimizer moments in
 * flat arenas with one named tensor per GGUF tensor, and one buffer per activation. */
#ifndef ICL_TRAIN_INTERNAL_H
#define ICL_TRAIN_INTERNAL_H

#include "icl/gguf.h"
#include "icl/model.h"
#include "icl/train.h"
#include "ops.h"

#define TR_MAX_LAYERS 64
#define TR_MAX_CLS 8
#define TR_NAME 48

/* One parameter tensor: [ne0, ne1] f32 at off in the arenas. */
typedef struct tr_param {
  char name[TR_NAME];
  int64_t ne[2], off;
  int decay; /* weight decay applies (matrices only) */
} tr_param;

/* Parameter indices of one block (-1 = absent). */
typedef struct tr_layer {
  int norm_w, norm_b, wq, wk, wv, bq, bk, bv, smear, wo, bo;
  int ffn_norm_w, ffn_norm_b, up, up_b, down, down_b;
} tr_layer;

/* Activations of one block, each [width, N] (N = B*T) unless noted; saved for the backward. */
/* One block's backward gradients: r_mlp [d] = d(block output) (dy of down), r_attn [d] = d(mid) (dy of wo), du
 * [ff] (dy of up), dh2 [d] and dh [d] (dy of the two norms), dq, dks, dk, dv [qd] (dk = dks without the smear). */
typedef struct tr_grads {
  float *r_mlp, *r_attn, *du, *dh2, *dh, *dq, *dks, *dk, *dv;
} tr_grads;

typedef struct tr_acts {
  float *h;          /* [d] normed input (= the residual itself when norm = none) */
  float *q, *k, *ks, *v, *z; /* [nh*hd]; ks = smeared keys (= k without smearing) */
  float *P;          /* [T, T, nh, B] attention pattern */
  float *mid;        /* [d] residual after attention (MLP only; else the block output) */
  float *h2, *u, *a; /* MLP: [d] normed mid, [d_ff] up, [d_ff] gelu(up) */
} tr_acts;

struct icl_trainer {
  icl_attn_config cfg;
  icl_backend *be;
  int n_threads; /* the backend's thread count (the model net:run binds gets the same) */
  int hd, qd; /* d_head, n_head*d_head */
  /* parameters */
  tr_param *p;
  int np;
  int64_t n_floats;
  float *w, *g, *m1, *m2; /* [n_floats]: weights, gradients, optimizer moments */
  int tok, pos, inp_w, inp_b, onorm_w, onorm_b, out_w, out_b, cls_w[TR_MAX_CLS], cls_b[TR_MAX_CLS];
  tr_layer L[TR_MAX_LAYERS];
  int64_t step;
  int opt_kind; /* ICL_OPTIM_* the moments belong to; -1 before the first step (or fresh moments) */
  double grad_norm;
  /* activations for batches of up to cap_n tokens */
  int64_t B, T, N, cap_n, cap_T;
  float *act; /* one arena for everything below */
  /* the five arenas (w, g, m1, m2, act) as backend buffers (buf_wrap), which views of the ops point into */
  icl_buf *arena_buf[5];
  size_t arena_bytes[5];
  int32_t *tokens, *targets, *pos_ids; /* pos_ids [N]: position within the sequence (rope) */
  float *inputs, *mask;
  float *res;           /* [d, N, n_layer + 1]: residual stream entering each block, then the output */
  tr_acts A[TR_MAX_LAYERS];
  float *hf;            /* [d] final norm output */
  float *ch[TR_MAX_CLS]; /* [d] classifier hidden outputs (after ReLU) */
  float *logits, *probs; /* [n_out]; probs [n_out*N + N] */
  /* gradient scratch */
  float *dres, *dz, *dlogits, *tmp; /* dres [d]: d(x0); dz [qd]: d(attention output) with W_O */
  float *stats; /* [2, N] per norm (tr_stats): x's statistics, written by the forward, read by the backward */
  /* the backward's dx chain, kept per layer for the parameter sums after the slices join (train_bwd.c) */
  tr_grads G[TR_MAX_LAYERS];
  float *dcls[TR_MAX_CLS]; /* [d] dy of classifier layer i (after its ReLU's backward) */
  float *dhf;              /* [d] gradient of the final norm's output */
  double loss;
  icl_model *run_model; /* the current weights bound as a loaded model (icl_trainer_model); NULL: stale */
};

/* Parameter data / gradient by index (NULL for -1). */
static inline float *tr_w(const icl_trainer *tr, int i) { return i < 0 ? NULL : tr->w + tr->p[i].off; }
static inline float *tr_g(const icl_trainer *tr, int i) { return i < 0 ? NULL : tr->g + tr->p[i].off; }
/* Norm slots of tr->stats: block l's attention norm 2 l, its MLP norm 2 l + 1, the final norm 2 n_layer. */
static inline int tr_norm_slots(const icl_attn_config *c) { return 2 * c->n_layer + 1; }
static inline float *tr_stats(const icl_trainer *tr, int slot) { return tr->stats + 2 * tr->N * slot; }

/* Output width (vocabulary or classes). */
int tr_n_out(const icl_attn_config *c);
/* Checks and fills defaults of a configuration. */
int tr_config_check(icl_attn_config *c, icl_error *err);
/* Builds the parameter table and arenas of tr->cfg (weights uninitialised). */
int tr_layout(icl_trainer *tr, icl_error *err);
/* Seeded initialisation of every parameter (docs/training.md). */
void tr_init_weights(icl_trainer *tr);
/* Activation buffers for B x T (grows only). */
int tr_reserve(icl_trainer *tr, int64_t B, int64_t T, icl_error *err);
/* Forward and backward passes (train_fwd.c, train_bwd.c); tr_forward runs one slice of sequences per thread. */
int tr_forward(icl_trainer *tr, icl_error *err);
/* The forward in n (1..TR_MAX_SLICES) slices, sequences [b[i], b[i+1]) (b[0] = 0, b[n] = B), at once on the
 * backend's run_split (one slice: on the backend itself), then the loss over all rows: the same bits for any slices. */
#define TR_MAX_SLICES 256
/* One slice of whole sequences [b0, b0 + B), rows [n0, n0 + N) of every activation, run on backend be. */
typedef struct tr_slice {
  icl_trainer *tr;
  icl_backend *be;
  int64_t b0, B, n0, N;
  int part; /* which part of the pass fn runs (tr_run_slices' part) */
} tr_slice;
typedef int (*tr_slice_fn)(const tr_slice *s, icl_error *err);
/* fn on each slice of sequences [b[i], b[i+1]) after checking the bounds (errors name the pass), at once on the
 * backend's run_split, or on the backend itself for one slice (train_slices.c); each slice's part is part. */
int tr_run_slices(icl_trainer *tr, const char *pass, int part, int n, const int64_t *b, tr_slice_fn fn,
                  icl_error *err);
/* The default slicing into b[0..n] (b holds TR_MAX_SLICES + 1): one slice per thread with run_split; returns n. */
int tr_default_slices(const icl_trainer *tr, int64_t *b);
int tr_forward_slices(icl_trainer *tr, int n, const int64_t *b, icl_error *err);
int tr_backward(icl_trainer *tr, icl_error *err);
/* The backward's dx chain in n slices as tr_forward_slices, then every parameter sum on all rows: the same bits for
 * any slices. */
int tr_backward_slices(icl_trainer *tr, int n, const int64_t *b, icl_error *err);
/* The optimizer update of one step (train_optim.c); an error, weights untouched, for a non-finite gradient. */
int tr_optim_update(icl_trainer *tr, const icl_optim_config *opt, icl_error *err);
/* Whether no element of w[0..n) is Inf or NaN (the update's check, train_optim.c). */
int tr_all_finite(const float *w, int64_t n);
/* FNV-1a over the weight arena's words: ties an optimizer sidecar to its model (train_ckpt.c). */
uint64_t tr_weights_hash(const icl_trainer *tr);
/* Attention scale: 1/sqrt(d_head), or 1 with no_scale. */
float tr_attn_scale(const icl_trainer *tr);
/* A GGUF writer holding the checkpoint of the current weights (the caller frees *out, also on failure). */
int tr_ckpt_writer(const icl_trainer *tr, icl_gguf_writer **out, icl_error *err);
/* Drops the cached model of icl_trainer_model: the weights are about to change. */
void tr_run_model_drop(icl_trainer *tr);
/* f32 view [ne0, ne1] of p, which lies in one of the trainer's arenas, for the backend ops. */
icl_dt tr_view(const icl_trainer *tr, const float *p, int64_t ne0, int64_t ne1);
/* Views for one op call, kept until the call returns (tr_views v = {tr}): tr_v4 a view [ne0, ne1, ne2, ne3] of
 * f32 p, tr_vi one of i32 ids [n]; both NULL for a NULL p (an absent operand). */
typedef struct tr_views {
  const icl_trainer *tr;
  icl_dt t[12];
  int n;
} tr_views;
const icl_dt *tr_v4(tr_views *vs, const float *p, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
const icl_dt *tr_vi(tr_views *vs, const int32_t *p, int64_t n);
static inline const icl_dt *tr_v(tr_views *vs, const float *p, int64_t ne0, int64_t ne1) {
  return tr_v4(vs, p, ne0, ne1, 1, 1);
}

#endif
