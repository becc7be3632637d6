/* EXACT precision's contract on the CPU matmul, op by op (and its repacked weights, bit for bit): a token's output row is bit-identical whether the
 * token is multiplied alone or among n others, on every SIMD level and across the kernels the token count picks
 * (the row-major few-token kernel, the fused one-block path, the panel path), for whole and ragged K, row
 * counts that leave partial tiles, and float and quantized weight types. The same for attention: a query alone
 * (decode: the in-place path where the level has it) against its row of a batch (the blocked path), output and
 * pattern rows, over head sizes, GQA groups, windows, softcap and masks; attention_seqs (the trainer's B sequences
 * in one call) against each sequence alone. And matmul_group (q, k and v in one
 * dispatch), in both precisions: each output bit-identical to its weight's lone matmul, over mixed weight types.
 * (tests/model/test_batch_invariance.c checks the same on whole models with the real shapes.) */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "ops.h"
#include "ref.h"
#include "testutil.h"

static icl_backend *be;

static icl_dt tensor(uint32_t type, int64_t n0, int64_t n1, const void *host) {
  icl_dt t = {.type = type, .ne = {n0, n1, 1, 1}};
  size_t bytes = icl_type_row_bytes(type, n0) * (size_t)n1;
  icl_error err;
  CHECKF(be->ops->buf_alloc(be, bytes, ICL_BUF_WEIGHT, &t.buf, &err) == ICL_OK, "alloc: %s", err.msg);
  if (host) CHECKF(be->ops->write(be, t.buf, 0, host, bytes, &err) == ICL_OK, "write: %s", err.msg);
  return t;
}

static void release(icl_dt *t) { be->ops->buf_free(be, t->buf); }

/* y of all n tokens at once against each token alone. */
static void check_case(uint32_t type, int64_t K, int64_t rows, int64_t n, const char *level) {
  if (K % icl_type_block_elems(type)) return;
  size_t wbytes = icl_type_row_bytes(type, K) * (size_t)rows;
  void *wh = malloc(wbytes);
  float *xh = malloc((size_t)(K * n) * sizeof(float)), *ya = malloc((size_t)(rows * n) * sizeof(float));
  float *y1 = malloc((size_t)rows * sizeof(float));
  if (type == ICL_TYPE_F32) t_rand_fill(wh, K * rows, 7, -1.0f, 1.0f);
  else icl_ref_random_weights(type, wh, K * rows, 7);
  t_rand_fill(xh, K * n, 11, -1.0f, 1.0f);
  icl_dt w = tensor(type, K, rows, wh), x = tensor(ICL_TYPE_F32, K, n, xh), y = tensor(ICL_TYPE_F32, rows, n, NULL);
  icl_error err;
  CHECKF(icl_op_matmul(be, &w, &x, &y, &err) == ICL_OK, "matmul: %s", err.msg);
  CHECKF(be->ops->read(be, y.buf, 0, ya, (size_t)(rows * n) * sizeof(float), &err) == ICL_OK, "read: %s", err.msg);
  int bad = -1;
  for (int64_t t = 0; t < n && bad < 0; t++) {
    icl_dt x1 = tensor(ICL_TYPE_F32, K, 1, xh + t * K), y1d = tensor(ICL_TYPE_F32, rows, 1, NULL);
    CHECKF(icl_op_matmul(be, &w, &x1, &y1d, &err) == ICL_OK, "matmul: %s", err.msg);
    CHECKF(be->ops->read(be, y1d.buf, 0, y1, (size_t)rows * sizeof(float), &err) == ICL_OK, "read: %s", err.msg);
    if (memcmp(y1, ya + t * rows, (size_t)rows * sizeof(float))) bad = (int)t;
    release(&x1);
    release(&y1d);
  }
  CHECKF(bad < 0, "%s %s K=%lld rows=%lld n=%lld: token %d alone differs from the batch", level, icl_type_name(type),
         (long long)K, (long long)rows, (long long)n, bad);
  release(&w);
  release(&x);
  release(&y);
  free(wh), free(xh), free(ya), free(y1);
}

