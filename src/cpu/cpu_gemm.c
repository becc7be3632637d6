/* A strided f32 gemm on the level's gemm_tile kernel, for products whose operands are transposed views (the
 * trainer's backward: dx = dy . W, dW = dy^T . x, attention's dq, dk, dv). Each operand is read where it lies and
 * packed straight into the kernel's layouts, so no transposed copy is made first; a transposed A over a short
 * reduction is not copied at all (gemm_tile_ld reads its columns in place), a transposed B packs by contiguous
 * copies; and where A is transposed and B transposed or row-major (the matmul backward's dW and dx) neither is
 * copied (gemm_tile_2ld, the reduction in chunks). Every output element is one kernel sum over the whole reduction
 * in order c = 0..K-1, the same fma sequence as transposing first and calling the matmul, so results are
 * bit-identical to that and do not depend on the thread count. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "cpu_internal.h"

/* Tokens per parallel item of the threaded gemm, rounded down to whole token groups (gemm_nt is 6 on AVX2). */
#define GEMM_TOK_BLOCK 64
static int64_t tok_block(const cpu_kernels *k) { return GEMM_TOK_BLOCK / k->gemm_nt * k->gemm_nt; }

static int64_t up16(int64_t n) { return (n + 15) / 16 * 16; }

/* wp[c*32 + r] = A(j0 + r, c) for r < nr, zero for nr <= r < 32. */
static void pack_a(const cpu_kernels *k, const cpu_mat *a, int64_t j0, int nr, int64_t K, float *wp) {
  const float *p = a->p + j0 * a->rs;
  if (a->rs == 1 && nr == CPU_TILE_ROWS && k->copy_cols) k->copy_cols(p, a->cs, K, CPU_TILE_ROWS, wp, NULL);
  else if (a->rs == 1 && nr == CPU_TILE_ROWS) { /* a transposed view: each column's rows are contiguous */
    for (int64_t c = 0; c < K; c++)
      for (int r = 0; r < CPU_TILE_ROWS; r++) wp[c * CPU_TILE_ROWS + r] = p[c * a->cs + r];
  } else if (a->cs == 1 && nr == CPU_TILE_ROWS) { /* row-major rows, rs apart (the trainer's value rows) */
    k->pack_tile(p, a->rs, K, wp);
  } else { /* rows read in turn (contiguous when cs = 1), the pad rows zero */
    if (nr < CPU_TILE_ROWS) memset(wp, 0, (size_t)(K * CPU_TILE_ROWS) * sizeof(float));
    for (int r = 0; r < nr; r++)
      for (int64_t c = 0; c < K; c++) wp[c * CPU_TILE_ROWS + r] = p[r * a->rs + c * a->cs];
  }
}

/* xp[c*gnt + t] = B(t0 + t, c) for t < nt. */
static void pack_b(const cpu_kernels *k, const cpu_mat *b, int64_t t0, int nt, int64_t K, float *xp) {
  int gnt = k->gemm_nt;
  const float *p = b->p + t0 * b->rs;
  if (b->cs == 1) k->pack_x(p, b->rs, K, nt, gnt, xp);
  else if (b->rs == 1 && nt == 8 && gnt == 8 && k->copy_cols) k->copy_cols(p, b->cs, K, 8, xp, NULL);
  else if (b->rs == 1 && nt == 8 && gnt == 8)
    for (int64_t c = 0; c < K; c++)
      for (int t = 0; t < 8; t++) xp[c * 8 + t] = p[c * b->cs + t];
  else
    for (int64_t c = 0; c < K; c++)
      for (int t = 0; t < nt; t++) xp[c * gnt + t] = p[t * b->rs + c * b->cs];
}

