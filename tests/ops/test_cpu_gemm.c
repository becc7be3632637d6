/* The CPU backend's strided gemm (src/cpu/cpu_gemm.c), which the trainer's backward runs on: for every operand
 * layout (row-major, transposed view, general strides), ragged sizes (partial row tiles and token groups),
 * writing and accumulating, threaded and serial, on every SIMD level and with 1 and 2 threads, its output is
 * bit-identical to making the operands contiguous and running the backend's matmul, then a separate add: the
 * path it replaced. Also against a float64 sum (a loose bound), so both cannot be wrong together. And the pipelined
 * gemm group against its products one cpu_gemm call at a time, and the stage-pipelined dW groups (each thread
 * summing its own rows, the sums handed on) against the serial gemm, the pipelined path asserted taken. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "ops.h"
#include "testutil.h"

static icl_backend *be;

/* The old path: y (+)= A . B^T with A [R][K] and B [n][K] copied contiguous, on icl_op_matmul. */
static void want_matmul(const cpu_gemm_args *g, const float *y0, float *want) {
  float *A = malloc((size_t)(g->R * g->K) * sizeof(float)), *B = malloc((size_t)(g->n * g->K) * sizeof(float));
  float *out = malloc((size_t)(g->n * g->R) * sizeof(float));
  for (int64_t j = 0; j < g->R; j++)
    for (int64_t c = 0; c < g->K; c++) A[j * g->K + c] = g->a.p[j * g->a.rs + c * g->a.cs];
  for (int64_t t = 0; t < g->n; t++)
    for (int64_t c = 0; c < g->K; c++) B[t * g->K + c] = g->b.p[t * g->b.rs + c * g->b.cs];
  struct icl_buf ba = {.data = A, .size = (size_t)(g->R * g->K) * 4}, bb = {.data = B, .size = (size_t)(g->n * g->K) * 4};
  struct icl_buf by = {.data = out, .size = (size_t)(g->n * g->R) * 4};
  icl_dt va = {.buf = &ba, .type = ICL_TYPE_F32, .ne = {g->K, g->R, 1, 1}};
  icl_dt vb = {.buf = &bb, .type = ICL_TYPE_F32, .ne = {g->K, g->n, 1, 1}};
  icl_dt vy = {.buf = &by, .type = ICL_TYPE_F32, .ne = {g->R, g->n, 1, 1}};
  icl_error err;
  CHECKF(cpu_matmul(be, &va, &vb, &vy, &err) == ICL_OK, "matmul: %s", err.msg);
  for (int64_t t = 0; t < g->n; t++)
    for (int64_t j = 0; j < g->R; j++) {
      float *w = want + t * g->ldy + j;
      *w = g->accumulate ? y0[t * g->ldy + j] + out[t * g->R + j] : out[t * g->R + j];
    }
  free(A), free(B), free(out);
}

/* Whether output y[t][j] is compared: all of them, or under Y_LOWER the j <= t that the product promises. */
static int used(const cpu_gemm_args *g, int64_t t, int64_t j) { return g->causal != CPU_GEMM_Y_LOWER || j <= t; }

/* Max |got - sum in double| over the outputs, relative to the largest sum. */
static double err_f64(const cpu_gemm_args *g, const float *y0, const float *got) {
  double worst = 0.0, big = 1e-30;
  for (int64_t t = 0; t < g->n; t++)
    for (int64_t j = 0; j < g->R; j++) {
      double s = g->accumulate ? y0[t * g->ldy + j] : 0.0;
      for (int64_t c = 0; c < g->K; c++) s += (double)g->a.p[j * g->a.rs + c * g->a.cs] * g->b.p[t * g->b.rs + c * g->b.cs];
      if (used(g, t, j)) worst = fmax(worst, fabs(got[t * g->ldy + j] - s)), big = fmax(big, fabs(s));
    }
  return worst / big;
}

