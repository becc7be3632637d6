/* Matmul backward on the CPU backend's own gemm: both products are plain forward matmuls of
 * transposed operands (y = x . w^T with w = W^T for dx, and w = x^T, x = dy^T for dW), so the
 * register-blocked kernel of src/cpu/cpu_matmul.c does the work and the result does not depend
 * on the thread count. */
#include <string.h>

#include "train_ops.h"

typedef struct tp_ctx {
  const float *src;
  float *dst;
  int64_t R, C;
} tp_ctx;

/* Rows [lo, hi) of dst (= columns of src), in 8-row strips so reads stay in few cache lines. */
static void tp_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const tp_ctx *c = arg;
  for (int64_t r0 = 0; r0 < c->R; r0 += 8) {
    int64_t r1 = r0 + 8 < c->R ? r0 + 8 : c->R;
    for (int64_t j = lo; j < hi; j++)
      for (int64_t r = r0; r < r1; r++) c->dst[j * c->R + r] = c->src[r * c->C + j];
  }
}

void tr_transpose(cpu_backend *cb, const float *src, int64_t R, int64_t C, float *dst) {
  tp_ctx c = {src, dst, R, C};
  cpu_pool_range(cb->pool, C, 16, tp_range, &c);
}

typedef struct acc_ctx {
  float *y;
  const float *x;
} acc_ctx;

static void acc_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  const acc_ctx *c = arg;
  for (int64_t i = lo; i < hi; i++) c->y[i] += c->x[i];
}

/* y[n] += x[n], threaded. */
static void tr_accumulate(cpu_backend *cb, float *y, const float *x, int64_t n) {
  acc_ctx c = {y, x};
  cpu_pool_range(cb->pool, n, 1 << 14, acc_range, &c);
}

/* A view of host memory as the CPU backend sees its buffers: [ne0, ne1] f32. */
static icl_dt host_view(struct icl_buf *b, const float *p, int64_t ne0, int64_t ne1) {
  *b = (struct icl_buf){.data = (void *)p, .size = (size_t)(ne0 * ne1) * sizeof(float)};
  return (icl_dt){.buf = b, .offset = 0, .type = ICL_TYPE_F32, .ne = {ne0, ne1, 1, 1}};
}

/* out[rows, n] = x[cols, n] . w[cols, rows]^T on the backend's matmul. */
static int host_matmul(cpu_backend *cb, const float *w, int64_t cols, int64_t rows, const float *x, int64_t n,
                       float *out, icl_error *err) {
  struct icl_buf bw, bx, by;
  icl_dt vw = host_view(&bw, w, cols, rows), vx = host_view(&bx, x, cols, n), vy = host_view(&by, out, rows, n);
  return cpu_matmul(&cb->be, &vw, &vx, &vy, err);
}

int tr_matmul_bwd(cpu_backend *cb, cpu_scratch *ws, const float *W, int64_t K, int64_t R, const float *x,
                  int64_t n, const float *dy, float *dW, float *dx, icl_error *err) {
  int64_t big = n > R ? n : R;
  float *a = cpu_scratch_get(ws, (size_t)(K * big + R * n + K * big) * sizeof(float));
  if (!a) return icl_error_set(err, ICL_ENOMEM, "train: matmul backward: out of memory for [%lld, %lld] work",
                               (long long)K, (long long)big);
  float *t1 = a, *t2 = a + K * big, *out = t2 + R * n;
  int rc = ICL_OK;
  if (dx) { /* dx[n, K] += dy[n, R] . W[R, K]: weight W^T [K][R] */
    tr_transpose(cb, W, R, K, t1);
    if ((rc = host_matmul(cb, t1, R, K, dy, n, out, err))) return rc;
    tr_accumulate(cb, dx, out, n * K);
  }
  if (dW) { /* dW[R, K] += dy^T x: weight x^T [K][n], input dy^T [R][n] */
    tr_transpose(cb, x, n, K, t1);
    tr_transpose(cb, dy, n, R, t2);
    if ((rc = host_matmul(cb, t1, n, K, t2, R, out, err))) return rc;
    tr_accumulate(cb, dW, out, R * K);
  }
  return rc;
}

/* n rounded up to 16 floats: the kernels load packed tiles with 64-byte aligned loads. */
static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

int64_t tr_gemm_serial_ws(const cpu_kernels *k, int64_t n, int64_t K) {
  int64_t gnt = k->gemm_nt;
  return up16((n + gnt - 1) / gnt * gnt * K) + CPU_TILE_ROWS * K;
}

void tr_gemm_serial(const cpu_kernels *k, const float *W, int64_t ldw, int64_t R, const float *X, int64_t ldx,
                    int64_t n, int64_t K, float *Y, int64_t ldy, float *ws) {
  int gnt = k->gemm_nt;
  int64_t groups = (n + gnt - 1) / gnt;
  float *xp = ws, *wp = ws + up16(groups * gnt * K); /* ws and both parts 64-byte aligned */
  for (int64_t g = 0; g < groups; g++) {
    int nt = n - g * gnt < gnt ? (int)(n - g * gnt) : gnt;
    cpu_pack_x(X + g * gnt * ldx, ldx, K, nt, gnt, xp + g * gnt * K);
  }
  for (int64_t r0 = 0; r0 < R; r0 += CPU_TILE_ROWS) {
    int nr = R - r0 < CPU_TILE_ROWS ? (int)(R - r0) : CPU_TILE_ROWS;
    for (int64_t c = 0; c < K; c++) /* the weight tile [K][32], rows past nr zero */
      for (int r = 0; r < CPU_TILE_ROWS; r++) wp[c * CPU_TILE_ROWS + r] = r < nr ? W[(r0 + r) * ldw + c] : 0.0f;
    for (int64_t g = 0; g < groups; g++) {
      int nt = n - g * gnt < gnt ? (int)(n - g * gnt) : gnt;
      k->gemm_tile(wp, K, xp + g * gnt * K, nt, Y + g * gnt * ldy + r0, ldy, nr);
    }
  }
}