static int nrows(const cpu_gemm_args *g, int64_t j0) {
  return g->R - j0 < CPU_TILE_ROWS ? (int)(g->R - j0) : CPU_TILE_ROWS;
}
static int ntoks(const cpu_kernels *k, const cpu_gemm_args *g, int64_t t) {
  return g->n - t < k->gemm_nt ? (int)(g->n - t) : k->gemm_nt;
}

/* Whether token group i is packed together with group i - 1 (pack_b2): a transposed B whose two groups' 16 floats
 * come from one load, so each cache line of B is read once instead of once per group. */
static int b_paired(const cpu_kernels *k, const cpu_gemm_args *g, int64_t i) {
  return g->b.rs == 1 && g->b.cs != 1 && k->gemm_nt == 8 && k->copy_cols && (i & 1) && (i + 1) * 8 <= g->n;
}

/* Token groups i and i + 1 at xp (group i's place), both whole. */
static void pack_b2(const cpu_kernels *k, const cpu_mat *b, int64_t i, int64_t K, float *xp) {
  k->copy_cols(b->p + i * 8, b->cs, K, 16, xp, xp + 8 * K);
}

/* Group i of the token groups, or of a pair when it leads one (nothing when it is a pair's second). */
static void pack_group(const cpu_kernels *k, const cpu_gemm_args *g, int64_t i, float *xp) {
  if (b_paired(k, g, i)) return;
  if (b_paired(k, g, i + 1)) pack_b2(k, &g->b, i, g->K, xp);
  else pack_b(k, &g->b, i * k->gemm_nt, ntoks(k, g, i * k->gemm_nt), g->K, xp);
}

/* Whether A is read in place by gemm_tile_ld (a transposed view: column c of a tile is contiguous). Only for a
 * short reduction: each kernel call streams a tile's K columns, which in place are K rows of A apart (dW of the
 * attn2 model: 8192 rows of 1 KB, re-read from L3 for every token group) but packed are one contiguous block
 * that stays in L2. */
#define GEMM_IN_PLACE_MAX_K 512
static int a_in_place(const cpu_kernels *k, const cpu_gemm_args *g) {
  return g->a.rs == 1 && k->gemm_tile_ld && g->K <= GEMM_IN_PLACE_MAX_K;
}

/* Whether both operands are read in place by gemm_tile_2ld instead of packed: a transposed A (each column's rows
 * contiguous) and a B either transposed (dW: a column's tokens side by side in a row of dy) or row-major (dx: a
 * token's columns in a row of dy, the kernel reading gemm_nt rows at once). The reduction is cut into chunks of
 * GEMM_IP_COLS columns, so that an item's chunk of A (GEMM_IP_ROWS rows) and of B (a token block) stays in cache
 * while all its kernel calls read it, and every output's sum continues from its stored value at each chunk: one fma
 * chain in order c = 0..K-1 from +0, the bits of the packed path, without the packed copies' writes and re-reads
 * (docs/performance.md, "dW in place"). A causal B (attention's dq, dk, dv) trims each token group's columns as
 * gemm_call does; a Y_LOWER product keeps the packed path, which skips whole row tiles. */
#define GEMM_IP_COLS 128
#define GEMM_IP_ROWS 256
#define GEMM_IP_TOK 128
/* Tokens per item: up to GEMM_IP_TOK, fewer where that leaves under two items per thread (whole token groups). */
static int64_t ip_tb(const cpu_kernels *k, int64_t n, int threads) {
  int64_t gnt = k->gemm_nt, tb = (n + 2 * threads - 1) / (2 * threads);
  tb = tb < GEMM_IP_TOK ? tb : GEMM_IP_TOK;
  return tb < gnt ? gnt : (tb + gnt - 1) / gnt * gnt;
}
static int both_in_place(const cpu_kernels *k, const cpu_gemm_args *g) {
  return g->a.rs == 1 && (g->b.rs == 1 || g->b.cs == 1) && g->causal != CPU_GEMM_Y_LOWER && g->K > 0 &&
         k->gemm_tile_2ld;
}

