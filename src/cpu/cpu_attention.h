/* Causal attention on the CPU, shared by its paths (cpu_attention.c: the op and the blocked path;
 * cpu_attention_rows.c: few queries in fast precision; cpu_attention_inplace.c: few queries in exact
 * precision). */
#ifndef ICL_CPU_ATTENTION_H
#define ICL_CPU_ATTENTION_H

#include "cpu_internal.h"

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
  /* blocked path in fast precision with a bf16 dot (else NULL): kpB [kvh][tile][(hd+1)/2][32] pairs over dims,
   * vpB [kvh][dtile][nkA_pad/2][32] pairs over keys (cpu_attention_bf16.c) */
  uint32_t *kpB, *vpB;
  /* in-place path: scores sc [query][head][nkA_pad] from key J0, score items per (query, kv head) */
  float *sc;
  int64_t ntchunk;
} attn_ctx;

/* One item of the blocked path. */
typedef struct attn_blk {
  int64_t kvh, i0, i1;  /* kv head and query rows of the item */
  int64_t j0, nk_pad;   /* keys seen: from j0 (a tile boundary), at most nk_pad */
  const float *kp, *vp; /* the packed keys and values from key j0 (vp's dim tiles are c->nkA_pad rows apart) */
  float *s;             /* scores [gemm_nt][nk_pad] */
  float *qp, *pp;       /* queries [hd][gemm_nt] and probabilities [nk_pad][gemm_nt], packed */
} attn_blk;

/* Visible key range [*lo, *hi) of query i: causal limit and sliding window. */
static inline void attn_range(const attn_ctx *c, int64_t i, int64_t *lo, int64_t *hi) {
  int64_t qpos = c->p.n_past + i;
  *hi = qpos + 1 < c->nkv ? qpos + 1 : c->nkv;
  *lo = c->p.window > 0 && qpos - c->p.window + 1 > 0 ? qpos - c->p.window + 1 : 0;
}

/* Scores s[0..n) to logits in place: times the scale, softcap, plus the mask row mrow[0..n) if any; returns
 * their maximum (-inf for n = 0). */
float cpu_attn_logits(const attn_ctx *c, float *s, const float *mrow, int64_t n);
/* A row whose softmax sum is not positive: all zero when fully masked, all NaN when a score is NaN (non-finite
 * weights must not vanish into a row read as masked: the reference keeps the NaN too). */
void cpu_attn_unnormalizable(float *s, int64_t n);
/* Sets J0 (the first visible key's tile), nkA (keys from J0 the last query sees) and nkA_pad of all the queries. */
void cpu_attn_key_span(attn_ctx *c);
/* Turns raw q.k scores s[0..ns) (keys j0 + x) of query i, head h into probabilities in place (the blocked path's
 * softmax, which the in-place path repeats exactly). */
void cpu_attn_softmax_scores(const attn_ctx *c, int64_t h, int64_t i, int64_t j0, float *s, int64_t ns);
/* Runs n items of fn on the pool, or on the caller when the op's q.k work (queries x keys x heads x dims) is
 * below serial_max: too little to pay for a dispatch. */
void cpu_attn_run(cpu_backend *cb, attn_ctx *c, int64_t n, cpu_item_fn fn, int64_t serial_max);
/* The blocked path on bf16 pairs: item it (kv head, 32-key tile) of the packing pass; queries [t0, t0+nt) of head
 * h (cpu_attention_bf16.c). */
void cpu_attn_pack_kv_bf16(attn_ctx *c, int64_t it);
void cpu_attn_block_rows_bf16(const attn_ctx *c, const attn_blk *b, int64_t h, int64_t t0, int nt);
/* Few queries, fast precision: key chunks merged after. */
int cpu_attn_rows(cpu_backend *cb, attn_ctx *c, icl_error *err);
/* Few queries, exact precision, where the level has gemm_rowtile and gemm_tile_ld: the blocked path's
 * arithmetic on the cache in place. */
int cpu_attn_inplace(cpu_backend *cb, attn_ctx *c, icl_error *err);

#endif
