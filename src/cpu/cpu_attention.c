/* Causal attention on the CPU, threaded over items claimed dynamically (later queries see more
 * keys, so static splits would be uneven). Two paths:
 * - few queries (decode in fast precision): one query row at a time for all query heads of a GQA
 *   group, so the cache is read once per group; float dots against each visible key; items (query,
 *   kv head, chunk of keys), each chunk with its own softmax max and sum, merged after (flash-decoding:
 *   splitting by heads instead left a thread idle with one kv head, as Gemma 3, and read the cache
 *   once per head);
 * - many queries (prefill; every query in exact precision): the keys any query sees are packed once per
 *   op, transposed into 32-key tiles, and the values into 32-dim tiles (packing them per block of
 *   queries instead repeated the work for every block: ~8% of a 1400-token forward); then per (kv head
 *   or single query head when there are too few kv heads to keep the threads busy, block of queries)
 *   both q.k^T and p.v run on the matmul's register-blocked kernel (gemm_tile) for all query heads
 *   of the group.
 * Keys outside the causal/window range are skipped where whole tiles allow, masked otherwise. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

/* Query rows per item of the blocked path, and the fewest queries that use it. */
#define ATTN_QB 64
#define ATTN_BLOCKED_MIN_Q 4
#define TR CPU_TILE_ROWS

typedef struct attn_ctx {
  const cpu_kernels *k;
  cpu_scratch *scratch;
  const float *q, *kc, *vc, *mask;
  float *out, *pattern;
  int64_t hd, nh, nkvh, nq, nkv;
  int64_t item_heads; /* blocked path: query heads per item, the whole GQA group or 1 when that makes too few items */
  /* row path: key chunks per (query, kv head), and per (query, head, chunk) max, sum and hd output floats */
  int64_t nchunk;
  float *part;
  icl_attn_params p;
  /* blocked path: keys [J0, J0 + nkA) packed, kpA [kvh][tile][hd][32], vpA [kvh][dtile][nkA_pad][32] */
  float *kpA, *vpA;
  int64_t J0, nkA, nkA_pad;
  /* in-place path: scores sc [query][head][nkA_pad] from key J0, score items per (query, kv head) */
  float *sc;
  int64_t ntchunk;
} attn_ctx;

/* Visible key range [*lo, *hi) of query i: causal limit and sliding window. */
static void attn_range(const attn_ctx *c, int64_t i, int64_t *lo, int64_t *hi) {
  int64_t qpos = c->p.n_past + i;
  *hi = qpos + 1 < c->nkv ? qpos + 1 : c->nkv;
  *lo = c->p.window > 0 && qpos - c->p.window + 1 > 0 ? qpos - c->p.window + 1 : 0;
}

/* Row path (few queries, FAST): items (query, kv head, key chunk), each over the whole GQA group, so
 * the cache is read once per group and every thread streams its own part of it however few kv heads
 * there are (Gemma 3: one). An item leaves per head its chunk's running max m, sum l of exp(score - m)
 * and unnormalized output in c->part (and the exp values in the pattern row); attn_combine merges the
 * chunks. */