/* The columns [*c0, *c1) of token group [t, t + nt) that can be non-zero (cpu_gemm_args.causal). */
static void causal_cols(const cpu_gemm_args *g, int64_t t, int nt, int64_t *c0, int64_t *c1) {
  *c0 = g->causal == CPU_GEMM_B_UPPER ? t : 0;
  *c1 = g->causal == CPU_GEMM_B_LOWER && t + nt < g->K ? t + nt : g->K;
  if (*c0 > *c1) *c0 = *c1;
}

/* Rows [j0a, j0a + GEMM_IP_ROWS) of tokens [ta, ta + tb) on A and B in place, over reduction columns [k0, k1)
 * (0 and K but for a pipeline stage, which is written and not causal: its chains continue from y past column 0),
 * chunk by chunk; accumulating, the sums go to tmp (tb x GEMM_IP_ROWS floats) and are added to y when whole, as
 * gemm_call adds. Each token group's chain covers its causal columns [lo, hi) only, from +0 in the chunk holding lo
 * (an empty range: one call over no columns, which stores +0). */
static void ip_item(const cpu_kernels *k, const cpu_gemm_args *g, int64_t j0a, int64_t ta, int64_t tb, int64_t k0,
                    int64_t k1, float *tmp) {
  int64_t j1 = j0a + GEMM_IP_ROWS < g->R ? j0a + GEMM_IP_ROWS : g->R;
  int64_t t1 = ta + tb < g->n ? ta + tb : g->n, ldo = g->accumulate ? GEMM_IP_ROWS : g->ldy;
  for (int64_t c0 = k0; c0 < k1; c0 += GEMM_IP_COLS) {
    int64_t ce = k1 - c0 < GEMM_IP_COLS ? k1 : c0 + GEMM_IP_COLS;
    for (int64_t j0 = j0a; j0 < j1; j0 += CPU_TILE_ROWS)
      for (int64_t t = ta; t < t1; t += k->gemm_nt) {
        int nt = ntoks(k, g, t);
        int64_t lo, hi;
        causal_cols(g, t, nt, &lo, &hi);
        int64_t a = lo > c0 ? lo : c0, b = hi < ce ? hi : ce;
        int starts = c0 <= lo && (lo < ce || ce == g->K); /* the chunk where this chain starts */
        if (a >= b && !starts) continue;
        if (a > b) a = b;
        float *y = g->accumulate ? tmp + (t - ta) * GEMM_IP_ROWS + (j0 - j0a) : g->y + t * g->ldy + j0;
        k->gemm_tile_2ld(g->a.p + j0 + a * g->a.cs, g->a.cs, b - a, g->b.p + t * g->b.rs + a * g->b.cs, g->b.cs,
                         g->b.rs, nt, y, ldo, nrows(g, j0), a > lo);
      }
  }
  if (!g->accumulate) return;
  for (int64_t t = ta; t < t1; t++) { /* y + the finished sum, add_mul's bits as in gemm_call */
    float *yr = g->y + t * g->ldy + j0a;
    k->add_mul(0, yr, tmp + (t - ta) * GEMM_IP_ROWS, yr, j1 - j0a);
  }
}

/* ---- pipelined in-place products: each thread sums the reduction rows its slice wrote -------------------------
 *
 * A written (not accumulating), non-causal product read in place has one fma chain per output over c = 0..K-1.
 * With P threads, the reduction is cut into P stages (K s / P .. K (s+1) / P: the trainer's slices when B splits
 * evenly) and the outputs into parts; stage s runs every part in order, each once stage s - 1 has finished it,
 * continuing the chains from the stored sums (gemm_tile_2ld's cont). So each core reads only the x and dy rows its
 * own slice wrote (half the operands when the pool items threw every row at both cores), and only the parts'
 * partial sums cross between cores: ip_item over the stage's columns, the same bits, at the cost of one part of fill and drain. */
