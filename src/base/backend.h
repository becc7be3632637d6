/* The backend contract: buffers and the ops the forward pass is written against.
 * Three implementations stand behind it: Vulkan (vk/), native CPU (src/cpu/) and the reference backend
 * (src/ref_backend.c over src/ref/, the same ops as plain scalar C functions, the oracle for tests).
 *
 * Conventions
 * - A tensor view (icl_dt) is a contiguous region of a buffer: ne[0] is the innermost dimension,
 *   rows are ne[1]*ne[2]*ne[3]. Activations are f32 unless an op says otherwise.
 * - Ops are recorded in order; a backend may execute them immediately (CPU) or batch them into a
 *   command buffer (Vulkan). ops->read and ops->sync wait for everything recorded before.
 * - An op may write its output in place (y == x) where the op says so.
 * - Every op returns ICL_OK or an error code with err filled; shapes are checked by the caller
 *   (src/ops.c wrappers) so backends can assume consistent shapes.
 *
 * Precision (icl_backend.precision, set by whoever opens the backend, before the first op)
 * - ICL_PRECISION_EXACT, the default: every output row of an op is computed by the same arithmetic whatever the
 *   rows computed with it (batch size, chunk boundaries, position in the batch). Evaluating tokens one at a time
 *   or all at once therefore gives bit-identical activations and logits. The ref and CPU backends guarantee it
 *   (tests/model/test_batch_invariance.c); the Vulkan backend chooses kernels by batch size and guarantees only
 *   the tolerances of its op tests (exact_batch = 0).
 * - ICL_PRECISION_FAST: the backend may give that up for speed (CPU: int8 activations with integer dot products
 *   in quantized matmuls, row-at-a-time attention for few queries, bf16 attention for more where the CPU has a
 *   bf16 dot; logits move by ~1e-3 NMSE; Vulkan: the several-token matmul on int8 activations with integer dots,
 *   or on f16 cooperative matrices, as ICL_VK_MATMUL and the device allow, docs/vulkan.md). Opt-in: `icl run`
 *   decodes with it.
 */
#ifndef ICL_BACKEND_H
#define ICL_BACKEND_H

#include <stdint.h>
#include <stddef.h>

#include "icl/icl.h"

typedef struct icl_backend icl_backend;
typedef struct icl_buf icl_buf; /* backend-specific */

/* A view of a buffer: type, shape and byte offset. */
typedef struct icl_dt {
  icl_buf *buf;
  size_t offset; /* bytes from the start of buf; a multiple of 4 (of the block size for weights) */
  uint32_t type; /* icl_type */
  int64_t ne[4]; /* ne[0] innermost; unused dims are 1 */
} icl_dt;

enum { ICL_ROPE_NORMAL = 0, ICL_ROPE_NEOX = 1 };
/* The gated FFN's activation (matmul_glu): swiglu or geglu. */
enum { ICL_GLU_SILU = 0, ICL_GLU_GELU = 1 };

/* matmul_bwd's write flags: the gradient output is written, not accumulated (the trainer's first contribution). */
enum { ICL_BWD_WRITE_DW = 1, ICL_BWD_WRITE_DX = 2 };

/* The most weights one matmul_group applies to one input (q, k and v: 3). */
enum { ICL_MATMUL_GROUP_MAX = 4 };

/* A post-norm residual add folded into the next norm's consumer (add_rms_matmul_group / glu): t = x + rms_norm(o, w)
 * (Gemma's post-attention / post-FFN norm with its add), then t is the input of the folded RMS norm. */
typedef struct icl_post_add {
  const icl_dt *o; /* the sublayer's output [d, n] */
  const icl_dt *w; /* its post-norm weight f32 [d] */
  const icl_dt *t; /* the new residual [d, n], written: apart from x (other workgroups still read x) */
} icl_post_add;

/* Parameters of causal attention. */
typedef struct icl_attn_params {
  int32_t n_past;      /* keys/values already in the cache before this batch; query i is at position n_past+i */
  float scale;         /* multiplies q.k */
  int32_t window;      /* sliding window: key j is masked when (n_past+i) - j >= window; 0 = none */
  float softcap;       /* logits -> softcap*tanh(logits/softcap) before the mask; 0 = none */
} icl_attn_params;

/* Item i of run_split on sub, a backend private to the thread running it (errors into err). */
typedef int (*icl_split_fn)(void *ctx, int i, icl_backend *sub, icl_error *err);