static void attn_chunk_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  const cpu_kernels *k = c->k;
  int64_t ch = it % c->nchunk, kvh = it / c->nchunk % c->nkvh, i = it / c->nchunk / c->nkvh;
  int64_t group = c->nh / c->nkvh, h0 = kvh * group, j0, j1;
  attn_range(c, i, &j0, &j1);
  int64_t cs = (j1 - j0 + c->nchunk - 1) / c->nchunk;
  int64_t ja = j0 + ch * cs < j1 ? j0 + ch * cs : j1, jb = ja + cs < j1 ? ja + cs : j1;
  float *s = c->scratch[ith].p, *part = c->part + ((i * c->nh + h0) * c->nchunk + ch) * (c->hd + 2);
  int64_t pstride = c->nchunk * (c->hd + 2); /* from one head's part to the next's */
  const float *q = c->q + (i * c->nh + h0) * c->hd;
  if (k->qk_rows && jb > ja) {
    k->qk_rows(q, (int)group, c->hd, c->kc + kvh * c->hd, c->nkvh * c->hd, ja, jb, s, c->nkv);
  } else {
    for (int64_t j = ja; j < jb; j++) {
      const float *kv = c->kc + (j * c->nkvh + kvh) * c->hd;
      for (int64_t g = 0; g < group; g++) s[g * c->nkv + j] = k->dot(q + g * c->hd, kv, c->hd);
    }
  }
  for (int64_t g = 0; g < group; g++) {
    int64_t h = h0 + g;
    float *sg = s + g * c->nkv, *pg = part + g * pstride;
    const float *mrow = c->mask ? c->mask + (h * c->nq + i) * c->nkv : NULL;
    float mx = k->scale_max(sg + ja, jb - ja, c->p.scale);
    if (c->p.softcap > 0.0f || mrow) {
      mx = -INFINITY;
      for (int64_t j = ja; j < jb; j++) {
        float v = sg[j];
        if (c->p.softcap > 0.0f) v = c->p.softcap * tanhf(v / c->p.softcap);
        if (mrow) v += mrow[j];
        sg[j] = v;
        mx = v > mx ? v : mx;
      }
    }
    double sum = mx != -INFINITY ? k->exp_sum(sg + ja, jb - ja, mx) : 0.0;
    if (sum == 0.0) memset(sg + ja, 0, (size_t)(jb - ja) * sizeof *sg); /* masked chunk: no -inf * 0 */
    pg[0] = mx;
    pg[1] = (float)sum;
    memset(pg + 2, 0, (size_t)c->hd * sizeof *pg);
    if (c->pattern) memcpy(c->pattern + (h * c->nq + i) * c->nkv + ja, sg + ja, (size_t)(jb - ja) * sizeof *sg);
  }
  if (k->pv_rows) {
    /* pv_rows writes head g's row at o + g * hd: one head at a time, as the parts are not contiguous */
    for (int64_t g = 0; g < group; g++)
      k->pv_rows(s + g * c->nkv, c->nkv, 1, c->hd, c->vc + kvh * c->hd, c->nkvh * c->hd, ja, jb, part + g * pstride + 2);
    return;
  }
  for (int64_t j = ja; j < jb; j++) {
    const float *vv = c->vc + (j * c->nkvh + kvh) * c->hd;
    for (int64_t g = 0; g < group; g++) {
      float wgt = s[g * c->nkv + j];
      if (wgt != 0.0f) k->axpy(part + g * pstride + 2, wgt, vv, c->hd);
    }
  }
}

/* Output row (and pattern row) of query i, head h from its chunks' parts: weights exp(m - M) / L. */
static void attn_combine(const attn_ctx *c, int64_t i, int64_t h) {
  const float *part = c->part + (i * c->nh + h) * c->nchunk * (c->hd + 2);
  float *o = c->out + (i * c->nh + h) * c->hd, *prow = c->pattern ? c->pattern + (h * c->nq + i) * c->nkv : NULL;
  float mx = -INFINITY;
  double total = 0.0;
  for (int64_t ch = 0; ch < c->nchunk; ch++) {
    const float *p = part + ch * (c->hd + 2);
    if (p[1] > 0.0f && p[0] > mx) mx = p[0];
  }
  for (int64_t ch = 0; ch < c->nchunk; ch++) {
    const float *p = part + ch * (c->hd + 2);
    if (p[1] > 0.0f) total += (double)p[1] * exp((double)p[0] - mx);
  }
  memset(o, 0, (size_t)c->hd * sizeof *o);
  int64_t j0, j1;
  attn_range(c, i, &j0, &j1);
  if (prow) {
    memset(prow, 0, (size_t)j0 * sizeof *prow);
    memset(prow + j1, 0, (size_t)(c->nkv - j1) * sizeof *prow);
  }
  int64_t cs = (j1 - j0 + c->nchunk - 1) / c->nchunk;
  for (int64_t ch = 0; ch < c->nchunk; ch++) {
    const float *p = part + ch * (c->hd + 2);
    /* fully masked (total 0): zeros, as in the reference */
    float w = p[1] > 0.0f && total > 0.0 ? (float)(exp((double)p[0] - mx) / total) : 0.0f;
    if (w != 0.0f) c->k->axpy(o, w, p + 2, c->hd);
    int64_t ja = j0 + ch * cs < j1 ? j0 + ch * cs : j1, jb = ja + cs < j1 ? ja + cs : j1;
    if (prow && jb > ja) {
      if (w != 0.0f) c->k->scale_max(prow + ja, jb - ja, w);
      else memset(prow + ja, 0, (size_t)(jb - ja) * sizeof *prow);
    }
  }
}