/* The repacked weights (cpu_xweights.c) against dequantizing the rows on every call: bit-identical for every
 * token count, and a write into the weight's buffer is seen by the next matmul (the copy is dropped). */
static void check_repack(uint32_t type, int64_t K, int64_t rows, int64_t n, const char *level) {
  if (K % icl_type_block_elems(type)) return;
  cpu_backend *cb = cpu_of(be);
  size_t wbytes = icl_type_row_bytes(type, K) * (size_t)rows;
  void *wh = malloc(wbytes);
  float *xh = malloc((size_t)(K * n) * sizeof(float)), *ya = malloc((size_t)(rows * n) * sizeof(float));
  float *yb = malloc((size_t)(rows * n) * sizeof(float));
  icl_error err;
  t_rand_fill(xh, K * n, 13, -1.0f, 1.0f);
  icl_dt w = tensor(type, K, rows, NULL), x = tensor(ICL_TYPE_F32, K, n, xh), y = tensor(ICL_TYPE_F32, rows, n, NULL);
  for (int round = 0; round < 2; round++) { /* the second round rewrites the weight in place */
    if (type == ICL_TYPE_F32) t_rand_fill(wh, K * rows, 7 + round, -1.0f, 1.0f);
    else icl_ref_random_weights(type, wh, K * rows, 7 + (uint64_t)round);
    CHECKF(be->ops->write(be, w.buf, 0, wh, wbytes, &err) == ICL_OK, "write: %s", err.msg);
    for (int off = 1; off >= 0; off--) {
      cb->xw_off = off;
      CHECKF(icl_op_matmul(be, &w, &x, &y, &err) == ICL_OK, "matmul: %s", err.msg);
      CHECKF(be->ops->read(be, y.buf, 0, off ? ya : yb, (size_t)(rows * n) * sizeof(float), &err) == ICL_OK,
             "read: %s", err.msg);
    }
    int repacked = cpu_xw_get(cb, &w) != NULL;
    CHECKF(!memcmp(ya, yb, (size_t)(rows * n) * sizeof(float)),
           "%s %s K=%lld rows=%lld n=%lld round %d (repacked: %d): repacked weights differ from dequantized rows",
           level, icl_type_name(type), (long long)K, (long long)rows, (long long)n, round, repacked);
    /* where the level has the kernels, every quantized type is repacked */
    if (strcmp(level, "generic") && type != ICL_TYPE_F32 && type != ICL_TYPE_F16)
      CHECKF(repacked, "%s %s K=%lld: not repacked", level, icl_type_name(type), (long long)K);
  }
  release(&w);
  release(&x);
  release(&y);
  free(wh), free(xh), free(ya), free(yb);
}


/* matmul_group of 3 weights (types ts, rows rs) on n tokens against each weight's lone matmul, bit for bit. */
static void check_group(const uint32_t ts[3], int64_t K, const int64_t rs[3], int64_t n, const char *level) {
  icl_dt w[3], y[3], y1[3];
  float *xh = malloc((size_t)(K * n) * sizeof(float));
  t_rand_fill(xh, K * n, 5, -2.0f, 2.0f);
  icl_dt x = tensor(ICL_TYPE_F32, K, n, xh);
  for (int i = 0; i < 3; i++) {
    size_t wbytes = icl_type_row_bytes(ts[i], K) * (size_t)rs[i];
    void *wh = malloc(wbytes);
    if (ts[i] == ICL_TYPE_F32) t_rand_fill(wh, K * rs[i], 17 + i, -1.0f, 1.0f);
    else icl_ref_random_weights(ts[i], wh, K * rs[i], 17 + (uint64_t)i);
    w[i] = tensor(ts[i], K, rs[i], wh);
    y[i] = tensor(ICL_TYPE_F32, rs[i], n, NULL), y1[i] = tensor(ICL_TYPE_F32, rs[i], n, NULL);
    free(wh);
  }
  icl_error err;
  CHECKF(icl_op_matmul_group(be, 3, w, &x, y, &err) == ICL_OK, "matmul_group: %s", err.msg);
  for (int i = 0; i < 3; i++) {
    CHECKF(icl_op_matmul(be, &w[i], &x, &y1[i], &err) == ICL_OK, "matmul: %s", err.msg);
    size_t bytes = (size_t)(rs[i] * n) * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    CHECKF(be->ops->read(be, y[i].buf, 0, a, bytes, &err) == ICL_OK, "read: %s", err.msg);
    CHECKF(be->ops->read(be, y1[i].buf, 0, b, bytes, &err) == ICL_OK, "read: %s", err.msg);
    CHECKF(!memcmp(a, b, bytes), "%s %s group %s/%s/%s K=%lld n=%lld: output %d differs from its lone matmul", level,
           be->precision == ICL_PRECISION_FAST ? "fast" : "exact", icl_type_name(ts[0]), icl_type_name(ts[1]),
           icl_type_name(ts[2]), (long long)K, (long long)n, i);
    free(a), free(b);
    release(&w[i]), release(&y[i]), release(&y1[i]);
  }
  release(&x);
  free(xh);
}

