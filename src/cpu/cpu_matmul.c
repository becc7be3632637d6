/* Matrix multiplication y[rows, n] = x[cols, n] . w[cols, rows]^T and the embedding lookup.
 *
 * Strategies, picked by the precision and the number of tokens n:
 * - EXACT (any n): 32 weight rows at a time are dequantized into a packed f32 tile [cols][32] and
 *   a register-blocked kernel computes 32 rows x up to 8 tokens per pass, so each dequantized
 *   weight is reused for every token, and a row's result does not depend on n. Quantized weights
 *   are repacked once (cpu_xweights.c) so a tile decodes without a transpose, and up to
 *   CPU_ROWTILE_TOKS tokens multiply straight from the repacked codes.
 * - FAST, one token (decode): the activations are quantized to int8 blocks (cpu_q8) and each
 *   weight row is dotted with them using integer SIMD; other types dequantize one row at a time
 *   and use a float dot. Memory traffic is the weights read once.
 * - FAST, many tokens (prefill): the same int8 activations against weight tiles repacked once
 *   into int8 codes (cpu_qgemm_x86.h), 16 rows x up to 6 tokens per kernel call; levels or types
 *   without that kernel take the f32 tiles.
 * matmul_group (q, k, v; gate, up) runs one token's matmuls of one input as one dispatch over their joint rows
 * (four-tile groups in EXACT), the activations prepared once; each row takes the path a lone matmul gives it. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

/* Tile path blocking, see mm_tiles. */
#define MM_PANEL_BYTES ((size_t)4 << 20)
#define MM_TOK_BLOCK 64
/* Tokens per qdot call (the integer kernels reuse an unpacked weight block for up to 4). */
#define MM_QDOT_TOKENS 4
/* Integer path: weight rows fetched ahead. Decode's small matmuls (SmolLM2: 360-byte rows, items of 36) left
 * the hardware prefetcher little run-up per item; the qdot loop stalled on the weight loads (~12 GB/s). */
#define MM_PREFETCH_ROWS 4
/* Row-wise paths (few tokens): rows per claim of cpu_pool_split. Each thread streams one contiguous region of
 * weight rows that the prefetchers follow; items of up to 64 rows claimed in turn made each thread's stream
 * jump every ~20 KB and restart the prefetchers (decode layers at 10-14 GB/s of a 27-29 GB/s read ceiling).
 * A thread done early takes chunks from the back of another's region. */
#define MM_SPLIT_ROWS 64

/* Activations a tile path prepared in the shared scratch (quantized, or packed f32), which the next matmul of the
 * same x can take as they are: a multi-token group's members (q, k, v; gate, up) prepare them once. */
enum { MM_PREP_NONE, MM_PREP_Q8, MM_PREP_F32 };
typedef struct mm_prep {
  int kind;
  const void *p;
} mm_prep;

typedef struct mm_ctx {
  cpu_backend *cb;
  uint32_t type;
  const uint8_t *w; /* [rows] rows of wrb bytes */
  size_t wrb;
  int64_t K, rows, n;
  const float *x; /* [n][K] */
  const float *xp; /* tile path: x packed per group of gemm_nt tokens, [n/gnt][K][gnt] */
  float *y;       /* [n][rows] */
  cpu_q8 *xq;     /* [n][K/32], the int8 paths only */
  void *panel;                  /* tile path: n_ptiles packed tiles of tbytes */
  int q;                        /* tile path: int8 tiles (FAST) */
  int trows;                    /* rows per tile */
  size_t tbytes;                /* bytes per packed tile */
  int64_t tile0, n_ptiles, tblock;
  int64_t n_xitems;             /* tile path: items of MM_X_GROUPS token groups of x packed beside the first panel */
  float *xpw;                   /* where those items pack x (c->xp once packed) */
  const uint8_t *xw;            /* EXACT: the weight repacked (cpu_xweights.c), or NULL */
  size_t xw_tile;               /* bytes per repacked tile */
  int xw_multi;                 /* one token: items of CPU_XW_TILES repacked tiles (xgemmn) */
  cpu_qdot1_fn qdot1;           /* FAST, one token: the pair dot on xq1, or NULL */
  cpu_q8p xq1;
  mm_prep *prep;                /* tile paths: activations of x already prepared, or NULL (prepare alone) */
} mm_ctx;