/* Operand [rows][K] stored as layout 0 row-major (rs = K + pad), 1 transposed (rs = 1, cs = rows + pad). */
static cpu_mat operand(float *store, int layout, int64_t rows, int64_t K) {
  return layout == 0 ? (cpu_mat){store, K + 3, 1} : (cpu_mat){store, 1, rows + 5};
}

/* causal (cpu_gemm_args.causal): B is zero where B_LOWER or B_UPPER says it is, so the full product is the want. */
static void check(int64_t R, int64_t n, int64_t K, int la, int lb, int acc, int causal, const char *level) {
  int64_t ldy = R + 2, sa = (R + 5) * (K + 3), sb = (n + 5) * (K + 3);
  float *A = malloc((size_t)sa * 4), *B = malloc((size_t)sb * 4), *y0 = malloc((size_t)(n * ldy) * 4);
  float *want = malloc((size_t)(n * ldy) * 4), *got = malloc((size_t)(n * ldy) * 4);
  t_rand_fill(A, sa, 3, -1.0f, 1.0f), t_rand_fill(B, sb, 5, -1.0f, 1.0f), t_rand_fill(y0, n * ldy, 9, -1.0f, 1.0f);
  cpu_gemm_args g = {.a = operand(A, la, R, K), .b = operand(B, lb, n, K), .R = R, .n = n, .K = K, .ldy = ldy,
                     .accumulate = acc, .causal = causal};
  for (int64_t t = 0; t < n; t++)
    for (int64_t c = 0; c < K; c++)
      if ((causal == CPU_GEMM_B_LOWER && c > t) || (causal == CPU_GEMM_B_UPPER && c < t))
        B[t * g.b.rs + c * g.b.cs] = 0.0f;
  memcpy(want, y0, (size_t)(n * ldy) * 4);
  want_matmul(&g, y0, want);
  cpu_backend *cb = cpu_of(be);
  for (int serial = 0; serial < 2; serial++) {
    memcpy(got, y0, (size_t)(n * ldy) * 4);
    g.y = got;
    icl_error err;
    if (serial) {
      float *ws = cpu_scratch_get(&cb->shared, (size_t)cpu_gemm_ws(&cb->k, n, K) * sizeof(float));
      CHECK(ws != NULL);
      cpu_gemm_serial(&cb->k, &g, ws);
    } else {
      CHECKF(cpu_gemm(cb, &g, &err) == ICL_OK, "gemm: %s", err.msg);
    }
    int64_t bad = 0;
    for (int64_t t = 0; t < n; t++)
      for (int64_t j = 0; j < R; j++) bad += used(&g, t, j) && memcmp(got + t * ldy + j, want + t * ldy + j, 4);
    CHECKF(!bad, "%s %d threads %s R=%lld n=%lld K=%lld layouts %d/%d acc %d causal %d: %lld outputs differ from "
           "transpose + matmul", level, cb->n_threads, serial ? "serial" : "threaded", (long long)R, (long long)n,
           (long long)K, la, lb, acc, causal, (long long)bad);
    double e = err_f64(&g, y0, got);
    CHECKF(e < 1e-5, "%s R=%lld n=%lld K=%lld: error %.2e against float64", level, (long long)R, (long long)n,
           (long long)K, e);
  }
  free(A), free(B), free(y0), free(want), free(got);
}

/* cpu_gemm_group on a matmul backward's products (count dx products summed into one dx, then count dW products of
 * shapes unlike dx's; distinct: each dW with its own x, else one x shared): bit-identical to cpu_gemm on each
 * product in turn, the path the group replaced. */