static icl_dt tensor4(int64_t n0, int64_t n1, int64_t n2, const float *host) {
  icl_dt t = tensor(ICL_TYPE_F32, n0, n1 * n2, host);
  t.ne[1] = n1, t.ne[2] = n2;
  return t;
}

/* Attention of nb queries at positions n_past.. (the blocked path) against each query alone with the cache
 * up to its own position (exactly that many keys, so reading past them is an overflow): {hd, heads, kv_heads,
 * n_past, window}, softcap, mask. */
static void check_attention(const int64_t sh[5], float softcap, int masked, const char *level) {
  int64_t hd = sh[0], nh = sh[1], nkvh = sh[2], n_past = sh[3], nb = 6, nkv = n_past + nb;
  float *qh = malloc((size_t)(hd * nh * nb) * sizeof(float)), *kh = malloc((size_t)(hd * nkvh * nkv) * sizeof(float));
  float *vh = malloc((size_t)(hd * nkvh * nkv) * sizeof(float)), *mh = malloc((size_t)(nkv * nb * nh) * sizeof(float));
  float *oa = malloc((size_t)(hd * nh * nb) * sizeof(float)), *pa = malloc((size_t)(nkv * nb * nh) * sizeof(float));
  float *o1 = malloc((size_t)(hd * nh) * sizeof(float)), *p1 = malloc((size_t)(nkv * nh) * sizeof(float));
  float *m1 = malloc((size_t)(nkv * nh) * sizeof(float));
  t_rand_fill(qh, hd * nh * nb, 21, -1.0f, 1.0f);
  t_rand_fill(kh, hd * nkvh * nkv, 22, -1.0f, 1.0f);
  t_rand_fill(vh, hd * nkvh * nkv, 23, -1.0f, 1.0f);
  t_rand_fill(mh, nkv * nb * nh, 24, -4.0f, 0.0f);
  icl_attn_params p = {(int32_t)n_past, 1.0f / sqrtf((float)hd), (int32_t)sh[4], softcap};
  icl_dt q = tensor4(hd, nh, nb, qh), k = tensor4(hd, nkvh, nkv, kh), v = tensor4(hd, nkvh, nkv, vh);
  icl_dt m = tensor4(nkv, nb, nh, mh), o = tensor4(hd, nh, nb, NULL), pt = tensor4(nkv, nb, nh, NULL);
  icl_error err;
  CHECKF(icl_op_attention(be, &q, &k, &v, &p, masked ? &m : NULL, &o, &pt, &err) == ICL_OK, "attention: %s", err.msg);
  CHECKF(be->ops->read(be, o.buf, 0, oa, (size_t)(hd * nh * nb) * sizeof(float), &err) == ICL_OK, "read: %s", err.msg);
  CHECKF(be->ops->read(be, pt.buf, 0, pa, (size_t)(nkv * nb * nh) * sizeof(float), &err) == ICL_OK, "read: %s",
         err.msg);
  for (int64_t i = 0; i < nb; i++) {
    int64_t n1 = n_past + i + 1; /* the cache at query i's step */
    for (int64_t h = 0; h < nh; h++) memcpy(m1 + h * n1, mh + (h * nb + i) * nkv, (size_t)n1 * sizeof(float));
    icl_attn_params p1p = p;
    p1p.n_past = (int32_t)(n_past + i);
    icl_dt q1 = tensor4(hd, nh, 1, qh + i * hd * nh), k1 = tensor4(hd, nkvh, n1, kh), v1 = tensor4(hd, nkvh, n1, vh);
    icl_dt mm = tensor4(n1, 1, nh, m1), o1d = tensor4(hd, nh, 1, NULL), p1d = tensor4(n1, 1, nh, NULL);
    CHECKF(icl_op_attention(be, &q1, &k1, &v1, &p1p, masked ? &mm : NULL, &o1d, &p1d, &err) == ICL_OK,
           "attention: %s", err.msg);
    CHECKF(be->ops->read(be, o1d.buf, 0, o1, (size_t)(hd * nh) * sizeof(float), &err) == ICL_OK, "read: %s", err.msg);
    CHECKF(be->ops->read(be, p1d.buf, 0, p1, (size_t)(n1 * nh) * sizeof(float), &err) == ICL_OK, "read: %s", err.msg);
    int same = !memcmp(o1, oa + i * hd * nh, (size_t)(hd * nh) * sizeof(float));
    for (int64_t h = 0; h < nh; h++) same &= !memcmp(p1 + h * n1, pa + (h * nb + i) * nkv, (size_t)n1 * sizeof(float));
    CHECKF(same, "%s attention hd=%lld heads=%lld kv_heads=%lld n_past=%lld window=%lld softcap=%g mask=%d: query %lld "
           "alone differs from the batch", level, (long long)hd, (long long)nh, (long long)nkvh, (long long)n_past,
           (long long)sh[4], softcap, masked, (long long)i);
    icl_dt *all1[] = {&q1, &k1, &v1, &mm, &o1d, &p1d};
    for (int j = 0; j < 6; j++) release(all1[j]);
  }
  icl_dt *all[] = {&q, &k, &v, &m, &o, &pt};
  for (int j = 0; j < 6; j++) release(all[j]);
  free(qh), free(kh), free(vh), free(mh), free(oa), free(pa), free(o1), free(p1), free(m1);
}

