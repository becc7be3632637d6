/* Causal attention on the CPU, threaded over items claimed dynamically (later queries see more
 * keys, so static splits would be uneven). Three paths:
 * - few queries in fast precision (decode): cpu_attention_rows.c;
 * - few queries in exact precision (decode): cpu_attention_inplace.c, the arithmetic of the blocked path
 *   below on the cache in place;
 * - many queries (prefill; every query in exact precision where the level lacks the in-place kernels):
 *   the keys any query sees are packed once per op, transposed into 32-key tiles, and the values into
 *   32-dim tiles (packing them per block of queries instead repeated the work for every block: ~8% of a
 *   1400-token forward); then per (kv head or single query head when there are too few kv heads to keep
 *   the threads busy, block of queries) both q.k^T and p.v run on the matmul's register-blocked kernel
 *   (gemm_tile) for all query heads of the group; in fast precision on bf16 pairs where the level has a bf16 dot
 *   (cpu_attention_bf16.c).
 * Keys outside the causal/window range are skipped where whole tiles allow, masked otherwise. */
#include <math.h>
#include <string.h>

#include "cpu_attention.h"

void cpu_attn_key_span(attn_ctx *c) {
  int64_t lo, hi, lo_unused;
  attn_range(c, 0, &lo, &hi);
  attn_range(c, c->nq - 1, &lo_unused, &hi);
  c->J0 = lo / TR * TR;
  c->nkA = hi - c->J0;
  c->nkA_pad = (c->nkA + TR - 1) / TR * TR;
}

void cpu_attn_unnormalizable(float *s, int64_t n) {
  float fill = 0.0f;
  for (int64_t x = 0; x < n && fill == 0.0f; x++)
    if (s[x] != s[x]) fill = NAN;
  for (int64_t x = 0; x < n; x++) s[x] = fill;
}

float cpu_attn_logits(const attn_ctx *c, float *s, const float *mrow, int64_t n) {
  float mx = c->k->scale_max(s, n, c->p.scale);
  if (c->p.softcap > 0.0f || mrow) {
    mx = -INFINITY;
    for (int64_t x = 0; x < n; x++) {
      float v = s[x];
      if (c->p.softcap > 0.0f) v = c->p.softcap * tanhf(v / c->p.softcap);
      if (mrow) v += mrow[x];
      s[x] = v;
      mx = v > mx ? v : mx;
    }
  }
  return mx;
}

void cpu_attn_run(cpu_backend *cb, attn_ctx *c, int64_t n, cpu_item_fn fn, int64_t serial_max) {
  if (c->nq * c->nkv * c->nh * c->hd < serial_max)
    for (int64_t it = 0; it < n; it++) fn(c, it, 0);
  else
    cpu_pool_for(cb->pool, n, fn, c);
}

/* ---- blocked path -------------------------------------------------------------------------- */

/* Item = (kv head, 32-key tile) of the packing pass: the tile's keys transposed into kpA and its value rows
 * into every dim tile of vpA; keys past J0 + nkA (and dims past hd) zero, so zero probabilities never meet
 * uninitialized memory. */