void cpu_dequant_row(const cpu_kernels *k, uint32_t t, const void *src, float *dst, int64_t n) {
  switch (t) {
  case ICL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); break;
  case ICL_TYPE_F16: k->f16_to_f32(src, dst, n); break;
  case ICL_TYPE_BF16: { /* bf16 is the top half of an f32: a shift the compiler vectorizes */
    const uint16_t *h = src;
    uint32_t *bits = (uint32_t *)dst;
    for (int64_t i = 0; i < n; i++) bits[i] = (uint32_t)h[i] << 16;
    break;
  }
  default:
    if (k->dequant[t]) k->dequant[t](src, dst, n);
    else cpu_dequant_blocks(t, src, dst, n);
    break;
  }
}

/* ---- integer path ------------------------------------------------------------------------- */

/* Rows [r0, r1). */
static void mm_qdot_rows(void *arg, int64_t r0, int64_t r1, int ith) {
  (void)ith;
  mm_ctx *c = arg;
  cpu_qdot_fn f = c->cb->k.qdot[c->type];
  int64_t nb = c->K / 32;
  float out[MM_QDOT_TOKENS];
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t *wr = c->w + (size_t)r * c->wrb;
    if (r + MM_PREFETCH_ROWS < r1)
      for (size_t o = 0; o < c->wrb; o += 64) __builtin_prefetch(wr + MM_PREFETCH_ROWS * c->wrb + o);
    if (c->qdot1) {
      c->y[r] = c->qdot1(wr, &c->xq1);
      continue;
    }
    for (int64_t t0 = 0; t0 < c->n; t0 += MM_QDOT_TOKENS) {
      int nt = c->n - t0 < MM_QDOT_TOKENS ? (int)(c->n - t0) : MM_QDOT_TOKENS;
      f(wr, c->xq + t0 * nb, nb, nt, nb, out);
      for (int i = 0; i < nt; i++) c->y[(t0 + i) * c->rows + r] = out[i];
    }
  }
}

static void mm_quantize_range(void *arg, int64_t lo, int64_t hi, int ith);

/* Fills xp (cpu_q8p) from one token's nb blocks x; elements: element order (cpu_q8p). */
static void mm_q8p_fill(const cpu_q8 *x, int64_t nb, int elements, cpu_q8p *xp) {
  for (int64_t b = 0; b < nb + (nb & 1); b++) {
    int8_t *q = xp->q + 64 * (b / 2);
    int second = (int)(b & 1);
    if (b == nb) { /* the zero pad of an odd count */
      xp->ds[2 * b] = xp->ds[2 * b + 1] = xp->h[2 * b] = xp->h[2 * b + 1] = 0.0f;
      if (elements) memset(q + 32, 0, 32);
      else memset(q + 16, 0, 16), memset(q + 48, 0, 16);
      continue;
    }
    xp->ds[2 * b] = x[b].d;
    xp->ds[2 * b + 1] = x[b].s;
    xp->h[2 * b] = x[b].h[0];
    xp->h[2 * b + 1] = x[b].h[1];
    if (elements) memcpy(q + 32 * second, x[b].q, 32);
    else memcpy(q + 16 * second, x[b].q, 16), memcpy(q + 32 + 16 * second, x[b].q + 16, 16);
  }
  xp->nb = nb;
}

/* The few-token integer path's activations in the shared scratch: x quantized into c->xq, then, for one token,
 * arranged for the pair dots where want[e] (e = 1: element order, 0: halves order; cpu_q8p), into pairs[e]. */
