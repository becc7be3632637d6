/* Causal attention, few queries in exact precision (decode): the blocked path's arithmetic for fewer than
 * ATTN_BLOCKED_MIN_Q queries (one block of queries) without packing the cache, which every decode step did
 * again for the whole cache: q.k^T on the key rows where they lie (gemm_rowtile transposes blocks in
 * registers) and p.v on the value rows (gemm_tile_ld), with up to CPU_ROWTILE_TOKS heads of a GQA group as
 * the kernels' tokens. Each (key, head) score and (dim, head) output is the kernels' per (row, token) fma
 * sequence, the same as the blocked path's per (row, query), so results are bit-identical
 * (test_cpu_exact_batch). Three passes: scores by (query, kv head, run of key tiles), softmax by (query,
 * head), p.v by (query, kv head, 32-dim tile). */
#include <string.h>

#include "cpu_attention.h"

static void inplace_score_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  const cpu_kernels *k = c->k;
  int64_t ch = it % c->ntchunk, kvh = it / c->ntchunk % c->nkvh, i = it / c->ntchunk / c->nkvh;
  int64_t group = c->nh / c->nkvh, ntile = c->nkA_pad / TR, ks = c->nkvh * c->hd;
  int64_t per = (ntile + c->ntchunk - 1) / c->ntchunk, t0 = ch * per, t1 = t0 + per < ntile ? t0 + per : ntile;
  float *qp = c->scratch[ith].p, *tail = qp + c->hd * k->gemm_nt;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h += CPU_ROWTILE_TOKS) {
    int n = (int)((kvh + 1) * group - h < CPU_ROWTILE_TOKS ? (kvh + 1) * group - h : CPU_ROWTILE_TOKS);
    k->pack_x(c->q + (i * c->nh + h) * c->hd, c->hd, c->hd, n, k->gemm_nt, qp); /* heads h.. as tokens */
    for (int64_t t = t0; t < t1; t++) {
      int nr = c->nkA - t * TR < TR ? (int)(c->nkA - t * TR) : TR;
      const float *rows = c->kc + ((c->J0 + t * TR) * c->nkvh + kvh) * c->hd;
      int64_t lds = ks;
      if (nr < TR) { /* the kernel reads all 32 rows: the last tile's from a zero-padded copy */
        memset(tail, 0, (size_t)(TR * c->hd) * sizeof *tail);
        for (int r = 0; r < nr; r++) memcpy(tail + r * c->hd, rows + r * ks, (size_t)c->hd * sizeof *tail);
        rows = tail, lds = c->hd;
      }
      k->gemm_rowtile(rows, lds, c->hd, qp, n, c->sc + (i * c->nh + h) * c->nkA_pad + t * TR, c->nkA_pad, nr);
    }
  }
}

static void inplace_softmax_item(void *arg, int64_t it, int ith) {
  (void)ith;
  attn_ctx *c = arg;
  int64_t i = it / c->nh, h = it % c->nh;
  cpu_attn_softmax_scores(c, h, i, c->J0, c->sc + (i * c->nh + h) * c->nkA_pad, c->nkA);
}

static void inplace_pv_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  const cpu_kernels *k = c->k;
  int64_t ndt = (c->hd + TR - 1) / TR, dt = it % ndt, kvh = it / ndt % c->nkvh, i = it / ndt / c->nkvh;
  int64_t group = c->nh / c->nkvh;
  int nr = c->hd - dt * TR < TR ? (int)(c->hd - dt * TR) : TR;
  float *pp = c->scratch[ith].p;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h += CPU_ROWTILE_TOKS) {
    int n = (int)((kvh + 1) * group - h < CPU_ROWTILE_TOKS ? (kvh + 1) * group - h : CPU_ROWTILE_TOKS);
    k->pack_x(c->sc + (i * c->nh + h) * c->nkA_pad, c->nkA_pad, c->nkA, n, k->gemm_nt, pp);
    k->gemm_tile_ld(c->vc + (c->J0 * c->nkvh + kvh) * c->hd + dt * TR, c->nkvh * c->hd, c->nkA, pp, n,
                    c->out + (i * c->nh + h) * c->hd + dt * TR, c->hd, nr);
  }
}

int cpu_attn_inplace(cpu_backend *cb, attn_ctx *c, icl_error *err) {
  int64_t gnt = c->k->gemm_nt;
  cpu_attn_key_span(c);
  size_t per_thread = (size_t)(c->hd * gnt + TR * c->hd) * sizeof(float);
  size_t pv = (size_t)(c->nkA_pad * gnt) * sizeof(float);
  if (pv > per_thread) per_thread = pv;
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], per_thread))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes of scratch", per_thread);
  size_t sc_bytes = (size_t)(c->nq * c->nh * c->nkA_pad) * sizeof(float);
  if (!(c->sc = cpu_scratch_get(&cb->shared, sc_bytes)))
    return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes for the scores", sc_bytes);
  /* runs of key tiles: about 8 items per thread */
  int64_t base = c->nq * c->nkvh, ntile = c->nkA_pad / TR;
  c->ntchunk = (8 * cb->n_threads + base - 1) / base;
  if (c->ntchunk > ntile) c->ntchunk = ntile;
  /* three passes, three dispatches: serial below 64 Ki of q.k work (a lower bound measured no faster) */
  const int64_t serial_max = 65536;
  cpu_attn_run(cb, c, base * c->ntchunk, inplace_score_item, serial_max);
  cpu_attn_run(cb, c, c->nq * c->nh, inplace_softmax_item, serial_max);
  cpu_attn_run(cb, c, base * ((c->hd + TR - 1) / TR), inplace_pv_item, serial_max);
  return ICL_OK;
}

