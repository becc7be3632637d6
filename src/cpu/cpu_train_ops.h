/* The training ops of the CPU backend: the backward of every op the icl-attn family uses, and
 * the few forward pieces the inference contract lacks (embedding with "no token", smeared key,
 * cross-entropy). Forward matmul, norms, attention, gelu, relu and adds are the backend's own
 * ops (src/cpu/, through src/ops.c), shared with inference. Threads come from the backend's
 * pool; reductions over tokens run column-parallel in token order, so results do not depend on
 * the thread count. Layouts as in backend.h; N = tokens = B*T. Gradient outputs named d* ACCUMULATE
 * (+=) unless the comment says "writes"; NULL gradient outputs are skipped. The float64 oracles are
 * in src/ref/ref_backward.c. */
#ifndef ICL_CPU_TRAIN_OPS_H
#define ICL_CPU_TRAIN_OPS_H

#include <stdint.h>

#include "cpu_internal.h"

/* x[d, n] writes rows ids[i] of E[d, rows]; a negative id writes a zero row. */
void cpu_tr_embed_fwd(cpu_backend *cb, const float *E, int64_t d, const int32_t *ids, int64_t n, float *x);
/* dE[d, rows] += dx rows scattered by ids (negative ids skipped). */
void cpu_tr_embed_bwd(cpu_backend *cb, const int32_t *ids, const float *dx, int64_t d, int64_t n, float *dE);
/* dst[d, T] += sum over b < B of src[d, T, B] (position-table and bias gradients: T = 1). */
void cpu_tr_sum_rows(cpu_backend *cb, const float *src, int64_t d, int64_t T, int64_t B, float *dst);
/* y[n, R] = x[n, K] . W[R, K]^T backward: dW[R, K] += dy^T x; dx[n, K] += dy W, both on the backend's strided
 * gemm (operands read in place); ICL_BWD_WRITE_DW / _DX in write: that output WRITTEN (the sum stored as it is,
 * the same bits as adding it to zeros). */
int cpu_tr_matmul_bwd(cpu_backend *cb, const float *W, int64_t K, int64_t R, const float *x, int64_t n, const float *dy,
                  float *dW, float *dx, int write, icl_error *err);
/* count matmul backwards of one input x (q, k, v): dW[i] from dy[i] and x, dx from every dy[i] W[i] in turn (the
 * first written with ICL_BWD_WRITE_DX, the rest added); dW NULL: none. Bit-identical to count cpu_tr_matmul_bwd
 * calls, the first with write, the others with write & ICL_BWD_WRITE_DW; x's packed tiles serve every dW. */
int cpu_tr_matmul_bwd_group(cpu_backend *cb, int count, const float *const *W, int64_t K, int64_t R, const float *x,
                            int64_t n, const float *const *dy, float *const *dW, float *dx, int write,
                            icl_error *err);
/* LayerNorm / RMSNorm backward (w may be NULL = ones); stats [2, n] written, or read when stats_in (as an earlier
 * call on the same x wrote them). */
void cpu_tr_layer_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                           const float *dy, float *dx, float *dw, float *db, float *stats, int stats_in);
void cpu_tr_rms_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                         const float *dy, float *dx, float *dw, float *stats, int stats_in);
/* Causal attention backward from the saved pattern P [T, T, nh, B] (see icl_refd_attention):
 * q, k, v, dz [hd, nh, T, B]; dq, dk, dv are WRITTEN. */
int cpu_tr_attention_bwd(cpu_backend *cb, const float *q, const float *k, const float *v, const float *P,
                     const float *dz, int64_t hd, int64_t nh, int64_t T, int64_t B, float scale, float *dq,
                     float *dk, float *dv, icl_error *err);
/* Smeared key (writes ks) and its backward (dk WRITTEN, dalpha [nh] accumulated). */
void cpu_tr_smear_fwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, float *ks);
void cpu_tr_smear_bwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, const float *dks, float *dk, float *dalpha);
/* RoPE backward (NEOX pairing, positions pos [n]): x [hd, nh, n] rotated back in place by -angle. */
void cpu_tr_rope_bwd(cpu_backend *cb, float *x, int64_t hd, int64_t nh, int64_t n, const int32_t *pos, int n_rot,
                 float base);
/* dx = dy * gelu'(x) and dx = dy * [y > 0] (both WRITE dx; dx may alias dy). */
void cpu_tr_gelu_bwd(cpu_backend *cb, const float *x, const float *dy, int64_t n, float *dx);
void cpu_tr_relu_bwd(cpu_backend *cb, const float *y, const float *dy, int64_t n, float *dx);
/* Weighted mean softmax cross-entropy (icl_refd_xent); probs [nv*n + n] scratch (probabilities,
 * then each row's log-sum-exp); dlogits WRITTEN
 * (NULL = loss only). Returns the loss. */
double cpu_tr_xent(cpu_backend *cb, const float *logits, int64_t nv, int64_t n, const int32_t *targets,
               const float *weights, float *probs, float *dlogits);
/* One optimizer step over n elements (icl_optim_args, backend.h); elementwise, so thread-count independent. */
void cpu_tr_optim_update(cpu_backend *cb, float *w, float *g, float *m1, float *m2, int64_t n, const icl_optim_args *a);

#endif