#define GEMM_PIPE_TOK 16      /* tokens per part (whole token groups): more parts, a shorter fill and drain */
#define GEMM_PIPE_MAX_PARTS 192
/* Only where a stage's operand rows fit in a core's L2 beside the rest (the meta model's 576 rows of 128 + 128
 * floats: 0.6 MB): there the slice left them in its core's cache. The attn2 model's 4096 rows of 256 + 256 floats
 * (8 MB) come from L3 either way, and its parts re-reading them cost 1.5-2.6% of a step. */
#define GEMM_PIPE_STAGE_BYTES (1 << 20)
typedef struct pipe_part {
  int i; /* the product */
  int64_t j0a, ta;
} pipe_part;
typedef struct pipe_ctx {
  const cpu_kernels *k;
  const cpu_gemm_args *g;
  int n_parts, stages;
  int64_t tb; /* tokens per part */
  pipe_part part[GEMM_PIPE_MAX_PARTS];
  _Atomic int done[GEMM_PIPE_MAX_PARTS]; /* stages finished on part p */
} pipe_ctx;

/* Stage s: every part in order over its rows, each after stage s - 1 has left it. The pool claims items in order,
 * so the stage waited on is running or done: no wait can deadlock, one thread running every stage included. */
static void pipe_item(void *arg, int64_t s, int ith) {
  pipe_ctx *c = arg;
  (void)ith;
  for (int p = 0; p < c->n_parts; p++) {
    for (int i = 0; atomic_load_explicit(&c->done[p], memory_order_acquire) < s; i++) {
      CPU_RELAX();
      if ((i & 1023) == 1023) sched_yield(); /* the pool's join does the same */
    }
    const cpu_gemm_args *g = &c->g[c->part[p].i];
    ip_item(c->k, g, c->part[p].j0a, c->part[p].ta, c->tb, g->K * s / c->stages, g->K * (s + 1) / c->stages, NULL);
    atomic_store_explicit(&c->done[p], (int)s + 1, memory_order_release);
  }
}

/* Runs the group pipelined when every product can be (written, in place, not causal, at least a chunk of the
 * reduction per stage, a stage's rows within GEMM_PIPE_STAGE_BYTES, few enough parts) on more than one thread; 0
 * when it cannot (nothing run). */
static int gemm_pipelined(cpu_backend *cb, int count, const cpu_gemm_args *g) {
  int P = cpu_pool_threads(cb->pool);
  int64_t gnt = cb->k.gemm_nt, tb = GEMM_PIPE_TOK < gnt ? gnt : GEMM_PIPE_TOK / gnt * gnt;
  if (P < 2) return 0;
  int n = 0;
  for (int i = 0; i < count; i++) {
    if (!both_in_place(&cb->k, &g[i]) || g[i].accumulate || g[i].causal || g[i].K < (int64_t)P * GEMM_IP_COLS ||
        g[i].K / P * (g[i].R + g[i].n) * (int64_t)sizeof(float) > GEMM_PIPE_STAGE_BYTES)
      return 0;
    int64_t np = (g[i].R + GEMM_IP_ROWS - 1) / GEMM_IP_ROWS, nb = (g[i].n + tb - 1) / tb;
    if (np * nb > GEMM_PIPE_MAX_PARTS - n) return 0;
    n += (int)(np * nb);
  }
  pipe_ctx *c = cpu_scratch_get(&cb->shared, sizeof *c);
  if (!c) return 0; /* the pooled path reports the shortage */
  c->k = &cb->k, c->g = g, c->n_parts = 0, c->stages = P, c->tb = tb;
  for (int i = 0; i < count; i++) /* token blocks outermost: a part's dy columns are next to the previous part's */
    for (int64_t ta = 0; ta < g[i].n; ta += tb)
      for (int64_t j0a = 0; j0a < g[i].R; j0a += GEMM_IP_ROWS) {
        atomic_init(&c->done[c->n_parts], 0);
        c->part[c->n_parts++] = (pipe_part){.i = i, .j0a = j0a, .ta = ta};
      }
  cpu_pool_for(cb->pool, P, pipe_item, c);
  cb->n_pipelined++;
  return 1;
}