static int mm_q8_few(mm_ctx *c, const int want[2], cpu_q8p pairs[2], icl_error *err) {
  int64_t nb = c->K / 32, np = (nb + 1) / 2;
  size_t xq_bytes = ((size_t)(c->n * nb) * sizeof(cpu_q8) + 63) & ~(size_t)63;
  size_t pair_bytes = ((size_t)np * (64 + 8 * sizeof(float)) + 63) & ~(size_t)63;
  uint8_t *buf = cpu_scratch_get(&c->cb->shared, xq_bytes + 2 * pair_bytes);
  if (!buf) return icl_error_set(err, ICL_ENOMEM, "cpu: matmul: out of memory");
  c->xq = (cpu_q8 *)buf;
  mm_quantize_range(c, 0, c->n, 0); /* one token or a few: not worth waking the pool */
  for (int e = 0; e < 2; e++) {
    if (!want[e]) continue;
    uint8_t *p = buf + xq_bytes + (size_t)e * pair_bytes; /* 64-byte aligned: q first */
    pairs[e] = (cpu_q8p){.q = (int8_t *)p, .ds = (float *)(p + (size_t)np * 64)};
    pairs[e].h = pairs[e].ds + 4 * np;
    mm_q8p_fill(c->xq, nb, e, &pairs[e]);
  }
  return ICL_OK;
}

/* ---- row-at-a-time float path (few tokens, types without an integer kernel) --------------- */

static void mm_rows_rows(void *arg, int64_t r0, int64_t r1, int ith) {
  mm_ctx *c = arg;
  const cpu_kernels *k = &c->cb->k;
  float *tmp = c->cb->scratch[ith].p;
  for (int64_t r = r0; r < r1; r++) {
    const float *wr = (const float *)(c->w + (size_t)r * c->wrb);
    if (c->type != ICL_TYPE_F32) {
      cpu_dequant_row(k, c->type, wr, tmp, c->K);
      wr = tmp;
    }
    for (int64_t t = 0; t < c->n; t++) c->y[t * c->rows + r] = k->dot(wr, c->x + t * c->K, c->K);
  }
}

/* ---- packed-tile path (many tokens) ------------------------------------------------------- */

/* Dequantizes rows [r0, r0+nr) into tmp [32][K] row-major (rows past nr zeroed so the kernels read
 * defined values). */
static void mm_dequant_tile(const mm_ctx *c, int64_t r0, int nr, float *tmp) {
  const cpu_kernels *k = &c->cb->k;
  const int64_t K = c->K;
  for (int r = 0; r < nr; r++) cpu_dequant_row(k, c->type, c->w + (size_t)(r0 + r) * c->wrb, tmp + r * K, K);
  if (nr < CPU_TILE_ROWS) memset(tmp + nr * K, 0, (size_t)((CPU_TILE_ROWS - nr) * K) * sizeof(float));
}

/* Dequantizes rows [r0, r0+nr) into wp[c*32 + r], through tmp. */
static void mm_pack_tile(const mm_ctx *c, int64_t r0, int nr, float *wp, float *tmp) {
  mm_dequant_tile(c, r0, nr, tmp);
  c->cb->k.pack_tile(tmp, c->K, c->K, wp);
}

static int mm_reserve(cpu_backend *cb, size_t per_thread, icl_error *err) {
  for (int i = 0; i < cb->n_threads; i++)
    if (!cpu_scratch_get(&cb->scratch[i], per_thread))
      return icl_error_set(err, ICL_ENOMEM, "cpu: matmul: cannot allocate %zu bytes of scratch", per_thread);
  return ICL_OK;
}

/* First row *r0 of tile ti (tiles of c->trows rows) and its row count (fewer in the last tile). */
static int mm_tile_rows(const mm_ctx *c, int64_t ti, int64_t *r0) {
  *r0 = ti * c->trows;
  return c->rows - *r0 < c->trows ? (int)(c->rows - *r0) : c->trows;
}

/* Packs tile ti into dst: f32 tiles from the repacked weight or through per-thread scratch tmp, int8 tiles
 * directly. */