/* ---- blocked path -------------------------------------------------------------------------- */

/* Item = (kv head, 32-key tile) of the packing pass: the tile's keys transposed into kpA and its value rows
 * into every dim tile of vpA; keys past J0 + nkA (and dims past hd) zero, so zero probabilities never meet
 * uninitialized memory. */
static void pack_kv_item(void *arg, int64_t it, int ith) {
  (void)ith;
  attn_ctx *c = arg;
  int64_t ntile = c->nkA_pad / TR, kvh = it / ntile, t = it % ntile, ndt = (c->hd + TR - 1) / TR;
  float *kp = c->kpA + (kvh * ntile + t) * c->hd * TR;
  float *vp = c->vpA + kvh * ndt * c->nkA_pad * TR;
  int64_t nk = c->nkA - t * TR < TR ? c->nkA - t * TR : TR;
  if (nk < TR) memset(kp, 0, (size_t)(c->hd * TR) * sizeof(float));
  if (nk < TR || c->hd % TR) /* else every value row of the tile is copied whole below */
    for (int64_t dt = 0; dt < ndt; dt++)
      memset(vp + (dt * c->nkA_pad + t * TR) * TR, 0, (size_t)(TR * TR) * sizeof(float));
  for (int64_t j = 0; j < nk; j++) {
    int64_t key = c->J0 + t * TR + j;
    const float *kv = c->kc + (key * c->nkvh + kvh) * c->hd, *vv = c->vc + (key * c->nkvh + kvh) * c->hd;
    for (int64_t d = 0; d < c->hd; d++) kp[d * TR + j] = kv[d];
    for (int64_t dt = 0; dt < ndt; dt++) {
      int64_t n = c->hd - dt * TR < TR ? c->hd - dt * TR : TR;
      memcpy(vp + (dt * c->nkA_pad + t * TR + j) * TR, vv + dt * TR, (size_t)n * sizeof(float));
    }
  }
}

/* Turns raw q.k scores s[0..ns) (keys j0 + x) of query i into probabilities in place: scale,
 * softcap, mask, visibility; entries outside the visible range become exactly 0. Writes the
 * pattern row when requested. */
static void softmax_scores(const attn_ctx *c, int64_t h, int64_t i, int64_t j0, float *s, int64_t ns) {
  int64_t lo, hi;
  attn_range(c, i, &lo, &hi);
  lo = lo > j0 ? lo - j0 : 0;
  hi = hi - j0 < ns ? hi - j0 : ns;
  const float *mrow = c->mask ? c->mask + (h * c->nq + i) * c->nkv + j0 : NULL;
  float mx = c->k->scale_max(s + lo, hi - lo, c->p.scale);
  if (c->p.softcap > 0.0f || mrow) {
    mx = -INFINITY;
    for (int64_t x = lo; x < hi; x++) {
      float v = s[x];
      if (c->p.softcap > 0.0f) v = c->p.softcap * tanhf(v / c->p.softcap);
      if (mrow) v += mrow[x];
      s[x] = v;
      mx = v > mx ? v : mx;
    }
  }
  double sum = mx != -INFINITY ? c->k->exp_sum(s + lo, hi - lo, mx) : 0.0;
  memset(s, 0, (size_t)lo * sizeof *s);
  memset(s + hi, 0, (size_t)(ns - hi) * sizeof *s);
  if (sum > 0.0) c->k->scale_max(s + lo, hi - lo, (float)(1.0 / sum));
  else memset(s + lo, 0, (size_t)(hi - lo) * sizeof *s); /* fully masked: all zero (and no -inf * 0) */
  if (c->pattern) {
    float *prow = c->pattern + (h * c->nq + i) * c->nkv;
    memset(prow, 0, (size_t)c->nkv * sizeof *prow);
    memcpy(prow + j0, s, (size_t)ns * sizeof *prow);
  }
}