static void check_group(int count, int64_t K, int64_t R, int64_t n, int distinct, int acc, const char *level) {
  cpu_backend *cb = cpu_of(be);
  float *W[3], *x[3], *dy[3], *dW[2][3], *dx[2];
  for (int i = 0; i < count; i++) {
    W[i] = malloc((size_t)(R * K) * 4), x[i] = malloc((size_t)(n * K) * 4), dy[i] = malloc((size_t)(n * R) * 4);
    t_rand_fill(W[i], R * K, 11 + i, -1.0f, 1.0f), t_rand_fill(x[i], n * K, 21 + i, -1.0f, 1.0f);
    t_rand_fill(dy[i], n * R, 31 + i, -1.0f, 1.0f);
    for (int v = 0; v < 2; v++) dW[v][i] = malloc((size_t)(R * K) * 4), t_rand_fill(dW[v][i], R * K, 41 + i, -1.0f, 1.0f);
  }
  for (int v = 0; v < 2; v++) dx[v] = malloc((size_t)(n * K) * 4), t_rand_fill(dx[v], n * K, 51, -1.0f, 1.0f);
  cpu_gemm_args g[2][6];
  for (int v = 0; v < 2; v++)
    for (int i = 0; i < count; i++) {
      g[v][i] = (cpu_gemm_args){.a = {W[i], 1, K}, .b = {dy[i], R, 1}, .R = K, .n = n, .K = R, .y = dx[v], .ldy = K,
                                .accumulate = i > 0 || acc};
      g[v][count + i] = (cpu_gemm_args){.a = {x[distinct ? i : 0], 1, K}, .b = {dy[i], 1, R}, .R = K, .n = R, .K = n,
                                        .y = dW[v][i], .ldy = K, .accumulate = acc};
    }
  icl_error err;
  for (int i = 0; i < 2 * count; i++) CHECKF(cpu_gemm(cb, &g[0][i], &err) == ICL_OK, "gemm: %s", err.msg);
  CHECKF(cpu_gemm_group(cb, 2 * count, g[1], &err) == ICL_OK, "gemm group: %s", err.msg);
  int bad = memcmp(dx[0], dx[1], (size_t)(n * K) * 4) != 0;
  for (int i = 0; i < count; i++) bad += memcmp(dW[0][i], dW[1][i], (size_t)(R * K) * 4) != 0;
  CHECKF(!bad, "%s %d threads: gemm group of %d dx + %d dW products (K=%lld R=%lld n=%lld, %s x, acc %d): %d outputs "
         "differ from cpu_gemm in turn", level, cb->n_threads, count, count, (long long)K, (long long)R, (long long)n,
         distinct ? "distinct" : "shared", acc, bad);
  for (int i = 0; i < count; i++) {
    free(W[i]), free(x[i]), free(dy[i]);
    for (int v = 0; v < 2; v++) free(dW[v][i]);
  }
  free(dx[0]), free(dx[1]);
}

/* A group of count written dW products alone (the trainer's parameter sums: dW[i] = dy[i]^T x over n rows), which
 * more than one thread runs stage-pipelined (cpu_gemm.c: each thread's share of the rows, the partial sums handed
 * on): bit-identical to cpu_gemm_serial on each product, and taken (the backend's count of pipelined groups grows)
 * exactly when expected. */
static void check_dw_group(int count, int64_t K, int64_t R, int64_t n, const char *level) {
  cpu_backend *cb = cpu_of(be);
  float *x = malloc((size_t)(n * K) * 4), *dy[3], *dW[2][3];
  t_rand_fill(x, n * K, 71, -1.0f, 1.0f);
  cpu_gemm_args g[3];
  for (int i = 0; i < count; i++) {
    dy[i] = malloc((size_t)(n * R) * 4), t_rand_fill(dy[i], n * R, 73 + i, -1.0f, 1.0f);
    for (int v = 0; v < 2; v++) dW[v][i] = malloc((size_t)(R * K) * 4), t_rand_fill(dW[v][i], R * K, 79 + v, -9.0f, 9.0f);
    g[i] = (cpu_gemm_args){.a = {x, 1, K}, .b = {dy[i], 1, R}, .R = K, .n = R, .K = n, .y = dW[1][i], .ldy = K};
  }
  float *ws = cpu_scratch_get(&cb->shared, (size_t)cpu_gemm_ws(&cb->k, R, n) * sizeof(float));
  CHECK(ws != NULL);
  for (int i = 0; ws && i < count; i++) {
    cpu_gemm_args s = g[i];
    s.y = dW[0][i];
    cpu_gemm_serial(&cb->k, &s, ws);
  }
  int64_t before = cb->n_pipelined;
  icl_error err;
  CHECKF(cpu_gemm_group(cb, count, g, &err) == ICL_OK, "gemm group: %s", err.msg);
  int bad = 0;
  for (int i = 0; i < count; i++) bad += memcmp(dW[0][i], dW[1][i], (size_t)(R * K) * 4) != 0;
  CHECKF(!bad, "%s %d threads: %d dW products (K=%lld R=%lld n=%lld): %d differ from the serial gemm", level,
         cb->n_threads, count, (long long)K, (long long)R, (long long)n, bad);
  int64_t P = cb->n_threads; /* cpu_gemm.c's rule: a 128-column chunk per stage, a stage's rows within 1 MiB */
  int want = P > 1 && n >= P * 128 && n / P * (K + R) * 4 <= (1 << 20);
  CHECKF((cb->n_pipelined > before) == want, "%s %d threads: %d dW products over n=%lld rows: pipelined %s, expected %s",
         level, cb->n_threads, count, (long long)n, cb->n_pipelined > before ? "yes" : "no", want ? "yes" : "no");
  for (int i = 0; i < count; i++) free(dy[i]), free(dW[0][i]), free(dW[1][i]);
  free(x);
}

