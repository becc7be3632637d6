/* Causal attention, few queries in fast precision (decode): one query row at a time for all query heads
 * of a GQA group, so the cache is read once per group; float dots against the visible keys only; items
 * (query, kv head, chunk of keys), each chunk with its own softmax max and sum, merged after
 * (flash-decoding: splitting by heads instead left a thread idle with one kv head, as Gemma 3, and read
 * the cache once per head). */
#include <math.h>
#include <string.h>

#include "cpu_attention.h"

/* Keys [*ja, *jb) of chunk ch of a query's visible range [j0, j1). */
static void chunk_keys(const attn_ctx *c, int64_t j0, int64_t j1, int64_t ch, int64_t *ja, int64_t *jb) {
  int64_t cs = (j1 - j0 + c->nchunk - 1) / c->nchunk;
  *ja = j0 + ch * cs < j1 ? j0 + ch * cs : j1;
  *jb = *ja + cs < j1 ? *ja + cs : j1;
}

/* Item (query, kv head, key chunk), over the whole GQA group, so the cache is read once per group and
 * every thread streams its own part of it however few kv heads there are (Gemma 3: one). It leaves per
 * head the chunk's running max m, sum l of exp(score - m) and unnormalized output in c->part (and the exp
 * values in the pattern row); attn_combine merges the chunks. (Items of every kv head's group over one
 * chunk, so a thread reads whole cache rows, measured the same: SmolLM2 decode 512, six pairs.) */
static void attn_chunk_item(void *arg, int64_t it, int ith) {
  attn_ctx *c = arg;
  const cpu_kernels *k = c->k;
  int64_t ch = it % c->nchunk, kvh = it / c->nchunk % c->nkvh, i = it / c->nchunk / c->nkvh;
  int64_t group = c->nh / c->nkvh, h0 = kvh * group, j0, j1;
  attn_range(c, i, &j0, &j1);
  int64_t ja, jb;
  chunk_keys(c, j0, j1, ch, &ja, &jb);
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
    const float *mrow = c->mask ? c->mask + (h * c->nq + i) * c->nkv + ja : NULL;
    float mx = cpu_attn_logits(c, sg + ja, mrow, jb - ja);
    double sum = mx != -INFINITY ? k->exp_sum(sg + ja, jb - ja, mx) : 0.0;
    if (!(sum > 0.0)) cpu_attn_unnormalizable(sg + ja, jb - ja); /* masked chunk (no -inf * 0), or NaN */
    pg[0] = mx;
    pg[1] = jb > ja && sg[ja] != sg[ja] ? NAN : (float)sum; /* a NaN chunk makes the whole row NaN (combine) */
    memset(pg + 2, 0, (size_t)c->hd * sizeof *pg);
    if (c->pattern) memcpy(c->pattern + (h * c->nq + i) * c->nkv + ja, sg + ja, (size_t)(jb - ja) * sizeof *sg);
  }
  if (k->pv_rows) {
    /* pv_rows writes head g's row at o + g * hd: one head at a time, as the parts are not contiguous */
    for (int64_t g = 0; g < group; g++)
      k->pv_rows(s + g * c->nkv, c->nkv, 1, c->hd, c->vc + kvh * c->hd, c->nkvh * c->hd, ja, jb,
                 part + g * pstride + 2);
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
    if (p[1] != p[1]) mx = NAN; /* NaN scores: NaN output and pattern, as the reference gives */
    if (p[1] > 0.0f && p[0] > mx) mx = p[0];
  }
  if (mx != mx) {
    int64_t j0, j1;
    attn_range(c, i, &j0, &j1);
    for (int64_t d = 0; d < c->hd; d++) o[d] = NAN;
    for (int64_t j = 0; prow && j < c->nkv; j++) prow[j] = j >= j0 && j < j1 ? NAN : 0.0f;
    return;
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
  for (int64_t ch = 0; ch < c->nchunk; ch++) {
    const float *p = part + ch * (c->hd + 2);
    /* fully masked (total 0): zeros, as in the reference */
    float w = p[1] > 0.0f && total > 0.0 ? (float)(exp((double)p[0] - mx) / total) : 0.0f;
    if (w != 0.0f) c->k->axpy(o, w, p + 2, c->hd);
    int64_t ja, jb;
    chunk_keys(c, j0, j1, ch, &ja, &jb);
    if (prow && jb > ja) {
      if (w != 0.0f) c->k->scale_max(prow + ja, jb - ja, w);
      else memset(prow + ja, 0, (size_t)(jb - ja) * sizeof *prow);
    }
  }
}

int cpu_attn_rows(cpu_backend *cb, attn_ctx *c, icl_error *err) {
  size_t need = (size_t)(c->nkv * (c->nh / c->nkvh)) * sizeof(float);
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], need))
      return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes of scratch", need);
  /* chunks: about 8 items per thread, of 32 keys or more where the cache allows, and the items a multiple of
   * the threads so none waits on a last odd item */
  int64_t T = cb->n_threads, base = c->nq * c->nkvh, nchunk = (8 * T + base - 1) / base;
  if (nchunk > (c->nkv + 31) / 32) nchunk = (c->nkv + 31) / 32;
  if (nchunk < 1) nchunk = 1;
  while (base * nchunk > T && base * nchunk % T) nchunk++;
  c->nchunk = nchunk;
  size_t part_bytes = (size_t)(c->nq * c->nh * nchunk * (c->hd + 2)) * sizeof(float);
  if (!(c->part = cpu_scratch_get(&cb->shared, part_bytes)))
    return icl_error_set(err, ICL_ENOMEM, "cpu: attention: cannot allocate %zu bytes for the partial rows", part_bytes);
  /* one dispatch: worth it from 8 Ki of q.k work (SmolLM2 from 15 keys; at 64 Ki, its decode under 114 keys ran
   * attention on one thread while the other waited, 16% of a FAST decode step outside the pool) */
  cpu_attn_run(cb, c, base * nchunk, attn_chunk_item, 8192);
  for (int64_t i = 0; i < c->nq; i++)
    for (int64_t h = 0; h < c->nh; h++) attn_combine(c, i, h);
  return ICL_OK;
}