static void mm_pack_one(const mm_ctx *c, int64_t ti, void *dst, float *tmp) {
  int64_t r0;
  int nr = mm_tile_rows(c, ti, &r0);
  if (c->q) c->cb->k.qpack[c->type](c->w + (size_t)r0 * c->wrb, c->wrb, nr, c->K, dst);
  else if (c->xw) c->cb->k.xunpack[c->type](c->xw + (size_t)ti * c->xw_tile, c->K, dst);
  else mm_pack_tile(c, r0, nr, dst, tmp);
}

/* Tokens [t0, t1) times packed tile ti. */
static void mm_gemm_one(const mm_ctx *c, int64_t ti, const void *tile, int64_t t0, int64_t t1) {
  const cpu_kernels *k = &c->cb->k;
  int64_t r0;
  int nr = mm_tile_rows(c, ti, &r0);
  if (c->q) {
    int64_t nb = c->K / 32;
    for (int64_t t = t0; t < t1; t += k->qgemm_nt) {
      int nt = t1 - t < k->qgemm_nt ? (int)(t1 - t) : k->qgemm_nt;
      k->qgemm[c->type](tile, nb, c->xq + t * nb, nb, nt, c->y + t * c->rows + r0, c->rows, nr);
    }
    return;
  }
  for (int64_t t = t0; t < t1; t += k->gemm_nt) {
    int nt = t1 - t < k->gemm_nt ? (int)(t1 - t) : k->gemm_nt;
    k->gemm_tile(tile, c->K, c->xp + t * c->K, nt, c->y + t * c->rows + r0, c->rows, nr);
  }
}

/* Token groups of x per packing item of the first panel's phase 1. */
#define MM_X_GROUPS 4

/* Groups [g0, g1) of x interleaved per group of gnt tokens at xp (one sequential stream for the kernel). */
static void mm_pack_x_groups(const mm_ctx *c, int gnt, int64_t g0, int64_t g1, float *xp) {
  for (int64_t g = g0; g < g1; g++) {
    int nt = c->n - g * gnt < gnt ? (int)(c->n - g * gnt) : gnt;
    c->cb->k.pack_x(c->x + g * gnt * c->K, c->K, c->K, nt, gnt, xp + g * gnt * c->K);
  }
}

/* Phase 1 of a panel: item = one tile, packed into the panel; in the first panel, then the items of x's groups
 * (packed there rather than by the caller alone before the region: the same bytes, in parallel). */
static void mm_pack_item(void *arg, int64_t it, int ith) {
  mm_ctx *c = arg;
  if (it < c->n_ptiles) {
    mm_pack_one(c, c->tile0 + it, (uint8_t *)c->panel + it * c->tbytes, c->cb->scratch[ith].p);
    return;
  }
  int gnt = c->cb->k.gemm_nt;
  int64_t groups = (c->n + gnt - 1) / gnt, g0 = (it - c->n_ptiles) * MM_X_GROUPS;
  mm_pack_x_groups(c, gnt, g0, g0 + MM_X_GROUPS < groups ? g0 + MM_X_GROUPS : groups, c->xpw);
}

/* Phase 2: item = (token block, tile of the panel), token-block-major so the threads share one
 * block of packed activations while they sweep the panel. */
static void mm_gemm_item(void *arg, int64_t it, int ith) {
  (void)ith;
  mm_ctx *c = arg;
  int64_t tb = it / c->n_ptiles, pt = it % c->n_ptiles;
  int64_t t0 = tb * c->tblock, t1 = t0 + c->tblock < c->n ? t0 + c->tblock : c->n;
  mm_gemm_one(c, c->tile0 + pt, (const uint8_t *)c->panel + pt * c->tbytes, t0, t1);
}

/* Quantizes tokens [lo, hi) of x into cpu_q8 blocks (the int8 paths' activations). */
static void mm_quantize_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  mm_ctx *c = arg;
  int64_t nb = c->K / 32;
  for (int64_t t = lo; t < hi; t++) c->cb->k.quantize_q8(c->x + t * c->K, c->xq + t * nb, c->K);
}