/* attention_seqs (the trainer's B sequences in one call) against attention on each sequence alone, output and
 * pattern bit for bit: {hd, heads, T, B}. */
static void check_attention_seqs(const int64_t sh[4], const char *level) {
  int64_t hd = sh[0], nh = sh[1], T = sh[2], B = sh[3], per = hd * nh * T, pp = T * T * nh;
  float *in[3], *oa = malloc((size_t)(per * B) * sizeof(float)), *pa = malloc((size_t)(pp * B) * sizeof(float));
  float *o1 = malloc((size_t)per * sizeof(float)), *p1 = malloc((size_t)pp * sizeof(float));
  for (int i = 0; i < 3; i++) in[i] = malloc((size_t)(per * B) * sizeof(float)), t_rand_fill(in[i], per * B, 31 + i, -2, 2);
  icl_attn_params p = {.scale = 1.0f / sqrtf((float)hd)};
  icl_dt q = tensor4(hd, nh, T, in[0]), k = tensor4(hd, nh, T, in[1]), v = tensor4(hd, nh, T, in[2]);
  icl_dt o = tensor4(hd, nh, T, NULL), pt = tensor4(T, T, nh, NULL);
  icl_dt qb = tensor(ICL_TYPE_F32, per, B, in[0]), kb = tensor(ICL_TYPE_F32, per, B, in[1]);
  icl_dt vb = tensor(ICL_TYPE_F32, per, B, in[2]), ob = tensor(ICL_TYPE_F32, per, B, NULL), pb = tensor(ICL_TYPE_F32, pp, B, NULL);
  icl_dt *all[] = {&qb, &kb, &vb, &ob};
  for (int i = 0; i < 4; i++) all[i]->ne[0] = hd, all[i]->ne[1] = nh, all[i]->ne[2] = T, all[i]->ne[3] = B;
  pb.ne[0] = T, pb.ne[1] = T, pb.ne[2] = nh, pb.ne[3] = B;
  icl_error err;
  CHECKF(icl_op_attention_seqs(be, &qb, &kb, &vb, &p, &ob, &pb, &err) == ICL_OK, "attention_seqs: %s", err.msg);
  CHECK(be->ops->read(be, ob.buf, 0, oa, (size_t)(per * B) * sizeof(float), &err) == ICL_OK);
  CHECK(be->ops->read(be, pb.buf, 0, pa, (size_t)(pp * B) * sizeof(float), &err) == ICL_OK);
  int bad = -1;
  for (int64_t b = 0; b < B && bad < 0; b++) {
    icl_dt *one[] = {&q, &k, &v};
    for (int i = 0; i < 3; i++)
      CHECK(be->ops->write(be, one[i]->buf, 0, in[i] + b * per, (size_t)per * sizeof(float), &err) == ICL_OK);
    CHECKF(icl_op_attention(be, &q, &k, &v, &p, NULL, &o, &pt, &err) == ICL_OK, "attention: %s", err.msg);
    CHECK(be->ops->read(be, o.buf, 0, o1, (size_t)per * sizeof(float), &err) == ICL_OK);
    CHECK(be->ops->read(be, pt.buf, 0, p1, (size_t)pp * sizeof(float), &err) == ICL_OK);
    if (memcmp(o1, oa + b * per, (size_t)per * sizeof(float)) || memcmp(p1, pa + b * pp, (size_t)pp * sizeof(float)))
      bad = (int)b;
  }
  CHECKF(bad < 0, "%s attention_seqs hd=%lld heads=%lld T=%lld B=%lld: sequence %d differs from attention on it alone",
         level, (long long)hd, (long long)nh, (long long)T, (long long)B, bad);
  icl_dt *rel[] = {&q, &k, &v, &o, &pt, &qb, &kb, &vb, &ob, &pb};
  for (int i = 0; i < 10; i++) release(rel[i]);
  for (int i = 0; i < 3; i++) free(in[i]);
  free(oa), free(pa), free(o1), free(p1);
}