/* One kernel call: rows [j0, j0 + nr) of tokens [t, t + nt) from the packed tile wp (NULL: A in place) and the
 * packed group xp. */
static void gemm_call(const cpu_kernels *k, const cpu_gemm_args *g, const float *wp, const float *xp, int64_t j0, int nr,
                      int64_t t, int nt, float *tmp) {
  if (g->causal == CPU_GEMM_Y_LOWER && j0 > t + nt - 1) return; /* no y[t][j] with j <= t in this tile */
  int64_t c0, c1;
  causal_cols(g, t, nt, &c0, &c1);
  float *y = g->accumulate ? tmp : g->y + t * g->ldy + j0;
  int64_t ldy = g->accumulate ? CPU_TILE_ROWS : g->ldy;
  if (wp) k->gemm_tile(wp + c0 * CPU_TILE_ROWS, c1 - c0, xp + c0 * k->gemm_nt, nt, y, ldy, nr);
  else k->gemm_tile_ld(g->a.p + j0 + c0 * g->a.cs, g->a.cs, c1 - c0, xp + c0 * k->gemm_nt, nt, y, ldy, nr);
  if (!g->accumulate) return;
  /* y += the finished sum, as a separate add did (add_mul: y + tmp per element, every level the loop's bits) */
  for (int u = 0; u < nt; u++) {
    float *yr = g->y + (t + u) * g->ldy + j0;
    k->add_mul(0, yr, tmp + u * CPU_TILE_ROWS, yr, nr);
  }
}

int64_t cpu_gemm_ws(const cpu_kernels *k, int64_t n, int64_t K) {
  int64_t gnt = k->gemm_nt;
  return up16((n + gnt - 1) / gnt * gnt * K) + CPU_TILE_ROWS * K + up16(gnt * CPU_TILE_ROWS);
}

void cpu_gemm_serial(const cpu_kernels *k, const cpu_gemm_args *g, float *ws) {
  int gnt = k->gemm_nt;
  if (both_in_place(k, g) && !g->accumulate) { /* (accumulating needs a sum buffer larger than ws holds) */
    int64_t tb = ip_tb(k, g->n, 1);
    for (int64_t ta = 0; ta < g->n; ta += tb)
      for (int64_t j0 = 0; j0 < g->R; j0 += GEMM_IP_ROWS) ip_item(k, g, j0, ta, tb, 0, g->K, NULL);
    return;
  }
  int64_t groups = (g->n + gnt - 1) / gnt;
  float *xp = ws, *wp = ws + up16(groups * gnt * g->K), *tmp = wp + CPU_TILE_ROWS * g->K;
  for (int64_t i = 0; i < groups; i++) pack_group(k, g, i, xp + i * gnt * g->K);
  int in_place = a_in_place(k, g);
  for (int64_t j0 = 0; j0 < g->R; j0 += CPU_TILE_ROWS) {
    if (!in_place) pack_a(k, &g->a, j0, nrows(g, j0), g->K, wp);
    for (int64_t i = 0; i < groups; i++)
      gemm_call(k, g, in_place ? NULL : wp, xp + i * gnt * g->K, j0, nrows(g, j0), i * gnt, ntoks(k, g, i * gnt), tmp);
  }
}

/* The threaded gemm runs count products in count + 1 parallel regions: region r runs the kernel items (one row tile
 * x GEMM_TOK_BLOCK tokens) of product r - 1 on its packed copies and packs the operands of product r into the
 * other half of the shared scratch (A tiles: none when A is read in place, none when the product before had the
 * same A packed), so a product's packed operands are still in cache when it runs, and count products cost
 * count + 1 hand-offs instead of 2 count. The products may differ in shape (a matmul's dx and dW). */
