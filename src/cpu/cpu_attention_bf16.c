/* The blocked attention path in fast precision where the level has a bf16 dot (gemm_tile_bf16): queries, keys,
 * probabilities and values rounded to bf16 pairs, products summed in f32. q.k pairs run over the head's dims, p.v
 * pairs over keys, so the values are packed two keys to a word. Scores, softmax and the pattern stay f32. */
#include <string.h>

#include "cpu_attention.h"

void cpu_attn_pack_kv_bf16(attn_ctx *c, int64_t it) {
  int64_t ntile = c->nkA_pad / TR, kvh = it / ntile, t = it % ntile, ndt = (c->hd + TR - 1) / TR;
  int64_t hd2 = (c->hd + 1) / 2, np = c->nkA_pad / 2, ld = c->nkvh * c->hd;
  int64_t nk = c->nkA - t * TR < TR ? c->nkA - t * TR : TR, key0 = c->J0 + t * TR;
  uint32_t *kp = c->kpB + (kvh * ntile + t) * hd2 * TR;
  if (nk < TR) memset(kp, 0, (size_t)(hd2 * TR) * sizeof *kp);
  c->k->pack_x_bf16(c->kc + key0 * ld + kvh * c->hd, ld, c->hd, (int)nk, TR, kp);
  uint32_t *vp = c->vpB + kvh * ndt * np * TR + t * (TR / 2) * TR;
  for (int64_t dt = 0; dt < ndt; dt++)
    for (int64_t jp = 0; jp < TR / 2; jp++) {
      uint32_t *o = vp + (dt * np + jp) * TR;
      int64_t j = 2 * jp, nd = c->hd - dt * TR < TR ? c->hd - dt * TR : TR;
      const float *v0 = c->vc + (key0 + j) * ld + kvh * c->hd + dt * TR;
      if (j < nk) c->k->pair_rows_bf16(v0, j + 1 < nk ? v0 + ld : NULL, nd, o);
      for (int64_t d = j < nk ? nd : 0; d < TR; d++) o[d] = 0;
    }
}

void cpu_attn_block_rows_bf16(const attn_ctx *c, const attn_blk *b, int64_t h, int64_t t0, int nt) {
  const cpu_kernels *k = c->k;
  int64_t ldq = c->nh * c->hd, last_hi, lo_unused, hd2 = (c->hd + 1) / 2;
  attn_range(c, t0 + nt - 1, &lo_unused, &last_hi);
  int64_t ns = last_hi - b->j0, ntile = (ns + TR - 1) / TR; /* keys the last (widest) row sees */
  uint32_t *qp = (uint32_t *)b->qp, *pp = (uint32_t *)b->pp;
  k->pack_x_bf16(c->q + (t0 * c->nh + h) * c->hd, ldq, c->hd, nt, k->gemm_nt, qp);
  const uint32_t *kp = c->kpB + (b->kvh * (c->nkA_pad / TR) + (b->j0 - c->J0) / TR) * hd2 * TR;
  for (int64_t t = 0; t < ntile; t++) {
    int nr = ns - t * TR < TR ? (int)(ns - t * TR) : TR;
    k->gemm_tile_bf16(kp + t * hd2 * TR, hd2, qp, nt, b->s + t * TR, b->nk_pad, nr);
  }
  for (int r = 0; r < nt; r++) cpu_attn_softmax_scores(c, h, t0 + r, b->j0, b->s + r * b->nk_pad, ns);
  k->pack_x_bf16(b->s, b->nk_pad, ns, nt, k->gemm_nt, pp); /* an odd last key pairs with 0 */
  int64_t ndt = (c->hd + TR - 1) / TR, np = c->nkA_pad / 2;
  const uint32_t *vp = c->vpB + b->kvh * ndt * np * TR + (b->j0 - c->J0) / 2 * TR;
  float *o = c->out + (t0 * c->nh + h) * c->hd;
  for (int64_t dt = 0; dt < ndt; dt++) {
    int nr = c->hd - dt * TR < TR ? (int)(c->hd - dt * TR) : TR;
    k->gemm_tile_bf16(vp + dt * np * TR, (ns + 1) / 2, pp, nt, o + dt * TR, ldq, nr);
  }
}
