/* Matmul backward on the CPU backend's strided gemm (cpu_gemm.c): both products read their transposed operands
 * in place, on the register-blocked kernel the forward matmul uses, and the result does not depend on the
 * thread count. A written output stores the kernel's sum directly: the kernel starts from +0, so the sum is never
 * -0 and 0 + sum has the same bits as the sum. */
#include <string.h>

#include "cpu_train_ops.h"

int cpu_tr_matmul_bwd(cpu_backend *cb, const float *W, int64_t K, int64_t R, const float *x, int64_t n, const float *dy,
                  float *dW, float *dx, int write, icl_error *err) {
  int rc = ICL_OK;
  if (dx) { /* dx[n, K] += dy[n, R] . W[R, K]: rows k of W^T (a transposed view of W), tokens n */
    cpu_gemm_args g = {.a = {W, 1, K}, .b = {dy, R, 1}, .R = K, .n = n, .K = R, .y = dx, .ldy = K,
                     .accumulate = !(write & ICL_BWD_WRITE_DX)};
    rc = cpu_gemm(cb, &g, err);
  }
  if (!rc && dW) { /* dW[R, K] += dy^T x: rows k of x^T, "tokens" r of dy^T, summed over the n tokens */
    cpu_gemm_args g = {.a = {x, 1, K}, .b = {dy, 1, R}, .R = K, .n = R, .K = n, .y = dW, .ldy = K,
                     .accumulate = !(write & ICL_BWD_WRITE_DW)};
    rc = cpu_gemm(cb, &g, err);
  }
  return rc;
}

int cpu_tr_matmul_bwd_group(cpu_backend *cb, int count, const float *const *W, int64_t K, int64_t R, const float *x,
                            int64_t n, const float *const *dy, float *const *dW, float *dx, int write,
                            icl_error *err) {
  cpu_gemm_args g[ICL_MATMUL_GROUP_MAX];
  if (count < 1 || count > ICL_MATMUL_GROUP_MAX)
    return icl_error_set(err, ICL_EINVAL, "cpu: matmul_bwd_group: count %d outside 1..%d", count, ICL_MATMUL_GROUP_MAX);
  int rc = ICL_OK;
  if (dx) { /* dx = dy[0] W[0] (+ dy[1] W[1] ...), each product's sum added in turn */
    for (int i = 0; i < count; i++)
      g[i] = (cpu_gemm_args){.a = {W[i], 1, K}, .b = {dy[i], R, 1}, .R = K, .n = n, .K = R, .y = dx, .ldy = K,
                             .accumulate = i > 0 || !(write & ICL_BWD_WRITE_DX)};
    rc = cpu_gemm_group(cb, count, g, err);
  }
  if (!rc && dW) { /* dW[i] = dy[i]^T x: x's tiles packed once for all */
    for (int i = 0; i < count; i++)
      g[i] = (cpu_gemm_args){.a = {x, 1, K}, .b = {dy[i], 1, R}, .R = K, .n = R, .K = n, .y = dW[i], .ldy = K,
                             .accumulate = !(write & ICL_BWD_WRITE_DW)};
    rc = cpu_gemm_group(cb, count, g, err);
  }
  return rc;
}
