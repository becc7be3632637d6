/* The training ops of the CPU backend: the backward of every op the icl-attn family uses, and
 * the few forward pieces the inference contract lacks (embedding with "no token", smeared key,
 * cross-entropy). Forward matmul, norms, attention, gelu, relu and adds are the backend's own
 * ops (src/cpu/, through src/ops.c), shared with inference. Threads come from the backend's
 * pool; reductions over tokens run column-parallel in token order, so results do not depend on
 * the thread count. Layouts as in backend.h; N = tokens = B*T. Gradient outputs named d* ACCUMULATE
 * (+=) unless the comment says "writes"; NULL gradient outputs are skipped. The float64 oracles are
 * in src/ref/ref_backward.c. */
#ifndef ICL_TRAIN_OPS_H
#define ICL_TRAIN_OPS_H

#include <stdint.h>

#include "cpu_internal.h"

/* x[d, n] writes rows ids[i] of E[d, rows]; a negative id writes a zero row. */
void tr_embed_fwd(cpu_backend *cb, const float *E, int64_t d, const int32_t *ids, int64_t n, float *x);
/* dE[d, rows] += dx rows scattered by ids (negative ids skipped). */
void tr_embed_bwd(cpu_backend *cb, const int32_t *ids, const float *dx, int64_t d, int64_t n, float *dE);
/* dst[d, T] += sum over b < B of src[d, T, B] (position-table and bias gradients: T = 1). */
void tr_sum_rows(cpu_backend *cb, const float *src, int64_t d, int64_t T, int64_t B, float *dst);
/* y[n, R] = x[n, K] . W[R, K]^T backward: dW[R, K] += dy^T x; dx[n, K] += dy W. Runs both
 * products on the backend's matmul (transposed operands), so the gemm kernel is shared; ws is
 * work space that grows on demand. */
int tr_matmul_bwd(cpu_backend *cb, cpu_scratch *ws, const float *W, int64_t K, int64_t R, const float *x,
                  int64_t n, const float *dy, float *dW, float *dx, icl_error *err);
/* LayerNorm / RMSNorm backward (w may be NULL = ones); stats is scratch [2, n]. */
void tr_layer_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                       const float *dy, float *dx, float *dw, float *db, float *stats);
void tr_rms_norm_bwd(cpu_backend *cb, const float *x, const float *w, int64_t d, int64_t n, float eps,
                     const float *dy, float *dx, float *dw, float *stats);
/* Causal attention backward from the saved pattern P [T, T, nh, B] (see icl_refd_attention):
 * q, k, v, dz [hd, nh, T, B]; dq, dk, dv are WRITTEN. */
int tr_attention_bwd(cpu_backend *cb, const float *q, const float *k, const float *v, const float *P,
                     const float *dz, int64_t hd, int64_t nh, int64_t T, int64_t B, float scale, float *dq,
                     float *dk, float *dv, icl_error *err);
/* Smeared key (writes ks) and its backward (dk WRITTEN, dalpha [nh] accumulated). */
void tr_smear_fwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, float *ks);
void tr_smear_bwd(cpu_backend *cb, const float *k, const float *alpha, int64_t hd, int64_t nh, int64_t T,
                  int64_t B, const float *dks, float *dk, float *dalpha);
/* RoPE backward (NEOX pairing, positions pos [n]): x [hd, nh, n] rotated back in place by -angle. */
void tr_rope_bwd(cpu_backend *cb, float *x, int64_t hd, int64_t nh, int64_t n, const int32_t *pos, int n_rot,
                 float base);
/* dx = dy * gelu'(x) and dx = dy * [y > 0] (both WRITE dx; dx may alias dy). */
void tr_gelu_bwd(cpu_backend *cb, const float *x, const float *dy, int64_t n, float *dx);
void tr_relu_bwd(cpu_backend *cb, const float *y, const float *dy, int64_t n, float *dx);
/* Weighted mean softmax cross-entropy (icl_refd_xent); probs [nv*n + n] scratch (probabilities,
 * then each row's log-sum-exp); dlogits WRITTEN
 * (NULL = loss only). Returns the loss. */
double tr_xent(cpu_backend *cb, const float *logits, int64_t nv, int64_t n, const int32_t *targets,
               const float *weights, float *probs, float *dlogits);
/* Y[t*ldy + r] = sum_c W[r*ldw + c] X[t*ldx + c] (r < R, t < n, c < K) on the calling thread with the
 * backend's gemm_tile kernel (for work inside a parallel item); ws holds tr_gemm_serial_ws floats. */
void tr_gemm_serial(const cpu_kernels *k, const float *W, int64_t ldw, int64_t R, const float *X, int64_t ldx,
                    int64_t n, int64_t K, float *Y, int64_t ldy, float *ws);
int64_t tr_gemm_serial_ws(const cpu_kernels *k, int64_t n, int64_t K);
/* dst[C, R] = src[R, C]^T (threaded). */
void tr_transpose(cpu_backend *cb, const float *src, int64_t R, int64_t C, float *dst);

#endif
