/* Vulkan RoPE and attention against the reference. Shapes: SmolLM2-135M (head dim 64, 9 query /
 * 3 kv heads, GQA), Gemma 3 270M (head dim 256, 4 / 1 heads, sliding window), sequence lengths 1,
 * 7, 512 and 1400 (one head for the long ones, to stay cheap on lavapipe), with n_past > 0,
 * softcap, an additive mask with -inf entries, a fully masked row and the pattern output.
 *
 * Tolerances: RoPE angles are computed in f32 (pos * base^(-2i/n_rot), reduced to [-pi, pi)):
 * at position 1400 the angle error is ~1e-4 rad, NMSE ~1e-8; limit 1e-7 (a swapped pair or a
 * wrong mode gives ~1). Attention: scores, exp and sums in f32 against double, NMSE ~1e-12;
 * limit 1e-9 for outputs and patterns. */
#include "test_vk_util.h"

static void test_rope(int64_t hd, int64_t nh, int64_t n, int n_rot, float base, int mode, int32_t pos0) {
  icl_error err;
  float *x;
  int32_t *pos = vt_xmalloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++) pos[i] = pos0 + (int32_t)i;
  vt xv = vt_rand(hd, nh, n, 5 + (uint64_t)pos0, -1, 1, &x), pv = vt_new(ICL_TYPE_I32, n, 1, 1, 4);
  vt_upload(&pv, pos);
  CHECKF(vt_be->ops->rope(vt_be, &xv.dt, &pv.dt, n_rot, base, mode, &err) == ICL_OK, "rope: %s", err.msg);
  icl_ref_rope(x, hd, nh, n, pos, n_rot, base, mode);
  char what[96];
  snprintf(what, sizeof what, "rope %s [%lld x %lld x %lld] rot %d at %d", mode == ICL_ROPE_NEOX ? "neox" : "normal",
           (long long)hd, (long long)nh, (long long)n, n_rot, pos0);
  vt_expect(what, &xv, x, 1e-7);
  vt_free(&xv), vt_free(&pv);
  free(x), free(pos);
}

typedef struct acase {
  const char *name;
  int64_t hd, nh, nkvh, nq, n_past;
  int32_t window;
  float softcap;
  int mask;    /* 0 none, 1 random with some -inf, 2 one fully masked row */
  int pattern;
} acase;

static float *make_mask(const acase *a, int64_t nkv, uint64_t seed) {
  int64_t n = nkv * a->nq * a->nh;
  float *m = vt_xmalloc((size_t)n * 4);
  t_rand_fill(m, n, seed, -2, 2);
  for (int64_t i = 0; i < n; i += 5) m[i] = -INFINITY; /* knock out some edges */
  if (a->mask == 2)
    for (int64_t j = 0; j < nkv; j++) m[(1 * a->nq + a->nq / 2) * nkv + j] = -INFINITY; /* head 1, a middle query */
  return m;
}

/* A random f32 view at byte offset `pre` (16: vec4-aligned, taking the vec4 kernels where they
 * exist; 12: not). */
static vt rand_at(size_t pre, int64_t ne0, int64_t ne1, int64_t ne2, uint64_t seed, float **host) {
  vt v = vt_new(ICL_TYPE_F32, ne0, ne1, ne2, pre);
  *host = vt_xmalloc(v.bytes);
  t_rand_fill(*host, ne0 * ne1 * ne2, seed, -1, 1);
  vt_upload(&v, *host);
  return v;
}