/* The level's gemm_tile_2ld (A and B in place, sums continued from y) with the reduction cut into three parts, for
 * every token count, some row counts and B's tokens side by side (ldt = 1) or rows apart: bit-identical to gemm_tile
 * on the packed copies over the whole reduction. */
static void check_2ld(const char *level) {
  const cpu_kernels *k = &cpu_of(be)->k;
  CHECKF(k->gemm_tile_2ld != NULL, "%s: no gemm_tile_2ld", level);
  if (!k->gemm_tile_2ld) return;
  enum { K = 37, LDA = 45, LDB = 11, LDY = 40 };
  static const int rows[] = {1, 7, 16, 17, 31, 32};
  float A[K * LDA], B[K * LDB], wp[K * CPU_TILE_ROWS] __attribute__((aligned(64))), xp[K * CPU_TILE_TOKS];
  float want[CPU_TILE_TOKS * LDY], got[CPU_TILE_TOKS * LDY];
  t_rand_fill(A, K * LDA, 61, -1.0f, 1.0f), t_rand_fill(B, K * LDB, 67, -1.0f, 1.0f);
  int bad = 0;
  for (int rowb = 0; rowb < 2; rowb++) /* B(t, c) at B[c*LDB + t] or B[t*(K + 2) + c] */
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
      for (int nt = 1; nt <= k->gemm_nt; nt++) {
        int nr = rows[ri];
        int64_t ldx = rowb ? 1 : LDB, ldt = rowb ? K + 2 : 1;
        memset(wp, 0, sizeof wp);
        for (int c = 0; c < K; c++) {
          for (int r = 0; r < nr; r++) wp[c * CPU_TILE_ROWS + r] = A[c * LDA + 3 + r];
          for (int t = 0; t < nt; t++) xp[c * k->gemm_nt + t] = B[2 + c * ldx + t * ldt];
        }
        memset(want, 0, sizeof want), memset(got, 0, sizeof got);
        k->gemm_tile(wp, K, xp, nt, want, LDY, nr);
        static const int cut[] = {0, 13, 14, K};
        for (int p = 0; p < 3; p++)
          k->gemm_tile_2ld(A + cut[p] * LDA + 3, LDA, cut[p + 1] - cut[p], B + 2 + cut[p] * ldx, ldx, ldt, nt, got,
                           LDY, nr, p > 0);
        bad += memcmp(want, got, sizeof want) != 0;
      }
  CHECKF(!bad, "%s: gemm_tile_2ld in three parts differs from gemm_tile in %d of the cases", level, bad);
}