/* EXACT, one token: ntl <= CPU_XW_TILES repacked tiles from tile t0 at once, from the unpacked x. */
static void mm_xw_tiles(const mm_ctx *c, int64_t t0, int ntl) {
  float *ys[CPU_XW_TILES];
  int nrs[CPU_XW_TILES];
  for (int q = 0; q < ntl; q++) {
    int64_t r0;
    nrs[q] = mm_tile_rows(c, t0 + q, &r0);
    ys[q] = c->y + r0;
  }
  c->cb->k.xgemmn[c->type](c->xw + (size_t)t0 * c->xw_tile, c->xw_tile, c->K, c->x, ys, nrs, ntl);
}

/* Tiles [t0, t1) of mm_xw_tiles, CPU_XW_TILES at a time. */
static void mm_xw_range(void *arg, int64_t t0, int64_t t1, int ith) {
  (void)ith;
  const mm_ctx *c = arg;
  for (int64_t t = t0; t < t1; t += CPU_XW_TILES)
    mm_xw_tiles(c, t, t1 - t < CPU_XW_TILES ? (int)(t1 - t) : CPU_XW_TILES);
}

/* Few tokens (one token block): item = one tile, packed into the thread's scratch (after the f32
 * path's row-major staging area) and used at once, so no panel round trip through L3. */
static void mm_fused_item(void *arg, int64_t it, int ith) {
  mm_ctx *c = arg;
  uint8_t *tmp = c->cb->scratch[ith].p, *tile = c->q || c->xw ? tmp : tmp + c->tbytes;
  const cpu_kernels *k = &c->cb->k;
  if (c->xw && c->n <= CPU_ROWTILE_TOKS) { /* straight from the codes */
    int64_t r0;
    int nr = mm_tile_rows(c, it, &r0);
    k->xgemm[c->type](c->xw + (size_t)it * c->xw_tile, c->K, c->xp, (int)c->n, c->y + r0, c->rows, nr);
    return;
  }
  if (!c->q && k->gemm_rowtile && c->n <= CPU_ROWTILE_TOKS) { /* no packed tile at all */
    int64_t r0;
    int nr = mm_tile_rows(c, it, &r0);
    mm_dequant_tile(c, r0, nr, (float *)tmp);
    k->gemm_rowtile((const float *)tmp, c->K, c->K, c->xp, (int)c->n, c->y + r0, c->rows, nr);
    return;
  }
  mm_pack_one(c, it, tile, (float *)tmp);
  mm_gemm_one(c, it, tile, 0, c->n);
}

/* The f32 tile paths' activations: x interleaved per group of gnt tokens into the shared scratch (c->xp), so the
 * kernel reads one sequential stream. */
static int mm_pack_x(mm_ctx *c, int gnt, int defer, icl_error *err) {
  int64_t groups = (c->n + gnt - 1) / gnt;
  float *xp = cpu_scratch_get(&c->cb->shared, (size_t)(groups * gnt * c->K) * sizeof(float));
  if (!xp) return icl_error_set(err, ICL_ENOMEM, "cpu: matmul: out of memory");
  if (defer) c->xpw = xp, c->n_xitems = (groups + MM_X_GROUPS - 1) / MM_X_GROUPS; /* by the first pack region */
  else mm_pack_x_groups(c, gnt, 0, groups, xp);
  c->xp = xp;
  return ICL_OK;
}

/* The tile paths: panels of packed weight tiles (at most MM_PANEL_BYTES, so a panel stays in L3)
 * swept by blocks of about MM_TOK_BLOCK tokens, whose activations and output strip stay in L2.
 * Without this blocking, outputs larger than L2 halved the kernel's speed. c->q: int8 tiles and
 * cpu_q8 activations (FAST), else f32 tiles and packed f32 activations. */