typedef struct attn_blk {
  int64_t kvh, i0, i1;  /* kv head and query rows of the item */
  int64_t j0, nk_pad;   /* keys seen: from j0 (a tile boundary), at most nk_pad */
  const float *kp, *vp; /* the packed keys and values from key j0 (vp's dim tiles are c->nkA_pad rows apart) */
  float *s;             /* scores [gemm_nt][nk_pad] */
  float *qp, *pp;       /* queries [hd][gemm_nt] and probabilities [nk_pad][gemm_nt], packed */
} attn_blk;

/* Queries [t0, t0+nt) of head h: scores over the tiles they can see, softmax, then p.v. */
static void attn_block_rows(const attn_ctx *c, const attn_blk *b, int64_t h, int64_t t0, int nt) {
  const cpu_kernels *k = c->k;
  int64_t ldq = c->nh * c->hd, last_hi, lo_unused;
  attn_range(c, t0 + nt - 1, &lo_unused, &last_hi);
  int64_t ns = last_hi - b->j0, ntile = (ns + TR - 1) / TR; /* keys the last (widest) row sees */
  k->pack_x(c->q + (t0 * c->nh + h) * c->hd, ldq, c->hd, nt, k->gemm_nt, b->qp);
  for (int64_t t = 0; t < ntile; t++) {
    int nr = ns - t * TR < TR ? (int)(ns - t * TR) : TR;
    k->gemm_tile(b->kp + t * c->hd * TR, c->hd, b->qp, nt, b->s + t * TR, b->nk_pad, nr);
  }
  for (int r = 0; r < nt; r++) softmax_scores(c, h, t0 + r, b->j0, b->s + r * b->nk_pad, ns);
  k->pack_x(b->s, b->nk_pad, ns, nt, k->gemm_nt, b->pp);
  int64_t ndt = (c->hd + TR - 1) / TR;
  float *o = c->out + (t0 * c->nh + h) * c->hd;
  for (int64_t dt = 0; dt < ndt; dt++) {
    int nr = c->hd - dt * TR < TR ? (int)(c->hd - dt * TR) : TR;
    k->gemm_tile(b->vp + dt * c->nkA_pad * TR, ns, b->pp, nt, o + dt * TR, ldq, nr);
  }
}

/* Item = (block of ATTN_QB queries, item_heads query heads of one kv head): pack once, then those heads. */
static void attn_block_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  int64_t per_q = c->nh / c->item_heads, hg = it % per_q, group = c->nh / c->nkvh;
  attn_blk b = {.kvh = hg * c->item_heads / group, .i0 = (it / per_q) * ATTN_QB};
  b.i1 = b.i0 + ATTN_QB < c->nq ? b.i0 + ATTN_QB : c->nq;
  int64_t lo, hi, lo_unused;
  attn_range(c, b.i0, &lo, &hi);
  attn_range(c, b.i1 - 1, &lo_unused, &hi);
  b.j0 = lo / TR * TR;
  b.nk_pad = (hi - b.j0 + TR - 1) / TR * TR;
  int64_t ntile = c->nkA_pad / TR, ndt = (c->hd + TR - 1) / TR;
  b.kp = c->kpA + (b.kvh * ntile + (b.j0 - c->J0) / TR) * c->hd * TR;
  b.vp = c->vpA + b.kvh * ndt * c->nkA_pad * TR + (b.j0 - c->J0) * TR;
  b.s = c->scratch[ith].p;
  b.pp = b.s + b.nk_pad * c->k->gemm_nt;
  b.qp = b.pp + b.nk_pad * c->k->gemm_nt;
  int64_t gnt = c->k->gemm_nt;
  for (int64_t h = hg * c->item_heads; h < (hg + 1) * c->item_heads; h++)
    for (int64_t t0 = b.i0; t0 < b.i1; t0 += gnt)
      attn_block_rows(c, &b, h, t0, b.i1 - t0 < gnt ? (int)(b.i1 - t0) : (int)gnt);
}