int main(void) {
  static const char *levels[] = {"generic", "avx2", "avx512"};
  static const uint32_t types[] = {ICL_TYPE_F32, ICL_TYPE_F16, ICL_TYPE_Q4_1, ICL_TYPE_Q8_0, ICL_TYPE_Q4_K, ICL_TYPE_Q6_K};
  static const int64_t shapes[][2] = {{7, 5}, {33, 40}, {96, 33}, {256, 70}, {640, 33}, {768, 40}, {256, 200}};
  static const int64_t ns[] = {2, 3, 4, 5, 9, 67};
  for (int l = 0; l < 3; l++) {
    setenv("ICL_CPU_SIMD", levels[l], 1);
    icl_error err;
    CHECKF(icl_cpu_backend_new(2, &be, &err) == ICL_OK, "cpu backend: %s", err.msg);
    if (strcmp(cpu_of(be)->k.name, levels[l])) {
      printf("cpu level %s: this CPU lacks it, not tested here\n", levels[l]);
      be->ops->destroy(be);
      continue;
    }
    be->precision = ICL_PRECISION_EXACT;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
      for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
          check_case(types[ti], shapes[si][0], shapes[si][1], ns[ni], levels[l]);
    printf("%s: every token alone equals its row of the batch\n", levels[l]);
    static const int64_t rns[] = {1, 2, 3, 4, 5, 9, 67, 130};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
      for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (size_t ni = 0; ni < sizeof rns / sizeof rns[0]; ni++)
          check_repack(types[ti], shapes[si][0], shapes[si][1], rns[ni], levels[l]);
    for (uint32_t t = 0; t < ICL_TYPE_COUNT; t++) /* the other quantized types on one shape of each kind */
      if (cpu_of(be)->k.xpack[t] && t != ICL_TYPE_Q4_1 && t != ICL_TYPE_Q8_0 && t != ICL_TYPE_Q4_K && t != ICL_TYPE_Q6_K)
        for (size_t ni = 0; ni < sizeof rns / sizeof rns[0]; ni++) check_repack(t, 512, 45, rns[ni], levels[l]);
    printf("%s: repacked weights equal dequantized rows, and follow writes\n", levels[l]);
    /* {hd, heads, kv_heads, n_past, window}: SmolLM2 and Gemma 3 shapes, groups over CPU_ROWTILE_TOKS (7),
     * head sizes not a multiple of 16 or 32 (40, 96), one partial key tile or many, a window */
    static const int64_t attn[][5] = {{64, 9, 3, 0, 0},   {64, 9, 3, 27, 0},  {64, 9, 3, 250, 0}, {256, 4, 1, 700, 512},
                                      {256, 4, 1, 30, 16}, {40, 2, 1, 37, 0}, {96, 7, 1, 64, 0},  {128, 14, 2, 45, 20}};
    for (size_t ai = 0; ai < sizeof attn / sizeof attn[0]; ai++) {
      check_attention(attn[ai], 0.0f, 0, levels[l]);
      check_attention(attn[ai], ai % 2 ? 30.0f : 0.0f, 1, levels[l]);
    }
    printf("%s: every query alone equals its row of the batch in attention\n", levels[l]);
    /* {hd, heads, T, B}: the meta-learning and attn2-like shapes, T below the blocked path's minimum, T > ATTN_QB */
    static const int64_t seqs[][4] = {{128, 1, 9, 13}, {32, 8, 70, 3}, {16, 2, 3, 4}, {64, 4, 130, 2}};
    for (size_t si = 0; si < sizeof seqs / sizeof seqs[0]; si++) check_attention_seqs(seqs[si], levels[l]);
    printf("%s: attention_seqs equals attention on each sequence alone\n", levels[l]);
    /* type sets: SmolLM2's, Gemma 3's, Q8_0 beside another pair-dot layout, f32 (no integer path) and f16 */
    static const uint32_t gts[][3] = {{ICL_TYPE_Q4_1, ICL_TYPE_Q4_1, ICL_TYPE_Q8_0},
                                      {ICL_TYPE_Q4_K, ICL_TYPE_Q5_0, ICL_TYPE_Q6_K},
                                      {ICL_TYPE_Q8_0, ICL_TYPE_Q4_0, ICL_TYPE_Q8_0},
                                      {ICL_TYPE_F32, ICL_TYPE_Q4_K, ICL_TYPE_F16}};
    static const int64_t grs[][3] = {{576, 192, 192}, {33, 7, 70}, {1, 64, 65}};
    static const int64_t gks[] = {256, 768}, gns[] = {1, 2, 5, 70}; /* 70: past one token block (the panel path) */
    for (int prec = 0; prec < 2; prec++) {
      be->precision = prec ? ICL_PRECISION_FAST : ICL_PRECISION_EXACT;
      for (size_t a = 0; a < sizeof gts / sizeof gts[0]; a++)
        for (size_t r = 0; r < sizeof grs / sizeof grs[0]; r++)
          for (size_t k = 0; k < sizeof gks / sizeof gks[0]; k++)
            for (size_t ni = 0; ni < sizeof gns / sizeof gns[0]; ni++)
              check_group(gts[a], gks[k], grs[r], gns[ni], levels[l]);
    }
    be->precision = ICL_PRECISION_EXACT;
    printf("%s: matmul_group's outputs equal lone matmuls in both precisions\n", levels[l]);
    be->ops->destroy(be);
  }
  unsetenv("ICL_CPU_SIMD");
  return t_done();
}