static int mm_tiles(mm_ctx *c, icl_error *err) {
  cpu_backend *cb = c->cb;
  const cpu_kernels *k = &cb->k;
  int gnt = c->q ? k->qgemm_nt : k->gemm_nt;
  c->trows = c->q ? CPU_QTILE_ROWS : CPU_TILE_ROWS;
  c->tbytes = c->q ? (size_t)(c->K / 32) * CPU_QGROUP_BYTES : (size_t)c->K * CPU_TILE_ROWS * sizeof(float);
  int64_t n_tiles = (c->rows + c->trows - 1) / c->trows;
  c->tblock = (MM_TOK_BLOCK + gnt - 1) / gnt * gnt;
  int fused = c->n <= c->tblock;
  /* f32 tiles from rows stage through tbytes of scratch; the fused path keeps its tile there too */
  size_t per_thread = (c->q || c->xw ? 0 : c->tbytes) + (fused ? c->tbytes : 0);
  int rc = per_thread ? mm_reserve(cb, per_thread, err) : ICL_OK;
  if (rc) return rc;
  if (c->q && c->prep && c->prep->kind == MM_PREP_Q8) {
    c->xq = (cpu_q8 *)c->prep->p;
  } else if (c->q) {
    int64_t nb = c->K / 32;
    cpu_q8 *xq = cpu_scratch_get(&cb->shared, (size_t)(c->n * nb) * sizeof(cpu_q8));
    if (!xq) return icl_error_set(err, ICL_ENOMEM, "cpu: matmul: out of memory");
    c->xq = xq;
    cpu_pool_range(cb->pool, c->n, 8192 / c->K + 1, mm_quantize_range, c);
    if (c->prep) *c->prep = (mm_prep){MM_PREP_Q8, xq};
  } else if (!c->xw_multi) { /* xgemmn reads x as it lies */
    if (c->prep && c->prep->kind == MM_PREP_F32) c->xp = c->prep->p;
    else if ((rc = mm_pack_x(c, gnt, !fused, err))) return rc;
    else if (c->prep) *c->prep = (mm_prep){MM_PREP_F32, c->xp};
  }
  if (fused) {
    if (c->xw_multi) /* weight streams, as the row-wise paths (MM_SPLIT_ROWS); split by tiles, not groups of
                      * CPU_XW_TILES, so SmolLM2's 18-tile matrices split 9/9 rather than 3 groups to 2 */
      cpu_pool_split(cb->pool, n_tiles, CPU_XW_TILES, mm_xw_range, c);
    else
      cpu_pool_for(cb->pool, n_tiles, mm_fused_item, c);
    return ICL_OK;
  }
  int64_t per_panel = MM_PANEL_BYTES / c->tbytes > 0 ? (int64_t)(MM_PANEL_BYTES / c->tbytes) : 1;
  if (per_panel > n_tiles) per_panel = n_tiles;
  c->panel = cpu_scratch_get(&cb->panel, (size_t)per_panel * c->tbytes);
  if (!c->panel) return icl_error_set(err, ICL_ENOMEM, "cpu: matmul: out of memory");
  int64_t n_tblocks = (c->n + c->tblock - 1) / c->tblock;
  for (c->tile0 = 0; c->tile0 < n_tiles; c->tile0 += per_panel) {
    c->n_ptiles = n_tiles - c->tile0 < per_panel ? n_tiles - c->tile0 : per_panel;
    cpu_pool_for(cb->pool, c->n_ptiles + c->n_xitems, mm_pack_item, c);
    c->n_xitems = 0;
    cpu_pool_for(cb->pool, n_tblocks * c->n_ptiles, mm_gemm_item, c);
  }
  return ICL_OK;
}

/* A matmul's context before its path is chosen. */
static mm_ctx mm_init(cpu_backend *cb, const icl_dt *w, const icl_dt *x, const icl_dt *y) {
  mm_ctx c = {.cb = cb, .type = w->type, .w = cpu_ptr(w), .K = w->ne[0], .rows = w->ne[1], .n = icl_dt_nrows(x),
              .x = cpu_f32(x), .y = cpu_f32(y)};
  c.wrb = icl_type_row_bytes(w->type, c.K);
  return c;
}