static void test_attention(const acase *a, size_t pre, uint64_t seed) {
  icl_error err;
  int64_t nkv = a->n_past + a->nq;
  float *q, *k, *v, *mask = NULL;
  vt qv = rand_at(pre, a->hd, a->nh, a->nq, seed, &q);
  vt kv = rand_at(pre, a->hd, a->nkvh, nkv, seed + 1, &k), vv = rand_at(pre, a->hd, a->nkvh, nkv, seed + 2, &v);
  vt mv = {0}, pv = {0}, ov = vt_new(ICL_TYPE_F32, a->hd, a->nh, a->nq, pre);
  if (a->mask) {
    mask = make_mask(a, nkv, seed + 3);
    mv = vt_new(ICL_TYPE_F32, nkv, a->nq, a->nh, 4);
    vt_upload(&mv, mask);
  }
  if (a->pattern) pv = vt_new(ICL_TYPE_F32, nkv, a->nq, a->nh, 8);
  icl_attn_params p = {(int32_t)a->n_past, 1.0f / sqrtf((float)a->hd) * 4.0f, a->window, a->softcap};
  double t0 = vt_now();
  int rc = vt_be->ops->attention(vt_be, &qv.dt, &kv.dt, &vv.dt, &p, a->mask ? &mv.dt : NULL, &ov.dt,
                                 a->pattern ? &pv.dt : NULL, &err);
  CHECKF(rc == ICL_OK, "attention %s: %s", a->name, err.msg);
  CHECK(vt_be->ops->sync(vt_be, &err) == ICL_OK);
  double t_gpu = vt_now() - t0;
  float *out = vt_xmalloc((size_t)(a->hd * a->nh * a->nq) * 4), *pat = NULL;
  if (a->pattern) pat = vt_xmalloc((size_t)(nkv * a->nq * a->nh) * 4);
  icl_ref_attention(q, k, v, a->hd, a->nh, a->nkvh, a->nq, nkv, &p, mask, out, pat);
  char what[128];
  snprintf(what, sizeof what, "attention %s%s (%.2f s)", a->name, pre % 16 ? ", unaligned" : "", t_gpu);
  vt_expect(what, &ov, out, 1e-9);
  if (a->pattern) {
    snprintf(what, sizeof what, "attention %s%s pattern", a->name, pre % 16 ? ", unaligned" : "");
    vt_expect(what, &pv, pat, 1e-9);
  }
  CHECK(vt_guards_ok(&qv) && vt_guards_ok(&kv) && vt_guards_ok(&vv));
  vt_free(&qv), vt_free(&kv), vt_free(&vv), vt_free(&mv), vt_free(&pv), vt_free(&ov);
  free(q), free(k), free(v), free(mask), free(out), free(pat);
}

static const acase CASES[] = {
    {"smollm2 decode (1 query, n_past 6)", 64, 9, 3, 1, 6, 0, 0, 0, 1},
    {"smollm2 prefill 7", 64, 9, 3, 7, 0, 0, 0, 0, 1},
    {"smollm2 7 after 5, no pattern", 64, 9, 3, 7, 5, 0, 0, 0, 0},
    {"gemma3 7 after 5, window 4", 256, 4, 1, 7, 5, 4, 0, 0, 1},
    {"gemma3 decode, window 4", 256, 4, 1, 1, 11, 4, 0, 0, 1},
    {"softcap 5 + mask", 64, 4, 2, 7, 3, 0, 5.0f, 1, 1},
    {"fully masked row", 64, 4, 2, 7, 3, 0, 0, 2, 1},
    {"odd head dim 40", 40, 2, 1, 7, 2, 0, 0, 0, 1},
    {"512 tokens, 1 head", 64, 1, 1, 512, 0, 0, 0, 0, 1},
    {"1400 tokens, 1 head", 64, 1, 1, 1400, 0, 0, 0, 0, 1},
    {"1400 tokens, window 512", 64, 1, 1, 1400, 0, 512, 0, 0, 1},
    {"decode at 1400, gemma3 head", 256, 4, 1, 1, 1399, 0, 0, 0, 1},
};

static void run_all(int long_cases) {
  double t0 = vt_now();
  test_rope(64, 9, 7, 64, 10000.0f, ICL_ROPE_NORMAL, 0);
  test_rope(64, 3, 7, 64, 100000.0f, ICL_ROPE_NORMAL, 1393);
  test_rope(256, 4, 7, 256, 1e6f, ICL_ROPE_NEOX, 0);
  test_rope(256, 1, 5, 256, 10000.0f, ICL_ROPE_NEOX, 1395);
  test_rope(64, 2, 3, 32, 10000.0f, ICL_ROPE_NEOX, 17); /* partial rotation */
  test_rope(64, 2, 3, 32, 10000.0f, ICL_ROPE_NORMAL, 17);
  /* 16-byte-aligned views (vec4 kernels), then unaligned ones (the general kernel) */
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    int long_case = CASES[i].nq + CASES[i].n_past >= 1000;
    if (long_cases || !long_case) test_attention(&CASES[i], 16, 100 + 10 * i);
    if (!long_case) test_attention(&CASES[i], 12, 200 + 10 * i);
  }
  printf("rope + attention ok in %.2f s\n", vt_now() - t0);
}

int main(void) {
  run_all(1);
  vt_other_shape(); /* the other kernel shapes on everything but the 1400-token cases */
  run_all(0);
  return vt_finish();
}