/* Buffer usage hints. */
enum { ICL_BUF_WEIGHT = 1, ICL_BUF_ACT = 2, ICL_BUF_HOST_VISIBLE = 4 };

/* The operations table. Shapes are noted as [innermost, ...] in ne order. */
/* Work a backend has issued since it was made: what a submission-bound engine pays for, counted, not guessed
 * (Vulkan: dispatches recorded, pipeline barriers, queue submits, host waits on a fence, bytes bound for reading
 * by dispatches; docs/vulkan.md). Deterministic for a given model, input and device kind. */
typedef struct icl_be_counts {
  uint64_t dispatches, barriers, submits, host_waits, bytes_read;
} icl_be_counts;

/* One optimizer step's constants (optim_update): AdamW (adam 1) w -= lr ((m1/c1) / (sqrt(m2/c2) + eps) + wd w) with
 * m1 = b1 m1 + (1 - b1) g', m2 = b2 m2 + (1 - b2) g'^2; SGD w -= lr (m1 + wd w) with m1 = mom m1 + g'; g' = gscale g. */
typedef struct icl_optim_args {
  float lr, wd, b1, b2, eps, mom, gscale, c1, c2;
  int adam;
} icl_optim_args;

typedef struct icl_backend_ops {
  const char *name; /* "vulkan", "cpu" */

  /* buffers */
  int (*buf_alloc)(icl_backend *be, size_t size, int usage, icl_buf **out, icl_error *err);
  void (*buf_free)(icl_backend *be, icl_buf *b);
  /* a buffer over host memory the caller owns and keeps alive while the buffer lives (buf_free then releases
   * the record only); optional: NULL where buffers live in device memory */
  int (*buf_wrap)(icl_backend *be, void *host, size_t size, icl_buf **out, icl_error *err);
  int (*write)(icl_backend *be, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err);
  int (*read)(icl_backend *be, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err);
  int (*sync)(icl_backend *be, icl_error *err);
  void (*destroy)(icl_backend *be);

  /* out[cols, n] f32 = rows ids[i] of w[cols, rows] (any weight type); ids i32 [n] */
  int (*get_rows)(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err);
  /* y[rows, n] = x[cols, n] . w[cols, rows]^T; w any weight type, x and y f32 */
  int (*matmul)(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* y = x / sqrt(mean(x^2) + eps) * w per row of ne[0]; w f32 [ne0] or NULL; in place allowed */
  int (*rms_norm)(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
  /* y = (x - mean) / sqrt(var + eps) * w + b per row; w, b f32 [ne0] or NULL; in place allowed */
  int (*layer_norm)(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y, icl_error *err);
  /* x[head_dim, n_head, n_tok] rotated in place at positions pos i32 [n_tok]; first n_rot dims of each head */
  int (*rope)(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
  /* out[head_dim, n_head, n_q] = softmax(q.k^T*scale + causal mask) . v
   * q[head_dim, n_head, n_q]; k, v [head_dim, n_kv_head, n_kv] f32 (the cache, n_kv = n_past + n_q);
   * GQA: kv head = head / (n_head / n_kv_head). pattern: NULL or f32 [n_kv, n_q, n_head] (the
   * softmaxed weights, masked entries 0). mask: NULL or f32 [n_kv, n_q, n_head] added to the scores
   * after scaling (use -INFINITY to knock out an edge). */
  int (*attention)(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                   const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err);
  /* y = a + b, y = a * b; b has a's ne[0] and either a's row count or 1 row (broadcast); in place allowed */
  int (*add)(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
  int (*mul)(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
  /* y = x * s; in place allowed */
  int (*scale)(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err);
  /* y = silu(x), y = gelu_tanh(x); in place allowed */
  int (*silu)(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
  int (*gelu)(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* y = max(x, 0) (the icl-attn classifier head); in place allowed */
  int (*relu)(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* y = silu(gate) * up; y = gelu_tanh(gate) * up; y may alias gate */
  int (*swiglu)(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
  int (*geglu)(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
  /* row softmax over ne[0]; in place allowed */
  int (*softmax)(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* element conversion between f32 and f16 (either direction, or same type = copy); same element count */
  int (*convert)(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* out i32 [n] = argmax of each row of x f32 [ne0, n] (first maximum on ties) */
  int (*argmax)(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err);
  /* out f32 [k + 1, n] from x f32 [ne0, n] and ids i32 [k]: per row the entries ids[0..k-1], then the
   * log-sum-exp of the whole row (max-shifted; a row of -inf gives -inf). Reduced logits (ICL_LOGITS_SELECT) */
  int (*lse_select)(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err);
  /* 2-D strided f32 copy for hooks: dst[dst_off + r*dst_stride + c] = src[src_off + r*src_stride + c]
   * for r < rows, c < cols (offsets and strides in elements, relative to the views' offsets); source rows may
   * overlap (src_stride 0 repeats one row), destination rows may not (dst_stride >= cols when rows > 1) */
  int (*copy2d)(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
                int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err);
  /* 2-D strided fill: dst[off + r*stride + c] = value (rows may not overlap: stride >= cols when rows > 1) */
  int (*fill2d)(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                float value, icl_error *err);
  /* y[i] = x . w[i]^T for i < count (2..ICL_MATMUL_GROUP_MAX): several weights on one input (q, k and v; gate and
   * up), each y[i] bit-identical to what matmul gives it; optional (NULL: the wrapper runs matmul count times) */
  int (*matmul_group)(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* y += x . w^T (the residual add fused into the matmul), each element bit-identical to matmul into a temporary
   * t then add(y, t); optional (NULL: the wrapper does exactly that, in a scratch view the caller gives) */
  int (*matmul_add)(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
  /* rope of q [hd, nh, n] and of k [hd, nh_k, n] at the same positions, each bit-identical to its own rope;
   * optional (NULL: the wrapper runs rope twice) */
  int (*rope_pair)(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *pos, int n_rot, float base,
                   int mode, icl_error *err);
  /* y = act(x . w_gate^T) * (x . w_up^T), act ICL_GLU_SILU or ICL_GLU_GELU: bit-identical to matmul_group into
   * (y, u) then swiglu / geglu (y, u, y); u is scratch the backend may use; optional (NULL: the wrapper does that) */
  int (*matmul_glu)(icl_backend *be, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *x, const icl_dt *y,
                    const icl_dt *u, int act, icl_error *err);
  /* The norm folded into its consumer: n = rms_norm(x, nw, eps) (nw f32 [ne0 of x]), then y[i] = n . w[i]^T for
   * i < count (2..ICL_MATMUL_GROUP_MAX), each bit-identical to rms_norm into h then matmul_group; h (x's shape) is
   * scratch the backend may leave unwritten; optional (NULL: the wrapper does exactly that) */
  int (*rms_matmul_group)(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h, int count,
                          const icl_dt *w, const icl_dt *y, icl_error *err);
  /* y = act(n . w_gate^T) * (n . w_up^T), n = rms_norm(x, nw, eps): bit-identical to rms_norm into h then
   * matmul_glu (u scratch as there); optional (NULL: the wrapper does that) */
  int (*rms_matmul_glu)(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                        const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                        icl_error *err);
  /* y += rms_norm(x, w, eps) per row (Gemma's post-norms with the residual add), bit-identical to rms_norm(x, w, eps,
   * x) then add(y, x, y); x may be left normed or as it was; optional (NULL: the wrapper does exactly that) */
  int (*rms_norm_add)(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
  /* per-head RMS norms of q [hd, nh, n] (weight qw [hd]) and k [hd, nh_k, n] (weight kw) in place, then RoPE of both
   * at positions pos: bit-identical to rms_norm(q, qw, eps, q), rms_norm(k, kw, eps, k) then rope_pair (Gemma's q/k
   * norms); optional (NULL: the wrapper does that) */
  int (*rms_rope_pair)(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *qw, const icl_dt *kw,
                       float eps, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
  /* The post-norm add folded in too: t = x + rms_norm(pa->o, pa->w, eps) written to pa->t, then rms_matmul_group on
   * t (the same eps), each output and t bit-identical to rms_norm(o, w, eps, o), add(x, o, t) then rms_matmul_group;
   * o may be left normed; optional (NULL: the wrapper does exactly that) */
  int (*add_rms_matmul_group)(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                              const icl_dt *h, int count, const icl_dt *w, const icl_dt *y, icl_error *err);
  /* likewise with rms_matmul_glu as the consumer */
  int (*add_rms_matmul_glu)(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                            const icl_dt *h, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u,
                            int act, icl_error *err);
  /* ---- training (src/train/): the backward of the forward ops and the forward pieces inference lacks. f32 views
   * (ids and targets i32); gradient outputs d* ACCUMULATE (+=) unless marked "writes"; a NULL gradient output is
   * skipped. Optional: NULL where a backend has none (the wrapper fails naming the op). The float64 twins are
   * src/ref/ref_backward.c; tests/ops/ops_bwd_defs.h compares them. ---- */
  /* causal attention of B independent sequences: q, k, v, out [hd, nh, T, B], pattern [T, T, nh, B] WRITTEN, each
   * sequence bit-identical to attention on it alone (no mask, no window, no offset) */
  int (*attention_seqs)(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                        const icl_dt *out, const icl_dt *pattern, icl_error *err);
  /* for y [R, n] = x [K, n] . w [K, R]^T: dw [K, R] += dy^T x, dx [K, n] += dy . w (dy [R, n]); with
   * ICL_BWD_WRITE_DW / ICL_BWD_WRITE_DX in write, that output is WRITTEN instead, bit-identical to accumulating
   * into zeros (its old contents, NaN included, are never read) */
  int (*matmul_bwd)(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                    const icl_dt *dx, int write, icl_error *err);
  /* matmul_bwd of count (2..ICL_MATMUL_GROUP_MAX) weights w[i] on one input x (q, k, v), dy[i] and dw[i] per weight
   * (dw NULL: no dw), one dx: bit-identical to matmul_bwd for i = 0..count-1 in turn, the first with write, the
   * others with write & ICL_BWD_WRITE_DW; optional (NULL: the wrapper does that) */
  int (*matmul_bwd_group)(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *dy,
                          const icl_dt *dw, const icl_dt *dx, int write, icl_error *err);
  /* the trainer's norm forward: y as layer_norm (rms 0) or rms_norm (rms 1) give it, bit for bit, and stats [2, n]
   * as norm_bwd writes them for x (so its stats_in may read them); optional (NULL: the wrapper runs those two) */
  int (*norm_fwd)(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                  const icl_dt *y, const icl_dt *stats, icl_error *err);
  /* for y = norm(x [d, n]) * w (+ b), LayerNorm (rms 0) or RMSNorm (rms 1), w NULL = ones: dx, dw, db (LayerNorm
   * only); stats [2, n]: each row's mean (0 for rms) and 1/sqrt(var + eps), written, or with stats_in read as an
   * earlier call on the same x wrote them (the same bits as recomputing); dx NULL: the parameter sums alone, dw and
   * db NULL: dx alone (row-local) */
  int (*norm_bwd)(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *dy,
                  const icl_dt *dx, const icl_dt *dw, const icl_dt *db, const icl_dt *stats, int stats_in,
                  icl_error *err);
  /* causal attention backward from its saved pattern P [T, T, nh, B]: q, k, v, dz [hd, nh, T, B]; dq, dk, dv
   * WRITTEN */
  int (*attention_bwd)(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *P,
                       const icl_dt *dz, float scale, const icl_dt *dq, const icl_dt *dk, const icl_dt *dv,
                       icl_error *err);
  /* rope's backward (NEOX pairing): x [hd, nh, n] rotated back in place at positions pos [n] */
  int (*rope_bwd)(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, icl_error *err);
  /* dx = dy * gelu'(x), and dx = dy * [y > 0] from relu's output y (both WRITE dx; dx may be dy) */
  int (*gelu_bwd)(icl_backend *be, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err);
  int (*relu_bwd)(icl_backend *be, const icl_dt *y, const icl_dt *dy, const icl_dt *dx, icl_error *err);
  /* x [d, n] WRITTEN with rows ids [n] of e [d, rows], a zero row for a negative id (ids < rows: the caller's to
   * check, as for get_rows) */
  int (*embed)(icl_backend *be, const icl_dt *e, const icl_dt *ids, const icl_dt *x, icl_error *err);
  /* de [d, rows] += rows of dx [d, n] scattered by ids [n] (negative ids skipped) */
  int (*embed_bwd)(icl_backend *be, const icl_dt *ids, const icl_dt *dx, const icl_dt *de, icl_error *err);
  /* dst [d, T] += the sum over b of src [d, T, B] (position-table and bias gradients) */
  int (*sum_rows)(icl_backend *be, const icl_dt *src, const icl_dt *dst, icl_error *err);
  /* smeared key: ks_t = s k_t + (1 - s) k_{t-1} per head, s = sigmoid(alpha [nh]); k, ks [hd, nh, T, B] (ks WRITTEN);
   * backward: dk WRITTEN, dalpha [nh] accumulated; either NULL: not computed (dk alone is row-local by sequence) */
  int (*smear)(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *ks, icl_error *err);
  int (*smear_bwd)(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *dks, const icl_dt *dk,
                   const icl_dt *dalpha, icl_error *err);
  /* the weighted mean softmax cross-entropy of logits [nv, n] at targets [n] (-1: none) with weights [n] (NULL: ones) into
   * *loss; probs [nv*n + n] scratch; dlogits [nv, n] WRITTEN (NULL: the loss only) */
  int (*xent)(icl_backend *be, const icl_dt *logits, const icl_dt *targets, const icl_dt *weights,
              const icl_dt *probs, const icl_dt *dlogits, double *loss, icl_error *err);
  /* one optimizer step of w with gradient g and moments m1, m2 (all [n]; m2 unused by SGD) */
  int (*optim_update)(icl_backend *be, const icl_dt *w, const icl_dt *g, const icl_dt *m1, const icl_dt *m2,
                      const icl_optim_args *a, icl_error *err);
  /* fn(ctx, i, sub, err) for i < n, concurrently on the backend's threads: each item's ops on a sub-backend that runs
   * them on the item's thread alone, with scratch of its own, on this backend's buffers; items write disjoint memory;
   * returns the lowest failing item's error; optional (NULL: the wrapper runs the items in turn on be) */
  int (*run_split)(icl_backend *be, int n, icl_split_fn fn, void *ctx, icl_error *err);
  /* the counts so far (icl_be_counts); optional (NULL: the backend counts nothing, e.g. cpu and ref) */
  void (*counts)(icl_backend *be, icl_be_counts *out);
} icl_backend_ops;

struct icl_backend {
  const icl_backend_ops *ops;
  void *impl;
  int is_cpu_device; /* 1 for the CPU backend and for a Vulkan CPU device (lavapipe) */
  int precision;     /* ICL_PRECISION_EXACT (0) or ICL_PRECISION_FAST, see above */
  int exact_batch;   /* 1 if the backend honours ICL_PRECISION_EXACT's batch-independence (ref, cpu) */
  /* bytes of logits one LM-head matmul may write (0 = 64 MiB, under Vulkan's binding limits); the CPU backend
   * allows more so each dequantized or repacked LM-head tile serves more positions */
  size_t logits_chunk_bytes;
};

/* Element count of a view. */
static inline int64_t icl_dt_nelem(const icl_dt *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
/* Rows of a view (everything but ne[0]). */
static inline int64_t icl_dt_nrows(const icl_dt *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* Creates the CPU backend with n_threads workers (0 = ICL_THREADS or the core count). */
int icl_cpu_backend_new(int n_threads, icl_backend **out, icl_error *err);

/* This machine's ceilings measured through a CPU backend's own thread pool (src/cpu/cpu_ceilings.c). */
typedef struct icl_cpu_ceilings {
  int threads;
  const char *simd;  /* the kernel level the probes ran at: "generic", "avx2", "avx512" */
  double fma_gflops; /* f32 multiply-add peak, all threads (2 flops per FMA) */
  double int8_gops;  /* int8 dot-product peak (VNNI vpdpbusd at avx512; 2 ops per multiply-add) */
  double read_gbps;  /* streaming read bandwidth over a buffer larger than the last-level cache */
} icl_cpu_ceilings;

/* Measures the ceilings (quick: fewer rounds, a smaller stream); be must be a CPU backend. */
int icl_cpu_measure_ceilings(icl_backend *be, int quick, icl_cpu_ceilings *out, icl_error *err);
/* Fills threads and simd of a CPU backend, the ceilings left 0 (for ceilings measured once elsewhere). */
int icl_cpu_describe(icl_backend *be, icl_cpu_ceilings *out, icl_error *err);

/* Creates the reference backend (scalar src/ref ops on host memory; slow, for checks). */
int icl_ref_backend_new(icl_backend **out, icl_error *err);

/* Opens a backend by name ("auto", "cpu", "vulkan", "ref"; NULL = ICL_BACKEND or "auto"): auto picks Vulkan on a
 * real GPU and the CPU backend when the only Vulkan device is a CPU implementation or none exists. desc receives
 * a one-line description of the choice and why. */
int icl_backend_open(const char *name, int device, int n_threads, icl_backend **out, char *desc, size_t desc_len,
                     icl_error *err);

/* Creates the Vulkan backend on device index dev (-1 = ICL_DEVICE or the preferred device). */
int icl_vk_backend_new(int dev, icl_backend **out, icl_error *err);

#endif