static void pack_kv_item(void *arg, int64_t it, int ith) {
  (void)ith;
  attn_ctx *c = arg;
  if (c->kpB) {
    cpu_attn_pack_kv_bf16(c, it);
    return;
  }
  int64_t ntile = c->nkA_pad / TR, kvh = it / ntile, t = it % ntile, ndt = (c->hd + TR - 1) / TR;
  float *kp = c->kpA + (kvh * ntile + t) * c->hd * TR;
  float *vp = c->vpA + kvh * ndt * c->nkA_pad * TR;
  int64_t nk = c->nkA - t * TR < TR ? c->nkA - t * TR : TR;
  if (nk < TR) memset(kp, 0, (size_t)(c->hd * TR) * sizeof(float));
  if (nk < TR || c->hd % TR) /* else every value row of the tile is copied whole below */
    for (int64_t dt = 0; dt < ndt; dt++)
      memset(vp + (dt * c->nkA_pad + t * TR) * TR, 0, (size_t)(TR * TR) * sizeof(float));
  const float *k0 = c->kc + ((c->J0 + t * TR) * c->nkvh + kvh) * c->hd;
  if (nk == TR) c->k->pack_tile(k0, c->nkvh * c->hd, c->hd, kp); /* a whole tile: transposed in registers */
  for (int64_t j = 0; j < nk; j++) {
    int64_t key = c->J0 + t * TR + j;
    const float *kv = c->kc + (key * c->nkvh + kvh) * c->hd, *vv = c->vc + (key * c->nkvh + kvh) * c->hd;
    if (nk < TR)
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
void cpu_attn_softmax_scores(const attn_ctx *c, int64_t h, int64_t i, int64_t j0, float *s, int64_t ns) {
  int64_t lo, hi;
  attn_range(c, i, &lo, &hi);
  lo = lo > j0 ? lo - j0 : 0;
  hi = hi - j0 < ns ? hi - j0 : ns;
  const float *mrow = c->mask ? c->mask + (h * c->nq + i) * c->nkv + j0 + lo : NULL;
  float mx = cpu_attn_logits(c, s + lo, mrow, hi - lo);
  double sum = mx != -INFINITY ? c->k->exp_sum(s + lo, hi - lo, mx) : 0.0;
  memset(s, 0, (size_t)lo * sizeof *s);
  memset(s + hi, 0, (size_t)(ns - hi) * sizeof *s);
  if (sum > 0.0) c->k->scale_max(s + lo, hi - lo, (float)(1.0 / sum));
  else cpu_attn_unnormalizable(s + lo, hi - lo);
  if (c->pattern) {
    float *prow = c->pattern + (h * c->nq + i) * c->nkv;
    memset(prow, 0, (size_t)c->nkv * sizeof *prow);
    memcpy(prow + j0, s, (size_t)ns * sizeof *prow);
  }
}

/* Queries [t0, t0+nt) of head h: scores over the tiles they can see, softmax, then p.v. */
static void attn_block_rows(const attn_ctx *c, const attn_blk *b, int64_t h, int64_t t0, int nt) {
  if (c->kpB) {
    cpu_attn_block_rows_bf16(c, b, h, t0, nt);
    return;
  }
  const cpu_kernels *k = c->k;
  int64_t ldq = c->nh * c->hd, last_hi, lo_unused;
  attn_range(c, t0 + nt - 1, &lo_unused, &last_hi);
  int64_t ns = last_hi - b->j0, ntile = (ns + TR - 1) / TR; /* keys the last (widest) row sees */
  k->pack_x(c->q + (t0 * c->nh + h) * c->hd, ldq, c->hd, nt, k->gemm_nt, b->qp);
  for (int64_t t = 0; t < ntile; t++) {
    int nr = ns - t * TR < TR ? (int)(ns - t * TR) : TR;
    k->gemm_tile(b->kp + t * c->hd * TR, c->hd, b->qp, nt, b->s + t * TR, b->nk_pad, nr);
  }
  for (int r = 0; r < nt; r++) cpu_attn_softmax_scores(c, h, t0 + r, b->j0, b->s + r * b->nk_pad, ns);
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
  if (exact && c.nq < ATTN_BLOCKED_MIN_Q && cb->k.gemm_rowtile && cb->k.gemm_tile_ld)
    return cpu_attn_inplace(cb, &c, err);
  if (c.nq >= ATTN_BLOCKED_MIN_Q || exact) {
    size_t need = attn_block_scratch(&c);
    for (int i = 0; i < cb->n_threads; i++)
      if (!cpu_scratch_get(&cb->scratch[i], need))
        return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes of scratch", need);
    cpu_attn_key_span(&c);
    size_t kv_bytes = (size_t)(c.nkvh * c.nkA_pad * (c.hd + (c.hd + TR - 1) / TR * TR)) * sizeof(float);
    if (!(c.kpA = cpu_scratch_get(&cb->shared, kv_bytes)))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes for the packed keys", kv_bytes);
    c.vpA = c.kpA + c.nkvh * c.nkA_pad * c.hd;
    if (!exact && cb->k.gemm_tile_bf16) { /* FAST: bf16 pairs in the same memory (half of it) */
      c.kpB = (uint32_t *)c.kpA;
      c.vpB = c.kpB + c.nkvh * c.nkA_pad * ((c.hd + 1) / 2);
    }
    cpu_pool_for(cb->pool, c.nkvh * (c.nkA_pad / TR), pack_kv_item, &c);
    /* few kv heads (Gemma 3: one) and few query blocks: one head per item so every thread has work; the
     * per-query arithmetic is the same either way */
    int64_t nqb = (c.nq + ATTN_QB - 1) / ATTN_QB;
    c.item_heads = nqb * c.nkvh >= 4 * cb->n_threads ? c.nh / c.nkvh : 1;
    cpu_pool_for(cb->pool, nqb * (c.nh / c.item_heads), attn_block_item, &c);
    return ICL_OK;
  }
  return cpu_attn_rows(cb, &c, err);
}

/* ---- B independent sequences (the trainer's batches) ---------------------------------------------------- */

typedef struct seqs_ctx {
  cpu_backend *cb;
  attn_ctx base; /* one sequence's context, pointers at sequence 0 */
  int64_t per_q, per_p; /* floats per sequence of q/k/v/out and of the pattern */
  float *kv;            /* n_threads packed key/value areas of kv_floats */
  int64_t kv_floats;
} seqs_ctx;

/* Whether sequences of c's shape run seqs_small: as many queries as keys and few, the first query's range from
 * key 0 (the blocked path's j0), no mask, one kv head per query head, whole vectors. */
static int seqs_small_ok(const attn_ctx *c) {
  int64_t lo, hi;
  attn_range(c, 0, &lo, &hi);
  return c->k->attb_dp16 && c->k->pv_gemm_row && !c->mask && c->nq == c->nkv && cpu_few_keys(c->nkv, c->hd) &&
         lo == 0 && c->nkvh == c->nh;
}

/* One sequence of few keys (the meta-learning model's 9) on the level's kernels, the blocked path's arithmetic
 * without its 32-key tiles and packing: every query's scores at once (attb_dp16: the chains of its q.k^T tile), then
 * per group of gemm_nt queries the same key count ns, softmax and p.v chain over those ns keys (pv_gemm_row). */
static void seqs_small(const attn_ctx *c) {
  int64_t T = c->nkv, ld = c->nh * c->hd, gnt = c->k->gemm_nt, lo, hi;
  float S[16 * 16];
  for (int64_t h = 0; h < c->nh; h++) {
    c->k->attb_dp16(c->kc + h * c->hd, c->q + h * c->hd, ld, c->hd, T, S);
    for (int64_t t0 = 0; t0 < c->nq; t0 += gnt) {
      int64_t nt = c->nq - t0 < gnt ? c->nq - t0 : gnt;
      attn_range(c, t0 + nt - 1, &lo, &hi); /* the group's widest row: its key count, as attn_block_rows */
      for (int64_t i = t0; i < t0 + nt; i++) {
        cpu_attn_softmax_scores(c, h, i, 0, S + i * T, hi);
        c->k->pv_gemm_row(c->vc + h * c->hd, ld, c->hd, S + i * T, hi, c->out + i * ld + h * c->hd);
      }
    }
  }
}

/* Sequence b's context: s->base with its rows. */
static attn_ctx seq_ctx(const seqs_ctx *s, int64_t b) {
  attn_ctx c = s->base;
  c.q += b * s->per_q, c.kc += b * s->per_q, c.vc += b * s->per_q, c.out += b * s->per_q;
  c.pattern += b * s->per_p;
  return c;
}

static void seqs_small_item(void *arg, int64_t b, int ith) {
  (void)ith;
  attn_ctx c = seq_ctx(arg, b);
  seqs_small(&c);
}

/* Sequence b on this thread: the blocked path's two passes run serially, with this thread's scratch and packed
 * keys, so each sequence gets the arithmetic (and bits) a lone call gives it. */
static void seqs_item(void *arg, int64_t b, int ith) {
  const seqs_ctx *s = arg;
  attn_ctx c = seq_ctx(s, b);
  c.scratch = &s->cb->scratch[ith];
  c.kpA = s->kv + ith * s->kv_floats;
  c.vpA = c.kpA + c.nkvh * c.nkA_pad * c.hd;
  for (int64_t it = 0; it < c.nkvh * (c.nkA_pad / TR); it++) pack_kv_item(&c, it, 0);
  int64_t nqb = (c.nq + ATTN_QB - 1) / ATTN_QB;
  for (int64_t it = 0; it < nqb * (c.nh / c.item_heads); it++) attn_block_item(&c, it, 0);
}

int cpu_attention_seqs(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                       const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  int64_t hd = q->ne[0], nh = q->ne[1], T = q->ne[2], B = q->ne[3];
  if (be->precision != ICL_PRECISION_EXACT || T < ATTN_BLOCKED_MIN_Q) { /* other paths: a call per sequence */
    for (int64_t b = 0; b < B; b++) {
      icl_dt vs[5] = {*q, *k, *v, *out, *pattern};
      for (int i = 0; i < 5; i++) {
        int64_t per = i < 4 ? hd * nh * T : T * T * nh;
        vs[i].offset += (size_t)(b * per) * sizeof(float), vs[i].ne[3] = 1;
      }
      int rc = cpu_attention(be, &vs[0], &vs[1], &vs[2], p, NULL, &vs[3], &vs[4], err);
      if (rc) return rc;
    }
    return ICL_OK;
  }
  seqs_ctx s = {.cb = cb, .per_q = hd * nh * T, .per_p = T * T * nh};
  s.base = (attn_ctx){.k = &cb->k, .q = cpu_f32(q), .kc = cpu_f32(k), .vc = cpu_f32(v), .out = cpu_f32(out),
                      .pattern = cpu_f32(pattern), .hd = hd, .nh = nh, .nkvh = k->ne[1], .nq = T, .nkv = T, .p = *p};
  if (seqs_small_ok(&s.base)) { /* no packed keys or block scratch */
    cpu_pool_for(cb->pool, B, seqs_small_item, &s);
    return ICL_OK;
  }
  cpu_attn_key_span(&s.base);
  int64_t nqb = (T + ATTN_QB - 1) / ATTN_QB;
  s.base.item_heads = nqb * s.base.nkvh >= 4 * cb->n_threads ? nh / s.base.nkvh : 1; /* as cpu_attention */
  s.kv_floats = (s.base.nkvh * s.base.nkA_pad * (hd + (hd + TR - 1) / TR * TR) + 15) / 16 * 16; /* aligned */
  size_t need = attn_block_scratch(&s.base);
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], need))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes of scratch", need);
  if (!(s.kv = cpu_scratch_get(&cb->shared, (size_t)(cb->n_threads * s.kv_floats) * sizeof(float))))
    return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate the packed keys of %d threads",
                         cb->n_threads);
  cpu_pool_for(cb->pool, B, seqs_item, &s);
  return ICL_OK;
}