typedef struct gemm_prod {
  int64_t n_tiles, n_groups, n_blocks;
  int a_mode; /* 0: A in place, 1: A packed by the product before (the same matrix), 2: A packed for this one */
  int ip;     /* both operands in place (both_in_place): items of GEMM_IP_ROWS rows, nothing packed */
  int64_t n_panels, tb; /* ip: items per token block, tokens per item */
  int wslot;  /* the half holding its packed A */
} gemm_prod;

typedef struct gemm_ctx {
  cpu_backend *cb;
  const cpu_gemm_args *g; /* [count] */
  gemm_prod pr[CPU_GEMM_GROUP_MAX];
  int count, k;                 /* k: the product this region packs; k - 1 runs */
  float *wp[2], *xp[2];         /* packed A and B by half (B: product parity) */
  int64_t n_run, n_pack_a;      /* this region's run items, then A-pack, then B-pack items */
} gemm_ctx;

static float *gemm_wp(const gemm_ctx *c, int i) { return c->pr[i].a_mode == 0 ? NULL : c->wp[c->pr[i].wslot]; }

static void gemm_item(void *arg, int64_t it, int ith) {
  const gemm_ctx *c = arg;
  const cpu_kernels *k = &c->cb->k;
  if (it < c->n_run) { /* kernel calls of product k - 1 */
    int i = c->k - 1;
    const cpu_gemm_args *g = &c->g[i];
    if (c->pr[i].ip) {
      int64_t np = c->pr[i].n_panels;
      ip_item(k, g, it % np * GEMM_IP_ROWS, it / np * c->pr[i].tb, c->pr[i].tb, 0, g->K, c->cb->scratch[ith].p);
      return;
    }
    int64_t K = g->K, nt = c->pr[i].n_tiles;
    int64_t j0 = it % nt * CPU_TILE_ROWS, tb = tok_block(k), t0 = it / nt * tb;
    int64_t t1 = t0 + tb < g->n ? t0 + tb : g->n;
    const float *wp = gemm_wp(c, i);
    float *tmp = c->cb->scratch[ith].p;
    for (int64_t t = t0; t < t1; t += k->gemm_nt)
      gemm_call(k, g, wp ? wp + j0 * K : NULL, c->xp[i & 1] + t * K, j0, nrows(g, j0), t, ntoks(k, g, t), tmp);
    return;
  }
  it -= c->n_run;
  const cpu_gemm_args *g = &c->g[c->k];
  int64_t K = g->K;
  if (it < c->n_pack_a)
    pack_a(k, &g->a, it * CPU_TILE_ROWS, nrows(g, it * CPU_TILE_ROWS), K, gemm_wp(c, c->k) + it * CPU_TILE_ROWS * K);
  else
    pack_group(k, g, it - c->n_pack_a, c->xp[c->k & 1] + (it - c->n_pack_a) * k->gemm_nt * K);
}

static int same_mat(const cpu_mat *a, const cpu_mat *b) { return a->p == b->p && a->rs == b->rs && a->cs == b->cs; }

