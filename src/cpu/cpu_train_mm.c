/* Matmul backward on the CPU backend's strided gemm (cpu_gemm.c): both products read their transposed operands
 * in place, on the register-blocked kernel the forward matmul uses, and the result does not depend on the
 * thread count. A written output stores the kernel's sum directly: the kernel starts from +0, so the sum is never
 * -0 and 0 + sum has the same bits as the sum. */
#include <string.h>

#include "cpu_train_ops.h"

/* dx's products (dx = dy[0] W[0] + dy[1] W[1] ..., each sum added in turn) then each dW[i] = dy[i]^T x, as one
 * pipelined gemm group: 2 count + 1 parallel regions instead of two groups' 2 count + 2, each product's bits as
 * its own cpu_gemm call in this order. */
static int matmul_bwd_products(cpu_backend *cb, int count, const float *const *W, int64_t K, int64_t R,
                               const float *x, int64_t n, const float *const *dy, float *const *dW, float *dx,
                               int write, icl_error *err) {
  cpu_gemm_args g[CPU_GEMM_GROUP_MAX];
  int m = 0;
  for (int i = 0; dx && i < count; i++) /* rows k of W^T (a transposed view of W), tokens n */
    g[m++] = (cpu_gemm_args){.a = {W[i], 1, K}, .b = {dy[i], R, 1}, .R = K, .n = n, .K = R, .y = dx, .ldy = K,
                             .accumulate = i > 0 || !(write & ICL_BWD_WRITE_DX)};
  for (int i = 0; dW && i < count; i++) /* rows k of x^T, "tokens" r of dy^T, summed over the n tokens */
    if (dW[i])
      g[m++] = (cpu_gemm_args){.a = {x, 1, K}, .b = {dy[i], 1, R}, .R = K, .n = R, .K = n, .y = dW[i], .ldy = K,
                               .accumulate = !(write & ICL_BWD_WRITE_DW)};
  return m ? cpu_gemm_group(cb, m, g, err) : ICL_OK;
}

int cpu_tr_matmul_bwd(cpu_backend *cb, const float *W, int64_t K, int64_t R, const float *x, int64_t n, const float *dy,
                  float *dW, float *dx, int write, icl_error *err) {
  return matmul_bwd_products(cb, 1, &W, K, R, x, n, &dy, &dW, dx, write, err);
}

int cpu_tr_matmul_bwd_group(cpu_backend *cb, int count, const float *const *W, int64_t K, int64_t R, const float *x,
                            int64_t n, const float *const *dy, float *const *dW, float *dx, int write,
                            icl_error *err) {
  if (count < 1 || count > ICL_MATMUL_GROUP_MAX)
    return icl_error_set(err, ICL_EINVAL, "cpu: matmul_bwd_group: count %d outside 1..%d", count, ICL_MATMUL_GROUP_MAX);
  return matmul_bwd_products(cb, count, W, K, R, x, n, dy, dW, dx, write, err);
}