/* EXACT: the repacked weight (or NULL) and whether one token takes xgemmn on it (unpacked x, tiles at once). */
static void mm_exact_init(mm_ctx *c, const icl_dt *w) {
  c->xw = cpu_xw_get(c->cb, w);
  c->xw_tile = cpu_xw_tile_bytes(c->type, c->K);
  c->xw_multi = c->xw && c->n == 1 && c->cb->k.xgemmn[c->type];
  c->trows = CPU_TILE_ROWS;
}

/* FAST precision's path for this type and token count. */
enum { MM_QGEMM, MM_TILES, MM_QDOT, MM_ROWS };
static int mm_fast_path(const cpu_backend *cb, uint32_t type, int64_t n) {
  if (n >= cb->qgemm_min_tokens && cb->k.qgemm[type]) return MM_QGEMM;
  if (n >= cb->tile_min_tokens) return MM_TILES;
  return cb->k.qdot[type] ? MM_QDOT : MM_ROWS;
}

/* One matmul; prep (or NULL) carries prepared activations from and to the matmuls of the same x around it. */
static int mm_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, mm_prep *prep,
                     icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  mm_ctx c = mm_init(cb, w, x, y);
  c.prep = prep;
  /* exact precision: every row through the f32 tile kernel, whose per-row arithmetic is the same for
   * any n; FAST: the int8 gemm from qgemm_min tokens where the level has one */
  if (be->precision == ICL_PRECISION_EXACT) {
    mm_exact_init(&c, w);
    return mm_tiles(&c, err);
  }
  int path = mm_fast_path(cb, c.type, c.n);
  if (path == MM_QGEMM) c.q = 1;
  if (path == MM_QGEMM || path == MM_TILES) return mm_tiles(&c, err);
  if (prep) prep->kind = MM_PREP_NONE; /* the paths below use the shared scratch their own way */
  cpu_range_fn task = mm_rows_rows;
  if (path == MM_QDOT) {
    int pairs = c.n == 1 && cb->k.qdot1[c.type], elements = cpu_q8p_elements(c.type);
    int want[2] = {pairs && !elements, pairs && elements};
    cpu_q8p pr[2];
    int rc = mm_q8_few(&c, want, pr, err);
    if (rc) return rc;
    if (pairs) c.xq1 = pr[elements], c.qdot1 = cb->k.qdot1[c.type];
    task = mm_qdot_rows;
  } else {
    int rc = mm_reserve(cb, (size_t)c.K * sizeof(float), err);
    if (rc) return rc;
  }
  cpu_pool_split(cb->pool, c.rows, MM_SPLIT_ROWS, task, &c);
  return ICL_OK;
}

int cpu_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  return mm_matmul(be, w, x, y, NULL, err);
}

/* ---- one-token groups: q, k, v (or gate, up) share one activation preparation and one dispatch --------------- */

typedef struct mm_group {
  int count;
  mm_ctx c[ICL_MATMUL_GROUP_MAX];
  int64_t off[ICL_MATMUL_GROUP_MAX + 1]; /* member i's units (rows or tiles) in the joint range */
  cpu_range_fn fn;                       /* a member's units [lo, hi) */
} mm_group;

/* EXACT members' units: groups of CPU_XW_TILES tiles, so no piece of a split leaves a member's tiles fewer than
 * xgemmn takes at once (a lone tile runs the one-tile kernel, with fewer fma chains). */
static void mm_xw_units(void *arg, int64_t u0, int64_t u1, int ith) {
  const mm_ctx *c = arg;
  int64_t n_tiles = (c->rows + CPU_TILE_ROWS - 1) / CPU_TILE_ROWS;
  mm_xw_range(arg, u0 * CPU_XW_TILES, u1 * CPU_XW_TILES < n_tiles ? u1 * CPU_XW_TILES : n_tiles, ith);
}

/* Joint units [lo, hi): the pieces of each member they cover. */
static void mm_group_range(void *arg, int64_t lo, int64_t hi, int ith) {
  mm_group *g = arg;
  for (int i = 0; i < g->count && lo < hi; i++) {
    if (lo >= g->off[i + 1]) continue;
    int64_t e = hi < g->off[i + 1] ? hi : g->off[i + 1];
    g->fn(&g->c[i], lo - g->off[i], e - g->off[i], ith);
    lo = e;
  }
}

