/* Reference causal attention with GQA, sliding window, softcap, additive mask and the
 * pattern output, exactly as documented in backend.h. */
#include <math.h>
#include <stdlib.h>

#include "ref.h"

/* Whether key j is hidden from the query at absolute position qpos. */
static int ref_attn_masked(int64_t qpos, int64_t j, int32_t window) {
  return j > qpos || (window > 0 && qpos - j >= window);
}

/* Scores of query row qv against all keys of one kv head, scaled, soft-capped and masked
 * (masked = -inf); returns the maximum, NaN when a score is NaN (non-finite weights must not vanish: a NaN row
 * taken for a fully masked one would give zeros and finite logits). */
static double ref_attn_scores(const float *qv, const float *k, int64_t hd, int64_t nkvh, int64_t kvh, int64_t nkv,
                              int64_t qpos, const icl_attn_params *p, const float *mrow, double *s) {
  double mx = -INFINITY;
  for (int64_t j = 0; j < nkv; j++) {
    if (ref_attn_masked(qpos, j, p->window)) {
      s[j] = -INFINITY;
      continue;
    }
    const float *kv = k + (j * nkvh + kvh) * hd;
    double dot = 0.0;
    for (int64_t d = 0; d < hd; d++) dot += (double)qv[d] * kv[d];
    dot *= p->scale;
    if (p->softcap > 0.0f) dot = p->softcap * tanh(dot / p->softcap);
    if (mrow) dot += mrow[j];
    s[j] = dot;
    if (dot > mx || dot != dot) mx = dot;
  }
  return mx;
}

void icl_ref_attention(const float *q, const float *k, const float *v, int64_t hd, int64_t nh, int64_t nkvh,
                       int64_t nq, int64_t nkv, const icl_attn_params *p, const float *mask, float *out,
                       float *pattern) {
  double *s = malloc((size_t)nkv * sizeof *s);
  double *acc = malloc((size_t)hd * sizeof *acc);
  if (!s || !acc) abort();
  int64_t group = nh / nkvh;
  for (int64_t h = 0; h < nh; h++) {
    int64_t kvh = h / group;
    for (int64_t i = 0; i < nq; i++) {
      int64_t qpos = p->n_past + i;
      const float *mrow = mask ? mask + (h * nq + i) * nkv : NULL;
      double mx = ref_attn_scores(q + (i * nh + h) * hd, k, hd, nkvh, kvh, nkv, qpos, p, mrow, s);
      double sum = 0.0;
      for (int64_t j = 0; j < nkv; j++) {
        s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx); /* a fully masked row gives zeros */
        sum += s[j];
      }
      for (int64_t d = 0; d < hd; d++) acc[d] = 0.0;
      for (int64_t j = 0; j < nkv; j++) {
        double wgt = sum > 0.0 || sum != sum ? s[j] / sum : 0.0; /* NaN stays NaN */
        if (pattern) pattern[(h * nq + i) * nkv + j] = (float)wgt;
        if (wgt == 0.0) continue;
        const float *vv = v + (j * nkvh + kvh) * hd;
        for (int64_t d = 0; d < hd; d++) acc[d] += wgt * vv[d];
      }
      float *o = out + (i * nh + h) * hd;
      for (int64_t d = 0; d < hd; d++) o[d] = (float)acc[d];
    }
  }
  free(s);
  free(acc);
}