/* ---- few queries in exact precision, in place ----------------------------------------------- */

/* The blocked path's arithmetic for fewer than ATTN_BLOCKED_MIN_Q queries (one block of queries) without
 * packing the cache, which every decode step did again for the whole cache: q.k^T on the key rows where they
 * lie (gemm_rowtile transposes blocks in registers) and p.v on the value rows (gemm_tile_ld), with up
 * to CPU_ROWTILE_TOKS heads of a GQA group as the kernels' tokens. Each (key, head) score and (dim, head)
 * output is the kernels' per (row, token) fma sequence, the same as the blocked path's per (row, query), so
 * results are bit-identical (test_cpu_exact_batch). Three passes: scores by (query, kv head, run of key
 * tiles), softmax by (query, head), p.v by (query, kv head, 32-dim tile). */

/* Heads [h, h + n) of query i: q packed as the kernels' tokens into qp. */
static void inplace_pack_q(const attn_ctx *c, int64_t i, int64_t h, int n, float *qp) {
  c->k->pack_x(c->q + (i * c->nh + h) * c->hd, c->hd, c->hd, n, c->k->gemm_nt, qp);
}

static void inplace_score_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  const cpu_kernels *k = c->k;
  int64_t ch = it % c->ntchunk, kvh = it / c->ntchunk % c->nkvh, i = it / c->ntchunk / c->nkvh;
  int64_t group = c->nh / c->nkvh, ntile = c->nkA_pad / TR, ks = c->nkvh * c->hd;
  int64_t per = (ntile + c->ntchunk - 1) / c->ntchunk, t0 = ch * per, t1 = t0 + per < ntile ? t0 + per : ntile;
  float *qp = c->scratch[ith].p, *tail = qp + c->hd * k->gemm_nt;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h += CPU_ROWTILE_TOKS) {
    int n = (int)((kvh + 1) * group - h < CPU_ROWTILE_TOKS ? (kvh + 1) * group - h : CPU_ROWTILE_TOKS);
    inplace_pack_q(c, i, h, n, qp);
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
  softmax_scores(c, h, i, c->J0, c->sc + (i * c->nh + h) * c->nkA_pad, c->nkA);
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

/* Runs n items on the pool, or on the caller when the whole op is too little work to wake it. */
static void attn_run(cpu_backend *cb, const attn_ctx *c, int64_t n, cpu_item_fn fn, attn_ctx *arg) {
  if (c->nq * c->nkv * c->nh * c->hd < 65536)
    for (int64_t it = 0; it < n; it++) fn(arg, it, 0);
  else
    cpu_pool_for(cb->pool, n, fn, arg);
}

static int attn_inplace(cpu_backend *cb, attn_ctx *c, icl_error *err) {
  int64_t lo, hi, lo_unused, gnt = c->k->gemm_nt;
  attn_range(c, 0, &lo, &hi);
  attn_range(c, c->nq - 1, &lo_unused, &hi);
  c->J0 = lo / TR * TR;
  c->nkA = hi - c->J0;
  c->nkA_pad = (c->nkA + TR - 1) / TR * TR;
  size_t per_thread = (size_t)(c->hd * gnt + TR * c->hd) * sizeof(float), pv = (size_t)(c->nkA_pad * gnt) * sizeof(float);
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
  attn_run(cb, c, base * c->ntchunk, inplace_score_item, c);
  attn_run(cb, c, c->nq * c->nh, inplace_softmax_item, c);
  attn_run(cb, c, base * ((c->hd + TR - 1) / TR), inplace_pv_item, c);
  return ICL_OK;
}

/* Scratch of the blocked path per thread: gemm_nt score rows over up to n_kv keys, the same packed, and gemm_nt
 * packed query rows. */
static size_t attn_block_scratch(const attn_ctx *c) {
  int64_t nk_pad = (c->nkv + 2 * TR) / TR * TR, gnt = c->k->gemm_nt;
  return (size_t)(nk_pad * 2 * gnt + c->hd * gnt) * sizeof(float);
}

int cpu_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                  const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  attn_ctx c = {.k = &cb->k, .scratch = cb->scratch, .q = cpu_f32(q), .kc = cpu_f32(k), .vc = cpu_f32(v),
                .mask = mask ? cpu_f32(mask) : NULL, .out = cpu_f32(out), .pattern = pattern ? cpu_f32(pattern) : NULL,
                .hd = q->ne[0], .nh = q->ne[1], .nkvh = k->ne[1], .nq = q->ne[2] * q->ne[3],
                .nkv = k->ne[2] * k->ne[3], .p = *p};
  /* exact precision: every query on the blocked path's arithmetic, whose result for a query does not depend on
   * the others; for few queries in place where the level has the kernels */
  int exact = be->precision == ICL_PRECISION_EXACT;
  if (exact && c.nq < ATTN_BLOCKED_MIN_Q && cb->k.gemm_rowtile && cb->k.gemm_tile_ld) return attn_inplace(cb, &c, err);
  int blocked = c.nq >= ATTN_BLOCKED_MIN_Q || exact;
  size_t need = blocked ? attn_block_scratch(&c) : (size_t)(c.nkv * (c.nh / c.nkvh)) * sizeof(float);
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], need))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes of scratch", need);
  if (blocked) {
    int64_t lo, hi, lo_unused;
    attn_range(&c, 0, &lo, &hi);
    attn_range(&c, c.nq - 1, &lo_unused, &hi);
    c.J0 = lo / TR * TR;
    c.nkA = hi - c.J0;
    c.nkA_pad = (c.nkA + TR - 1) / TR * TR;
    size_t kv_bytes = (size_t)(c.nkvh * c.nkA_pad * (c.hd + (c.hd + TR - 1) / TR * TR)) * sizeof(float);
    if (!(c.kpA = cpu_scratch_get(&cb->shared, kv_bytes)))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes for the packed keys", kv_bytes);
    c.vpA = c.kpA + c.nkvh * c.nkA_pad * c.hd;
    cpu_pool_for(cb->pool, c.nkvh * (c.nkA_pad / TR), pack_kv_item, &c);
    /* few kv heads (Gemma 3: one) and few query blocks: one head per item so every thread has work; the
     * per-query arithmetic is the same either way */
    int64_t nqb = (c.nq + ATTN_QB - 1) / ATTN_QB;
    c.item_heads = nqb * c.nkvh >= 4 * cb->n_threads ? c.nh / c.nkvh : 1;
    cpu_pool_for(cb->pool, nqb * (c.nh / c.item_heads), attn_block_item, &c);
    return ICL_OK;
  }
  /* chunks: about 8 items per thread, no chunk under 32 keys, and the items a multiple of the threads so
   * none waits on a last odd item */
  int64_t T = cb->n_threads, base = c.nq * c.nkvh, nchunk = (8 * T + base - 1) / base;
  if (nchunk > (c.nkv + 31) / 32) nchunk = (c.nkv + 31) / 32;
  if (nchunk < 1) nchunk = 1;
  while (base * nchunk > T && base * nchunk % T) nchunk++;
  c.nchunk = nchunk;
  size_t part_bytes = (size_t)(c.nq * c.nh * nchunk * (c.hd + 2)) * sizeof(float);
  if (!(c.part = cpu_scratch_get(&cb->shared, part_bytes)))
    return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes for the partial rows", part_bytes);
  int64_t n_items = base * nchunk;
  /* a short cache is too little work to wake the pool for */
  if (c.nq * c.nkv * c.nh * c.hd < 65536)
    for (int64_t it = 0; it < n_items; it++) attn_chunk_item(&c, it, 0);
  else
    cpu_pool_for(cb->pool, n_items, attn_chunk_item, &c);
  for (int64_t i = 0; i < c.nq; i++)
    for (int64_t h = 0; h < c.nh; h++) attn_combine(&c, i, h);
  return ICL_OK;
}