/* One token through the paths a lone matmul takes (EXACT: CPU_XW_TILES repacked tiles at once; FAST: the pair
 * dots), so every row is computed as cpu_matmul computes it; other cases run the matmuls in turn, sharing the
 * prepared activations (the same bytes each would prepare). */
int cpu_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  int exact = be->precision == ICL_PRECISION_EXACT, ok = icl_dt_nrows(x) == 1, want[2] = {0, 0};
  mm_group g = {.count = count};
  for (int i = 0; i < count && ok; i++) {
    mm_ctx *c = &g.c[i];
    *c = mm_init(cb, &w[i], x, &y[i]);
    if (exact) {
      mm_exact_init(c, &w[i]);
      ok = c->xw_multi;
      g.off[i + 1] = g.off[i] + (c->rows + CPU_TILE_ROWS * CPU_XW_TILES - 1) / (CPU_TILE_ROWS * CPU_XW_TILES);
    } else {
      ok = mm_fast_path(cb, c->type, 1) == MM_QDOT && cb->k.qdot1[c->type];
      want[cpu_q8p_elements(c->type)] = 1;
      g.off[i + 1] = g.off[i] + c->rows;
    }
  }
  if (!ok) { /* in turn, the activations prepared once where the paths agree */
    mm_prep prep = {MM_PREP_NONE, NULL};
    for (int i = 0; i < count; i++) {
      int rc = mm_matmul(be, &w[i], x, &y[i], &prep, err);
      if (rc) return rc;
    }
    return ICL_OK;
  }
  if (exact) {
    g.fn = mm_xw_units; /* xgemmn reads x as it lies: nothing to prepare */
  } else {
    cpu_q8p pr[2];
    int rc = mm_q8_few(&g.c[0], want, pr, err);
    if (rc) return rc;
    for (int i = 0; i < count; i++) {
      g.c[i].xq = g.c[0].xq;
      g.c[i].xq1 = pr[cpu_q8p_elements(g.c[i].type)];
      g.c[i].qdot1 = cb->k.qdot1[g.c[i].type];
    }
    g.fn = mm_qdot_rows;
  }
  cpu_pool_split(cb->pool, g.off[count], exact ? 1 : MM_SPLIT_ROWS, mm_group_range, &g);
  return ICL_OK;
}

/* ---- get_rows ----------------------------------------------------------------------------- */

typedef struct rows_ctx {
  const cpu_kernels *k;
  uint32_t type;
  const uint8_t *w;
  size_t wrb;
  int64_t cols, n;
  const int32_t *ids;
  float *out;
} rows_ctx;

static void get_rows_range(void *arg, int64_t lo, int64_t hi, int ith) {
  (void)ith;
  rows_ctx *c = arg;
  for (int64_t i = lo; i < hi; i++)
    cpu_dequant_row(c->k, c->type, c->w + (size_t)c->ids[i] * c->wrb, c->out + i * c->cols, c->cols);
}

int cpu_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  cpu_backend *cb = cpu_of(be);
  rows_ctx c = {.k = &cb->k, .type = w->type, .w = cpu_ptr(w), .cols = w->ne[0], .n = icl_dt_nelem(ids),
                .ids = cpu_ptr(ids), .out = cpu_f32(out)};
  c.wrb = icl_type_row_bytes(w->type, c.cols);
  for (int64_t i = 0; i < c.n; i++)
    if (c.ids[i] < 0 || c.ids[i] >= w->ne[1])
      return icl_error_set(err, ICL_EINVAL, "get_rows: id %d at %lld is outside 0..%lld", c.ids[i], (long long)i,
                           (long long)w->ne[1] - 1);
  cpu_pool_range(cb->pool, c.n, 16384 / c.cols + 1, get_rows_range, &c);
  return ICL_OK;
}