int main(void) {
  static const char *levels[] = {"generic", "avx2", "avx512"};
  /* the last four: A and B both transposed (dW) read in place, the reduction cut into chunks of 128: R on both sides
   * of an item's 256 rows, n odd and past an item's 128 tokens, K on both sides of one and two chunks */
  static const int64_t shapes[][3] = {{32, 8, 16},  {45, 13, 37},  {128, 70, 9},   {9, 9, 128},   {70, 130, 200},
                                      {1, 1, 1},    {40, 20, 1500}, {257, 131, 129}, {256, 9, 128}, {33, 263, 257},
                                      {64, 17, 127}};
  for (size_t l = 0; l < 3; l++)
    for (int threads = 1; threads <= 2; threads++) {
      setenv("ICL_CPU_SIMD", levels[l], 1);
      icl_error err;
      CHECKF(icl_cpu_backend_new(threads, &be, &err) == ICL_OK, "cpu backend: %s", err.msg);
      if (strcmp(cpu_of(be)->k.name, levels[l])) {
        printf("cpu level %s: this CPU lacks it, not tested here\n", levels[l]);
        be->ops->destroy(be);
        continue;
      }
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int la = 0; la < 2; la++)
          for (int lb = 0; lb < 2; lb++)
            for (int acc = 0; acc < 2; acc++) check(shapes[s][0], shapes[s][1], shapes[s][2], la, lb, acc, 0, levels[l]);
      printf("%s, %d thread(s): strided gemm bit-identical to transpose + matmul (+ add) on every layout\n", levels[l],
             threads);
      /* attention's causal products (n = K tokens for a causal B: dq, dk, dv; n = R for Y_LOWER: dP), on both sides
       * of a 128-column chunk and of whole token groups and row tiles */
      static const int64_t cshapes[][2] = {{32, 9}, {45, 131}, {16, 256}, {33, 263}};
      for (size_t s = 0; s < sizeof cshapes / sizeof cshapes[0]; s++)
        for (int la = 0; la < 2; la++)
          for (int lb = 0; lb < 2; lb++)
            for (int acc = 0; acc < 2; acc++) {
              int64_t hd = cshapes[s][0], T = cshapes[s][1];
              check(hd, T, T, la, lb, acc, CPU_GEMM_B_LOWER, levels[l]);
              check(hd, T, T, la, lb, acc, CPU_GEMM_B_UPPER, levels[l]);
              check(T, T, hd, la, lb, acc, CPU_GEMM_Y_LOWER, levels[l]);
            }
      printf("%s, %d thread(s): causal products bit-identical to the full ones\n", levels[l], threads);
      check_2ld(levels[l]);
      /* n 600: dW's A packed (a reduction past the in-place limit), 130: read in place */
      static const int64_t gshapes[][3] = {{40, 45, 600}, {37, 70, 130}, {128, 128, 1152}};
      for (size_t s = 0; s < sizeof gshapes / sizeof gshapes[0]; s++)
        for (int count = 1; count <= 3; count++)
          for (int distinct = 0; distinct < 2; distinct++)
            for (int acc = 0; acc < 2; acc++)
              check_group(count, gshapes[s][0], gshapes[s][1], gshapes[s][2], distinct, acc, levels[l]);
      printf("%s, %d thread(s): gemm groups of mixed shapes bit-identical to the products in turn\n", levels[l], threads);
      /* dW groups: the meta model's shape (1152 rows), ragged rows, tiles and token groups, stages of uneven rows,
       * a reduction too short to pipeline (under one 128-column chunk per thread), stages too large to (2 MB each) */
      static const int64_t dshapes[][3] = {{128, 128, 1152}, {45, 37, 517}, {257, 70, 300}, {33, 9, 255},
                                           {256, 200, 2200}};
      for (size_t s = 0; s < sizeof dshapes / sizeof dshapes[0]; s++)
        for (int count = 1; count <= 3; count++)
          check_dw_group(count, dshapes[s][0], dshapes[s][1], dshapes[s][2], levels[l]);
      printf("%s, %d thread(s): dW groups (pipelined over the rows on 2 threads) bit-identical to the serial gemm\n",
             levels[l], threads);
      be->ops->destroy(be);
    }
  unsetenv("ICL_CPU_SIMD");
  return t_done();
}