int cpu_gemm_group(cpu_backend *cb, int count, const cpu_gemm_args *g, icl_error *err) {
  int gnt = cb->k.gemm_nt;
  if (count < 1 || count > CPU_GEMM_GROUP_MAX)
    return icl_error_set(err, ICL_EINVAL, "cpu: gemm group: %d products, expected 1..%d", count, CPU_GEMM_GROUP_MAX);
  if (gemm_pipelined(cb, count, g)) return ICL_OK;
  gemm_ctx c = {.cb = cb, .g = g, .count = count};
  /* two halves, so the next product's packs do not overwrite what this region's kernel calls read; one thread runs
   * a region's items in order (the kernel calls first), so there one half serves and stays in cache */
  int halves = count == 1 || cpu_pool_threads(cb->pool) == 1 ? 1 : 2, last = 1, n_own = 0;
  int64_t wsz = 0, xsz = 0, tmp_sz = gnt * CPU_TILE_ROWS; /* per-thread sums of one kernel call or one ip item */
  for (int i = 0; i < count; i++) {
    gemm_prod *p = &c.pr[i];
    p->n_tiles = (g[i].R + CPU_TILE_ROWS - 1) / CPU_TILE_ROWS, p->n_groups = (g[i].n + gnt - 1) / gnt;
    p->n_blocks = (g[i].n + tok_block(&cb->k) - 1) / tok_block(&cb->k);
    int reuse = i > 0 && c.pr[i - 1].a_mode != 0 && same_mat(&g[i].a, &g[i - 1].a) && g[i].R == g[i - 1].R &&
                g[i].K == g[i - 1].K;
    p->ip = both_in_place(&cb->k, &g[i]);
    if (p->ip) {
      p->n_panels = (g[i].R + GEMM_IP_ROWS - 1) / GEMM_IP_ROWS, p->n_groups = 0;
      p->tb = ip_tb(&cb->k, g[i].n, cpu_pool_threads(cb->pool)), p->n_blocks = (g[i].n + p->tb - 1) / p->tb;
      tmp_sz = g[i].accumulate && GEMM_IP_ROWS * p->tb > tmp_sz ? GEMM_IP_ROWS * p->tb : tmp_sz;
    }
    p->a_mode = p->ip || a_in_place(&cb->k, &g[i]) ? 0 : reuse ? 1 : 2;
    if (p->a_mode == 2) p->wslot = last = halves == 2 ? 1 - last : 0, n_own++; /* not the half i - 1 reads */
    else if (p->a_mode == 1) p->wslot = c.pr[i - 1].wslot;
    int64_t w = p->a_mode ? up16(p->n_tiles * CPU_TILE_ROWS * g[i].K) : 0, x = up16(p->n_groups * gnt * g[i].K);
    wsz = w > wsz ? w : wsz, xsz = x > xsz ? x : xsz;
  }
  int nw = n_own < halves ? n_own : halves, nx = halves; /* the first own A takes half 0 */
  size_t ssz = (size_t)(nw * wsz + nx * xsz) * sizeof(float); /* 0 when every product reads in place */
  float *sp = ssz ? cpu_scratch_get(&cb->shared, ssz) : NULL;
  int ok = sp != NULL || !ssz;
  for (int i = 0; ok && i < cb->n_threads; i++)
    ok = cpu_scratch_get(&cb->scratch[i], (size_t)tmp_sz * sizeof(float)) != NULL;
  if (!ok) return icl_error_set(err, ICL_ENOMEM, "cpu: gemm: out of memory for %d products of up to [%lld x %lld] "
                                "floats of packed operands", count, (long long)wsz, (long long)xsz);
  c.wp[0] = sp, c.wp[1] = sp + (nw > 1 ? wsz : 0), c.xp[0] = sp + nw * wsz, c.xp[1] = c.xp[0] + (nx - 1) * xsz;
  for (c.k = 0; c.k <= count; c.k++) {
    const gemm_prod *run = c.k > 0 ? &c.pr[c.k - 1] : NULL, *pack = c.k < count ? &c.pr[c.k] : NULL;
    c.n_run = run ? (run->ip ? run->n_panels : run->n_tiles) * run->n_blocks : 0;
    c.n_pack_a = pack && pack->a_mode == 2 ? pack->n_tiles : 0;
    cpu_pool_for(cb->pool, c.n_run + c.n_pack_a + (pack ? pack->n_groups : 0), gemm_item, &c);
  }
  return ICL_OK;
}

int cpu_gemm(cpu_backend *cb, const cpu_gemm_args *g, icl_error *err) { return cpu_gemm_group(cb, 1, g, err); }
