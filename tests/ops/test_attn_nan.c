/* A NaN in a query row (a NaN weight in W_Q or W_K) makes that head's output row and pattern row NaN on every
 * backend, as in the reference: it must not be read as a fully masked row (zeros, then finite logits that hide the
 * bad weights; issue 44). The other heads and rows stay finite. Cases: a prefill (8 queries over 8 keys, the
 * blocked paths) and a decode (1 query over 600 keys, the CPU's chunked row path), on ref, cpu (exact and fast
 * precision) and vulkan; and a fully masked row still gives zeros, not NaN. Each case runs with a pattern output
 * and without one (Vulkan's query-block kernel serves prefill without a pattern). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "testutil.h"

#define HD 64
#define NH 2

static icl_backend *g_be;

static icl_dt buf(int64_t n0, int64_t n1, int64_t n2, const float *data) {
  icl_dt t = {.type = ICL_TYPE_F32, .ne = {n0, n1, n2, 1}};
  icl_error err;
  size_t bytes = (size_t)(n0 * n1 * n2) * sizeof(float);
  if (g_be->ops->buf_alloc(g_be, bytes, ICL_BUF_ACT, &t.buf, &err) ||
      (data && g_be->ops->write(g_be, t.buf, 0, data, bytes, &err))) {
    fprintf(stderr, "buffer: %s\n", err.msg);
    exit(1);
  }
  return t;
}

/* nq queries at positions nkv - nq .. nkv - 1; query nan_q of head 0 is NaN; query 0 of head 1 is knocked out
 * entirely (mask -inf on every key) when mask_all. */
static void run_case(int64_t nq, int64_t nkv, int64_t nan_q, int mask_all, int want_pat, const char *what) {
  float *q = malloc(sizeof(float) * HD * NH * nq), *kv = malloc(sizeof(float) * HD * NH * nkv);
  float *m = calloc((size_t)(nkv * nq * NH), sizeof(float));
  float *out = malloc(sizeof(float) * HD * NH * nq), *pat = malloc(sizeof(float) * nkv * nq * NH);
  uint64_t s = 7;
  for (int64_t i = 0; i < HD * NH * nq; i++) q[i] = t_rand_f(&s, -0.1f, 0.1f);
  for (int64_t i = 0; i < HD * NH * nkv; i++) kv[i] = t_rand_f(&s, -1.0f, 1.0f);
  for (int64_t d = 0; d < HD; d++) q[(nan_q * NH + 0) * HD + d] = NAN;
  if (mask_all)
    for (int64_t j = 0; j < nkv; j++) m[(1 * nq + 0) * nkv + j] = -INFINITY;
  icl_dt Q = buf(HD, NH, nq, q), K = buf(HD, NH, nkv, kv), V = buf(HD, NH, nkv, kv), O = buf(HD, NH, nq, NULL);
  icl_dt P = buf(nkv, nq, NH, NULL), M = buf(nkv, nq, NH, m);
  icl_attn_params ap = {.n_past = (int32_t)(nkv - nq), .scale = 0.125f};
  icl_error err = {0};
  int rc = icl_op_attention(g_be, &Q, &K, &V, &ap, mask_all ? &M : NULL, &O, want_pat ? &P : NULL, &err);
  if (!rc) rc = g_be->ops->read(g_be, O.buf, 0, out, sizeof(float) * HD * NH * nq, &err);
  if (!rc && want_pat) rc = g_be->ops->read(g_be, P.buf, 0, pat, sizeof(float) * nkv * nq * NH, &err);
  CHECKF(rc == 0, "%s %s: %s", g_be->ops->name, what, err.msg);
  int nan_out = 1, nan_pat = 1, finite_rest = 1, masked_zero = 1;
  for (int64_t i = 0; i < nq; i++)
    for (int64_t h = 0; h < NH; h++) {
      int bad = i == nan_q && h == 0, masked = mask_all && i == 0 && h == 1;
      for (int64_t d = 0; d < HD; d++) {
        float o = out[(i * NH + h) * HD + d];
        if (bad) nan_out &= isnan(o);
        else if (masked) masked_zero &= o == 0.0f;
        else finite_rest &= isfinite(o);
      }
      for (int64_t j = 0; want_pat && j <= nkv - nq + i; j++) { /* the visible keys */
        float p = pat[(h * nq + i) * nkv + j];
        if (bad) nan_pat &= isnan(p);
        else if (masked) masked_zero &= p == 0.0f;
        else finite_rest &= isfinite(p);
      }
    }
  const char *pw = want_pat ? "with pattern" : "no pattern";
  CHECKF(nan_out && nan_pat, "%s %s, %s: the NaN query's output and pattern rows are NaN", g_be->ops->name, what, pw);
  CHECKF(finite_rest, "%s %s, %s: the other rows stay finite", g_be->ops->name, what, pw);
  CHECKF(masked_zero, "%s %s, %s: a fully masked row is zeros, not NaN", g_be->ops->name, what, pw);
  g_be->ops->sync(g_be, &err);
  icl_dt all[] = {Q, K, V, O, P, M};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) g_be->ops->buf_free(g_be, all[i].buf);
  free(q), free(kv), free(m), free(out), free(pat);
}

static void cases(void) {
  for (int want_pat = 1; want_pat >= 0; want_pat--) {
    run_case(8, 8, 3, 0, want_pat, "prefill");
    run_case(8, 8, 5, 1, want_pat, "prefill, one row fully masked");
    run_case(1, 600, 0, 0, want_pat, "decode over 600 keys");
    run_case(4, 600, 2, 1, want_pat, "4 queries over 600 keys, one row fully masked");
    run_case(40, 600, 21, 1, want_pat, "40 queries over 600 keys, one row fully masked");
  }
}

int main(void) {
  icl_error err;
  if (icl_ref_backend_new(&g_be, &err) == ICL_OK) cases(), g_be->ops->destroy(g_be);
  else CHECKF(0, "ref backend: %s", err.msg);
  for (int prec = 0; prec < 2; prec++)
    for (int threads = 1; threads <= 2; threads++) {
      if (icl_cpu_backend_new(threads, &g_be, &err) != ICL_OK) {
        CHECKF(0, "cpu backend: %s", err.msg);
        continue;
      }
      g_be->precision = prec ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
      cases();
      g_be->ops->destroy(g_be);
    }
  if (!t_vulkan_built()) printf("vulkan: not built (-DICL_VULKAN=OFF), not tested\n");
  for (int shape = 0; shape < 2 && t_vulkan_built(); shape++) { /* both kernel families, whatever the device */
    setenv("ICL_VK_SHAPE", shape ? "gpu" : "cpu", 1);
    if (icl_vk_backend_new(-1, &g_be, &err) == ICL_OK) cases(), g_be->ops->destroy(g_be);
    else CHECKF(0, "vulkan backend: %s", err.msg);
  }
  return t_done();
}
