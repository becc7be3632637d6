/* Internals of the native CPU backend: the thread pool, the SIMD kernel table and the op
 * implementations shared between the files of src/cpu/. */
#ifndef ICL_CPU_INTERNAL_H
#define ICL_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend.h"

/* ---- thread pool (cpu_pool.c) ------------------------------------------------------------- */

/* Work item i of a parallel loop, run on thread ith (0 = the caller; ith < n_threads indexes
 * per-thread scratch). Items must be independent: any thread may run any item, once. */
typedef void (*cpu_item_fn)(void *ctx, int64_t item, int ith);
/* A range [lo, hi) of a parallel loop over n elements. */
typedef void (*cpu_range_fn)(void *ctx, int64_t lo, int64_t hi, int ith);

typedef struct cpu_pool cpu_pool;

/* Starts n_threads - 1 workers (the caller is thread 0). Returns NULL on failure. */
cpu_pool *cpu_pool_new(int n_threads);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_threads(const cpu_pool *p);
/* Runs fn for items 0..n_items-1 on all threads; returns when all are done. */
void cpu_pool_for(cpu_pool *p, int64_t n_items, cpu_item_fn fn, void *ctx);
/* Runs fn over [0, n) in ranges of grain elements (one range on the caller if n <= grain). */
void cpu_pool_range(cpu_pool *p, int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);
/* Runs fn over [0, n) (n < 2^31) as one contiguous region per thread, each taken front to back in ranges of
 * chunk elements; a thread done with its region takes chunks from the back of the others (memory streams
 * that stay sequential, balanced across threads of unequal speed). One thread: one range [0, n). */
void cpu_pool_split(cpu_pool *p, int64_t n, int64_t chunk, cpu_range_fn fn, void *ctx);

/* ---- activation blocks for integer dot products ------------------------------------------ */

/* 32 activations quantized to int8 with scale d (x ~ d*q), s = d * sum(q) (the offset term of
 * Q4_1/Q5_1, the -8/-16 bias of Q4_0/Q5_0), h[i] = d * sum of q over half i (K types have
 * offsets per 16 elements) and qs[i] that sum as an integer (the int8 gemm folds symmetric offsets exactly). */
typedef struct cpu_q8 {
  float d, s, h[2];
  int8_t q[32];
  int16_t qs[2];
} cpu_q8;

/* RoPE: pair (a, b) of v rotated by cos c and sin s; the scalar loop and the SIMD kernels' tails (their lanes do
 * the same operations). */
static inline void cpu_rope_pair(float *v, int64_t a, int64_t b, float c, float s) {
  float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

/* ---- SIMD kernel table (cpu_kernels_generic.c, cpu_kernels_x86.c) -------------------------------------------------- */

/* Rows of the packed weight tile the gemm kernels work on. */
#define CPU_TILE_ROWS 32
/* Tiles per one-token kernel call on EXACT repacked weights (xgemmn): 4 keeps more of the weight stream in flight
 * than 2 (Gemma 3's LM head for one token 9.1-9.5 ms against 10.2-11.3 ms, paired runs of scripts/bench-cpu.sh). */
#define CPU_XW_TILES 4
/* Tokens gemm_rowtile handles at most (it pays a transpose per call, so only few-token matmuls use it). */
#define CPU_ROWTILE_TOKS 4
/* Tokens one gemm kernel call handles at most (each kernel states its own gemm_nt <= this). */
#define CPU_TILE_TOKS 8

/* The int8 gemm's weight tile (FAST precision, cpu_qgemm_x86.h): rows per tile, and bytes per
 * 32-column group (codes [8][16][4], then multipliers and offsets [2 halves][16 rows] each). */
#define CPU_QTILE_ROWS 16
#define CPU_QGROUP_BYTES 768

/* EXACT precision's repacked weights (cpu_xtile_x86.h, cpu_xweights.c): per tile of CPU_TILE_ROWS rows, groups of
 * 32 columns, each the codes of 32 rows (4 bits for types whose codes fit, else 8) then multipliers and offsets
 * per row, one pair per 32 columns or, where the type scales 16 elements at a time, per 16 (offsets only where they
 * are not a constant multiple of the multiplier). Decode streams all of it on every step: the 32-block types'
 * scales are f16 in the file and stay f16 here (the K types' are products, kept as f32). 5- and 6-bit codes stay
 * bytes: bit planes saved a third of their bytes but cost more decode than they saved in reads. */
static inline int cpu_xw_nibbles(uint32_t t) {
  return t == ICL_TYPE_Q4_0 || t == ICL_TYPE_Q4_1 || t == ICL_TYPE_Q4_K || t == ICL_TYPE_Q2_K || t == ICL_TYPE_Q3_K;
}
static inline int cpu_xw_f16(uint32_t t) {
  return t == ICL_TYPE_Q4_0 || t == ICL_TYPE_Q4_1 || t == ICL_TYPE_Q5_0 || t == ICL_TYPE_Q5_1 || t == ICL_TYPE_Q8_0;
}
static inline int cpu_xw_halves(uint32_t t) { return t == ICL_TYPE_Q2_K || t == ICL_TYPE_Q3_K || t == ICL_TYPE_Q6_K ? 2 : 1; }
/* Types whose offset is the multiplier times a constant (the decoders compute it so: -8*d, -32*a, ...), which is
 * then not stored; 0 for the others. */
static inline float cpu_xw_cfactor(uint32_t t) {
  switch (t) {
  case ICL_TYPE_Q4_0: return -8.0f;
  case ICL_TYPE_Q5_0: return -16.0f;
  case ICL_TYPE_Q8_0: return -128.0f;
  case ICL_TYPE_Q3_K: return -4.0f;
  case ICL_TYPE_Q6_K: return -32.0f;
  default: return 0.0f;
  }
}
/* Bytes of a group's codes; its scales follow. */
static inline size_t cpu_xw_code_bytes(uint32_t t) { return cpu_xw_nibbles(t) ? 512 : 1024; }
/* Bytes of one scale array [halves][32] (f16 or f32). */
static inline size_t cpu_xw_scale_bytes(uint32_t t) { return (size_t)cpu_xw_halves(t) * 32 * (cpu_xw_f16(t) ? 2 : 4); }
static inline size_t cpu_xw_group_bytes(uint32_t t) {
  return cpu_xw_code_bytes(t) + cpu_xw_scale_bytes(t) * (cpu_xw_cfactor(t) != 0.0f ? 1 : 2);
}
/* Bytes of one repacked tile of a weight with K columns. */
static inline size_t cpu_xw_tile_bytes(uint32_t t, int64_t K) { return (size_t)(K / 32) * cpu_xw_group_bytes(t); }

/* Dot of nb 32-blocks of one quantized weight row with nt (1..4) activation rows, each nb
 * cpu_q8 blocks long and xstride blocks apart; out[t] = the dot for token t. */
typedef void (*cpu_qdot_fn)(const uint8_t *w, const cpu_q8 *x, int64_t nb, int nt, int64_t xstride, float *out);

/* One token's cpu_q8 blocks rearranged for the pair dots (cpu_matmul.c's mm_q8p_fill): q holds two blocks per
 * 64 bytes, in element order (block 2p then 2p+1; cpu_q8p_elements) or halves order (elements 0-15 of 2p, of
 * 2p+1, then 16-31 of 2p, of 2p+1, matching the nibble layout); ds holds d, s of block 2p, then of 2p+1; h each
 * block's half sums (the K types' offsets). An odd count is padded with a zero block. */
typedef struct cpu_q8p {
  int8_t *q;
  float *ds; /* 16-byte aligned */
  float *h;
  int64_t nb;
} cpu_q8p;
/* Whether the pair dot of type t takes cpu_q8p in element order (Q8_0, Q5_0, Q5_1, the K types) rather than halves
 * order (Q4_0, Q4_1). */
static inline int cpu_q8p_elements(uint32_t t) { return t != ICL_TYPE_Q4_0 && t != ICL_TYPE_Q4_1; }
/* Dot of one weight row of xp->nb 32-blocks with the prepared token (the one-token path of AVX2 and AVX-512). */
typedef float (*cpu_qdot1_fn)(const uint8_t *w, const cpu_q8p *xp);

/* gemm_nt of the generic level */
#define CPU_GENERIC_NT 4

typedef struct cpu_kernels {
  const char *name; /* "generic", "avx2", "avx512" */
  int gemm_nt;      /* tokens per gemm_tile call that suit the register file */
  /* y[t*ldy + r] = sum_c wp[c*32 + r] * xp[c*gemm_nt + t] for t < nt (<= gemm_nt), r < nr (<= 32):
   * a 32-row weight tile times nt activation rows, both packed so each is one sequential stream
   * (see cpu_pack_x) */
  void (*gemm_tile)(const float *wp, int64_t K, const float *xp, int nt, float *y, int64_t ldy, int nr);
  float (*dot)(const float *a, const float *b, int64_t n);
  /* y += a * x over n floats */
  void (*axpy)(float *y, float a, const float *x, int64_t n);
  /* decode attention's row path (NULL: dot and axpy per key): s[g*ss + j] = q[g*hd ...] . k[j*ks ...], and
   * o[g*hd + c] += sum over p[g*ps + j] != 0 of p[g*ps + j] * v[j*vs + c], for g < ng and j in [j0, j1) */
  void (*qk_rows)(const float *q, int ng, int64_t hd, const float *k, int64_t ks, int64_t j0, int64_t j1, float *s,
                  int64_t ss);
  void (*pv_rows)(const float *p, int64_t ps, int ng, int64_t hd, const float *v, int64_t vs, int64_t j0, int64_t j1,
                  float *o);
  /* elementwise ops (every level; the generic one's are the scalar loops the SIMD lanes repeat, so the same
   * results): y = x*s*w (w NULL: x*s); y = a*b (mul) or a + b; RoPE of one head in place, pairs (i, i + half)
   * (neox) or (2i, 2i + 1), rotated by cs[i], sn[i] */
  void (*scale_mul)(const float *x, float s, const float *w, float *y, int64_t n);
  void (*add_mul)(int mul, const float *a, const float *b, float *y, int64_t n);
  void (*rope_head)(float *v, const float *cs, const float *sn, int half, int neox);
  /* y = exp(x) over n floats (y may be x); about 1 ulp; results below ~1e-38 flush to 0 */
  void (*vexp)(const float *x, float *y, int64_t n);
  /* softmax steps: x *= s and return max(x) (-inf for n = 0); x = exp(x - m) and return the sum */
  float (*scale_max)(float *x, int64_t n, float s);
  double (*exp_sum)(float *x, int64_t n, float m);
  /* n f16 values (a multiple of 8 is fastest) to f32 */
  void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
  /* quantizes n floats (a multiple of 32) into n/32 cpu_q8 blocks */
  void (*quantize_q8)(const float *x, cpu_q8 *q, int64_t n);
  /* out = x / (1 + exp(-z)) [* up], z = x (silu) or the tanh-gelu argument (cpu_ops.c's sigmoid_gate, whose
   * results it must equal); NULL: cpu_ops.c's loops around vexp */
  void (*gate)(int gelu, const float *x, const float *up, float *out, int64_t n);
  cpu_qdot_fn qdot[ICL_TYPE_COUNT]; /* NULL for types without an integer path */
  cpu_qdot1_fn qdot1[ICL_TYPE_COUNT]; /* one token, two blocks per instruction; NULL where absent */
  /* FAST int8 gemm (NULL where absent): qpack repacks nr <= CPU_QTILE_ROWS rows (wrb bytes apart) of K
   * columns into a tile of K/32 groups; qgemm computes y[t*ldy + r] for r < nr, t < nt (<= qgemm_nt)
   * from a tile and nt tokens of cpu_q8 blocks xs blocks apart */
  int qgemm_nt;
  void (*qpack[ICL_TYPE_COUNT])(const uint8_t *w, size_t wrb, int nr, int64_t K, uint8_t *tile);
  void (*qgemm[ICL_TYPE_COUNT])(const uint8_t *tile, int64_t G, const cpu_q8 *x, int64_t xs, int nt, float *y,
                                int64_t ldy, int nr);
  /* wp[c*32 + r] = src[r*lds + c] for r < 32, c < K: a row-major tile (a dequantized weight tile, attention's
   * keys, the trainer's value rows) to the gemm_tile layout */
  void (*pack_tile)(const float *src, int64_t lds, int64_t K, float *wp);
  /* cpu_pack_x (activations, attention's queries and probabilities for gemm_tile), in registers where the level
   * has a transpose for its gemm_nt */
  void (*pack_x)(const float *x, int64_t ldx, int64_t K, int nt, int gnt, float *xp);
  /* gemm_tile on the row-major tile src (pack_tile's input, rows lds apart; all 32 readable) for
   * nt <= CPU_ROWTILE_TOKS, bit-identical to pack_tile + gemm_tile; NULL where the level has none */
  void (*gemm_rowtile)(const float *src, int64_t lds, int64_t K, const float *xp, int nt, float *y, int64_t ldy,
                       int nr);
  /* gemm_tile with column c of the tile at wp + c*ldw (unaligned; lanes r >= nr not read), bit-identical to
   * gemm_tile on the packed copy: decode attention's p.v straight from the value rows; NULL where none */
  void (*gemm_tile_ld)(const float *wp, int64_t ldw, int64_t K, const float *xp, int nt, float *y, int64_t ldy,
                       int nr);
  /* FAST attention's q.k and p.v in bf16 (cpu_bf16.c; NULL where the level has no bf16 dot, which leaves FAST on
   * the f32 gemm_tile): gemm_tile over K2 pairs, each a uint32 of two bf16 (cpu_bf16_pair), wp[p*32 + r] and
   * xp[p*gemm_nt + t], every pair product exact and added to the f32 sum high half first, as vdpbf16ps does */
  void (*gemm_tile_bf16)(const uint32_t *wp, int64_t K2, const uint32_t *xp, int nt, float *y, int64_t ldy, int nr);
  /* cpu_pack_x to bf16 pairs: xp[p*gnt + t] = pair (x[t][2p], x[t][2p+1]) for p < (K+1)/2, the high half 0 past K */
  void (*pack_x_bf16)(const float *x, int64_t ldx, int64_t K, int nt, int gnt, uint32_t *xp);
  /* out[d] = pair (a[d], b[d]) for d < n (b NULL: a zero high half): two value rows, two keys to a word */
  void (*pair_rows_bf16)(const float *a, const float *b, int64_t n, uint32_t *out);
  /* EXACT repacked weights (NULL where the level has none): xpack repacks nr <= CPU_TILE_ROWS rows (wrb bytes
   * apart) of K columns into a tile of K/32 groups of cpu_xw_group_bytes; xunpack writes its pack_tile layout
   * wp[c*32 + r]; xgemm is gemm_tile on it for nt <= CPU_ROWTILE_TOKS (xp packed as for gemm_tile). Both are
   * bit-identical to dequantizing the rows and pack_tile + gemm_tile. */
  void (*xpack[ICL_TYPE_COUNT])(const uint8_t *w, size_t wrb, int nr, int64_t K, uint8_t *tile);
  void (*xunpack[ICL_TYPE_COUNT])(const uint8_t *tile, int64_t K, float *wp);
  void (*xgemm[ICL_TYPE_COUNT])(const uint8_t *tile, int64_t K, const float *xp, int nt, float *y, int64_t ldy,
                                int nr);
  /* xgemm of one token on ntl <= CPU_XW_TILES tiles tile + i*tstride at once (more fma chains and weight streams
   * in flight), tile i into y[i] (nr[i] rows); x is the token's K floats as they lie, not packed (packing one token
   * scattered it over 8x the cache lines: ~10% of SmolLM2's exact decode) */
  void (*xgemmn[ICL_TYPE_COUNT])(const uint8_t *tile, size_t tstride, int64_t K, const float *x, float *const *y,
                                 const int *nr, int ntl);
  /* n elements (whole blocks) of a quantized row to f32; NULL = cpu_dequant_blocks (scalar, the generic level) */
  void (*dequant[ICL_TYPE_COUNT])(const uint8_t *src, float *dst, int64_t n);
  /* ceiling probes (cpu_ceilings.c): iters rounds of independent register-resident f32 FMA or int8
   * dot-product chains; a read stream over n floats (64-byte aligned). Each returns the operations
   * (2 per multiply-add) or bytes done; sink defeats dead-code elimination. */
  double (*probe_fma)(int64_t iters, float *sink);
  double (*probe_dot8)(int64_t iters, float *sink);
  double (*probe_read)(const float *x, int64_t n, float *sink);
  /* the trainer's norm backward, pass 1 of sixteen rows at x and g (ld floats apart, 16 ld < 2^31): stats [2, 16]
   * (mean, 0 for rms, and 1/sqrt(var + eps); read instead when stats_in) and, when dx, dx += ..., the bits of
   * cpu_train_ops.c's norm_bwd_tile; NULL where the level has none (that loop runs) */
  void (*norm_bwd16)(const float *x, const float *g, int64_t ld, const float *w, int64_t d, int rms, float eps,
                     float *stats, int stats_in, float *dx);
  /* Strided columns copied for the gemm's packing: d0[c*8 + i] = p[c*cs + i] for i < 8 and, when d1,
   * d1[c*8 + i] = p[c*cs + 8 + i] (w = 16: two token groups from one load), or d0[c*32 + i] for i < 32 (w = 32: a
   * transposed A tile); NULL where the level has none (plain loops run) */
  void (*copy_cols)(const float *p, int64_t cs, int64_t K, int w, float *d0, float *d1);
  /* LayerNorm forward of sixteen rows at x into y (ld floats apart, 16 ld < 2^31), w and b optional, and when
   * stats their [2, 16] statistics (norm_bwd16's): the bits of cpu_ops.c's layer_norm_tile; NULL where the level
   * has none */
  void (*layer_norm16)(const float *x, int64_t ld, const float *w, const float *b, int64_t d, float eps, float *y,
                       float *stats);
  /* attention backward's row sums for nr <= 8 rows from i0 of the [T][T] P and dP: pdp[r] = sum over j <= i0 + r of
   * P[i0+r][j] dP[i0+r][j] in double, j in order (cpu_train_attn.c's row_dots bits); NULL where the level has none */
  void (*row_dots8)(const float *P, const float *dP, int64_t T, int64_t i0, int nr, double *pdp);
  /* the trainer's norm backward, pass 2 on columns [lo, hi) of n rows (d floats apart): dw[j] += dy xhat and
   * db[j] += dy (either may be NULL), rows in order (cpu_train_ops.c's norm_bwd_cols bits); NULL where the level has
   * none */
  void (*norm_cols)(const float *x, const float *dy, const float *stats, int64_t n, int64_t d, int64_t lo,
                    int64_t hi, float *dw, float *db);
  /* the optimizer step on elements [lo, hi): per element the operations of cpu_train_ops.c's upd_range loop in its
   * order (the same bits); NULL where the level has none (that loop runs) */
  void (*optim_upd)(float *w, const float *g, float *m1, float *m2, int64_t lo, int64_t hi, const icl_optim_args *a);
  /* attention backward's products for one (sequence, head) of T <= 16 keys and hd % 16 == 0, hd <= 256 (rows of q,
   * k, v, dz, dq, dk, dv ld floats apart; P, dS [T][T]): attb_dp16 dP [T][T] = dz v^T, attb_grads16 dq = dS k,
   * dk = dS^T q, dv = P^T dz WRITTEN; each output the fma chain cpu_train_attn.c's gemm calls give it (the same
   * order, range and start, for the level's token groups of gnt), so the bits of that path; NULL where the level
   * has none (those calls run) */
  void (*attb_dp16)(const float *v, const float *dz, int64_t ld, int64_t hd, int64_t T, float *dP);
  void (*attb_grads16)(const float *q, const float *k, const float *dz, const float *P, const float *dS, int64_t ld,
                       int64_t hd, int64_t T, int gnt, float *dq, float *dk, float *dv);
  /* one row of few-key attention's p.v: out[0..hd) = sum over j < n of v[j * ld + ..] p[j], in order from +0, the
   * dims in lanes (hd % 16 == 0), the chain of the blocked path's gemm_tile (unlike decode's pv_rows, which skips
   * zero p and adds to o); with attb_dp16 for the scores, the trainer's attention forward of T <= 16 keys
   * (cpu_attention.c); NULL where the level has none */
  void (*pv_gemm_row)(const float *v, int64_t ld, int64_t hd, const float *p, int64_t n, float *out);
  /* gemm_tile_ld with B in place too: token t's value for column c at xp[c*ldx + t*ldt] (t < nt <= gemm_nt); the
   * sums start from y's values when cont, else from +0, and take the fma steps of gemm_tile in the same order, so a
   * reduction split at any columns (each part's sums stored, then continued) has the bits of one gemm_tile call
   * over all of it (the strided gemm's dW and dx products); NULL where the level has none */
  void (*gemm_tile_2ld)(const float *wp, int64_t ldw, int64_t K, const float *xp, int64_t ldx, int64_t ldt, int nt,
                        float *y, int64_t ldy, int nr, int cont);
} cpu_kernels;

/* Fills k for the given level ("generic", "avx2", "avx512" or NULL = best the CPU supports,
 * overridable by ICL_CPU_SIMD). Returns the level's name. */
const char *cpu_kernels_init(cpu_kernels *k, const char *want);

void cpu_kernels_generic(cpu_kernels *k);
/* The generic level's scale_mul and add_mul, which the SIMD ones call for their last elements */
void cpu_scale_mul_c(const float *x, float s, const float *w, float *y, int64_t n);
void cpu_add_mul_c(int mul, const float *a, const float *b, float *y, int64_t n);
/* The bf16 kernels' scalar references (cpu_bf16.c), the generic level's entries */
void cpu_gemm_tile_bf16_c(const uint32_t *wp, int64_t K2, const uint32_t *xp, int nt, float *y, int64_t ldy, int nr);
void cpu_pack_x_bf16_c(const float *x, int64_t ldx, int64_t K, int nt, int gnt, uint32_t *xp);
void cpu_pair_rows_bf16_c(const float *a, const float *b, int64_t n, uint32_t *out);
#if defined(__x86_64__) || defined(__i386__)
void cpu_kernels_avx2(cpu_kernels *k);
void cpu_kernels_avx512(cpu_kernels *k);
/* AVX-512 BF16's gemm_tile_bf16, pack_x_bf16 and pair_rows_bf16 (cpu_bf16_x86.c), installed over the avx512 level
 * where the CPU has avx512bf16 */
void cpu_kernels_bf16_avx512(cpu_kernels *k);
/* The trainer's AVX-512 kernels (cpu_train_x86.c), installed with the avx512 level */
void cpu_kernels_train_avx512(cpu_kernels *k);
void cpu_probes_avx2(cpu_kernels *k);
void cpu_probes_avx512(cpu_kernels *k);
#endif
void cpu_probes_generic(cpu_kernels *k);

/* Packs nt rows of K floats (ldx apart) interleaved: xp[c*gnt + t]. Lanes t >= nt are not written: every kernel
 * reads only the nt lanes it is given (zeroing them was ~2% of an exact one-token decode). */
static inline void cpu_pack_x(const float *x, int64_t ldx, int64_t K, int nt, int gnt, float *xp) {
  if (nt == gnt) {
    for (int64_t c = 0; c < K; c++)
      for (int t = 0; t < gnt; t++) xp[c * gnt + t] = x[t * ldx + c];
    return;
  }
  for (int t = 0; t < nt; t++)
    for (int64_t c = 0; c < K; c++) xp[c * gnt + t] = x[t * ldx + c];
}

/* f32 to bf16, rounded to nearest even (NaN stays NaN, overflow goes to inf): what vcvtneps2bf16 gives for
 * normal numbers (it also flushes f32 denormals to 0). */
static inline uint32_t cpu_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u; /* NaN: quiet, never rounded to inf */
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}
/* Two floats as one bf16 pair: lo the even element (the low half), hi the odd one. */
static inline uint32_t cpu_bf16_pair(float lo, float hi) { return cpu_bf16(lo) | cpu_bf16(hi) << 16; }
/* The float a bf16 (the low 16 bits of h) stands for. */
static inline float cpu_bf16_f32(uint32_t h) {
  uint32_t u = (h & 0xFFFFu) << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- the backend ------------------------------------------------------------------------- */

/* Memory for weights and repacked copies (cpu_mem.c): 2 MiB-aligned chunks with huge pages requested. */
typedef struct cpu_chunk cpu_chunk;
typedef struct cpu_mem {
  int on;                 /* 0: plain aligned_alloc (ICL_CPU_HUGEPAGES=0, AddressSanitizer, no MADV_HUGEPAGE) */
  cpu_chunk *chunks, *cur; /* every chunk; the one being carved */
} cpu_mem;
/* Reads ICL_CPU_HUGEPAGES; returns m->on. */
int cpu_mem_init(cpu_mem *m);
/* size bytes, 64-byte aligned, from a chunk (*chunk) or aligned_alloc (*chunk = NULL); NULL when out of memory. */
void *cpu_mem_alloc(cpu_mem *m, size_t size, cpu_chunk **chunk);
/* Frees what cpu_mem_alloc returned with that chunk. */
void cpu_mem_free(cpu_mem *m, void *p, cpu_chunk *chunk);
/* Unmaps every chunk (the backend's destroy, after its buffers were freed). */
void cpu_mem_release(cpu_mem *m);
/* Chunks mapped now (tests). */
int cpu_mem_chunks(const cpu_mem *m);

struct icl_buf {
  void *data;
  size_t size;
  int usage;        /* ICL_BUF_* of buf_alloc (0 for views made by hand, e.g. the trainer's) */
  cpu_chunk *chunk; /* weights: the cpu_mem chunk data was carved from, or NULL */
  int wrapped;      /* buf_wrap: data is the caller's (buf_free leaves it) */
};

/* Per-thread scratch that grows on demand (weight tiles, dequantized rows, attention scores). */
typedef struct cpu_scratch {
  void *p;
  size_t size;
} cpu_scratch;

/* A quantized weight repacked for EXACT precision, keyed by the view it was made from. */
typedef struct cpu_xw {
  const icl_buf *buf;
  size_t offset;
  uint32_t type;
  int64_t K, rows;
  uint8_t *tiles; /* ceil(rows/32) tiles of K/32 groups */
  cpu_chunk *chunk; /* cpu_mem's, for tiles */
} cpu_xw;

/* RoPE's cos and sin for one run of positions (cpu_ops.c): every layer rotates q and k at the same positions, so
 * they are computed once per forward, not twice per layer. Kept per (n_rot, base); Gemma 3 alternates two bases. */
typedef struct cpu_rope_tab {
  int n_rot;
  float base;
  int64_t n;        /* positions held; 0: empty */
  cpu_scratch mem;  /* holds pos, cs, sn */
  int32_t *pos;     /* [n] the positions (compared on lookup) */
  float *cs, *sn;   /* [n][n_rot/2] */
} cpu_rope_tab;
#define CPU_ROPE_TABS 2

typedef struct cpu_backend {
  icl_backend be;
  cpu_pool *pool;
  int n_threads;
  cpu_kernels k;
  int tile_min_tokens;  /* FAST matmuls with this many tokens or more use a packed-tile path */
  int qgemm_min_tokens; /* FAST matmuls with this many tokens or more use the int8 gemm where it exists */
  cpu_scratch *scratch; /* [n_threads] */
  cpu_scratch shared;   /* quantized or packed activations, shared by all threads of one op */
  cpu_scratch panel;    /* matmul: a panel of packed weight tiles */
  cpu_xw *xw;           /* EXACT: repacked weights (cpu_xweights.c), n_xw of cap_xw */
  int n_xw, cap_xw;
  int xw_off;           /* 1: never repack (ICL_CPU_REPACK=0; tests compare both paths) */
  cpu_rope_tab rope[CPU_ROPE_TABS];
  int rope_next;        /* the table to replace next */
  cpu_mem mem;          /* weights and repacked copies */
  struct cpu_backend **sub; /* run_split's sub-backends [n_threads] (cpu_split.c), made on first use */
  int64_t n_pipelined;  /* gemm groups run pipelined (cpu_gemm.c), for the tests */
} cpu_backend;

static inline cpu_backend *cpu_of(icl_backend *be) { return (cpu_backend *)be; }

/* One spin-wait step: a pause hint where the CPU has one (the pool's waits, the pipelined gemm's stage flags). */
#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif
static inline void *cpu_ptr(const icl_dt *t) { return (char *)t->buf->data + t->offset; }
static inline float *cpu_f32(const icl_dt *t) { return (float *)cpu_ptr(t); }

/* Returns scratch of at least size bytes (64-byte aligned), or NULL when out of memory. */
void *cpu_scratch_get(cpu_scratch *s, size_t size);

/* Strided f32 gemm (cpu_gemm.c): y[t*ldy + j] (+)= sum over c < K of A(j, c) B(t, c), for j < R, t < n, with
 * operand elements X(i, c) at p[i*rs + c*cs] (transposed views are rs = 1); bit-identical to transposing the
 * operands and running cpu_matmul, the same for every thread count. */
typedef struct cpu_mat {
  const float *p;
  int64_t rs, cs;
} cpu_mat;
typedef struct cpu_gemm_args {
  cpu_mat a, b;
  int64_t R, n, K;
  float *y;
  int64_t ldy;
  int accumulate; /* 1: y += the product; 0: y = the product */
  /* causal structure the products may skip (CPU_GEMM_*; 0: none): B(t, c) = 0 for c > t (B_LOWER) or c < t
   * (B_UPPER), so those terms are left out, which leaves every sum's bits as they were for finite A (each kernel
   * sum starts from +0 and never becomes -0, and adding a product 0 * a = +-0 changes no other value); or only
   * y[t][j] for j <= t is used (Y_LOWER: row tiles wholly past a token group are not computed) */
  int causal;
} cpu_gemm_args;
enum { CPU_GEMM_B_LOWER = 1, CPU_GEMM_B_UPPER = 2, CPU_GEMM_Y_LOWER = 3 };
/* Threaded over row tiles and token blocks, per-thread scratch from the backend. */
int cpu_gemm(cpu_backend *cb, const cpu_gemm_args *g, icl_error *err);
/* count (1..CPU_GEMM_GROUP_MAX) products, shapes free, in turn, in count + 1 parallel regions (each region runs one
 * product and packs the next; an A that the product before packed is not packed again); each product as cpu_gemm
 * with its own accumulate flag, so the bits are those of count cpu_gemm calls in turn. */
enum { CPU_GEMM_GROUP_MAX = 2 * ICL_MATMUL_GROUP_MAX };
int cpu_gemm_group(cpu_backend *cb, int count, const cpu_gemm_args *g, icl_error *err);
/* On the calling thread with work space ws (64-byte aligned, cpu_gemm_ws(k, n, K) floats). */
void cpu_gemm_serial(const cpu_kernels *k, const cpu_gemm_args *g, float *ws);
int64_t cpu_gemm_ws(const cpu_kernels *k, int64_t n, int64_t K);

/* Whether T keys of head size hd fit the few-key attention kernels (attb_dp16, attb_grads16, pv_gemm_row). */
static inline int cpu_few_keys(int64_t T, int64_t hd) { return T <= 16 && hd % 16 == 0 && hd <= 256; }

/* Training entries (cpu_train.c over cpu_train_ops.h), with the backend.h signatures. */
int cpu_attention_seqs(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                       const icl_dt *out, const icl_dt *pattern, icl_error *err);
int cpu_matmul_bwd(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                   const icl_dt *dx, int write, icl_error *err);
int cpu_matmul_bwd_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *dy,
                         const icl_dt *dw, const icl_dt *dx, int write, icl_error *err);
int cpu_norm_fwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                 const icl_dt *y, const icl_dt *stats, icl_error *err);
int cpu_norm_bwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *dy,
                 const icl_dt *dx, const icl_dt *dw, const icl_dt *db, const icl_dt *stats, int stats_in,
                 icl_error *err);
int cpu_attention_bwd(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *P,
                      const icl_dt *dz, float scale, const icl_dt *dq, const icl_dt *dk, const icl_dt *dv,
                      icl_error *err);
int cpu_rope_bwd(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, icl_error *err);
int cpu_gelu_bwd(icl_backend *be, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err);
int cpu_relu_bwd(icl_backend *be, const icl_dt *y, const icl_dt *dy, const icl_dt *dx, icl_error *err);
int cpu_embed(icl_backend *be, const icl_dt *e, const icl_dt *ids, const icl_dt *x, icl_error *err);
int cpu_embed_bwd(icl_backend *be, const icl_dt *ids, const icl_dt *dx, const icl_dt *de, icl_error *err);
int cpu_sum_rows(icl_backend *be, const icl_dt *src, const icl_dt *dst, icl_error *err);
int cpu_smear(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *ks, icl_error *err);
int cpu_smear_bwd(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *dks, const icl_dt *dk,
                  const icl_dt *dalpha, icl_error *err);
int cpu_xent(icl_backend *be, const icl_dt *logits, const icl_dt *targets, const icl_dt *weights, const icl_dt *probs,
             const icl_dt *dlogits, double *loss, icl_error *err);
int cpu_optim_update(icl_backend *be, const icl_dt *w, const icl_dt *g, const icl_dt *m1, const icl_dt *m2,
                     const icl_optim_args *a, icl_error *err);

/* run_split (cpu_split.c), with the backend.h signature; cpu_split_free destroys the sub-backends (destroy). */
int cpu_run_split(icl_backend *be, int n, icl_split_fn fn, void *ctx, icl_error *err);
void cpu_split_free(cpu_backend *cb);

/* Ops (cpu_matmul.c, cpu_attention.c, cpu_ops.c), with the backend.h signatures. */
int cpu_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err);
int cpu_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                  const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err);
int cpu_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
/* LayerNorm of rows [d, n] at x into y (cpu_layer_norm's bits) and, when stats, each row's mean and 1/sqrt(var +
 * eps) into stats [2, n], the bits norm_bwd computes. */
void cpu_layer_norm_rows(cpu_backend *cb, const float *x, const float *w, const float *b, int64_t d, int64_t n,
                         float eps, float *y, float *stats);
int cpu_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y,
                   icl_error *err);
int cpu_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
int cpu_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int cpu_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int cpu_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err);
int cpu_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_swiglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
int cpu_geglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
int cpu_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int cpu_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err);
int cpu_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err);
int cpu_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
               int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err);
int cpu_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
               float value, icl_error *err);

/* "cpu (avx512, 2 threads)": the SIMD level and thread count, for logs and benchmarks. */
const char *icl_cpu_backend_describe(icl_backend *be, char *buf, size_t n);

/* EXACT precision's repacked copy of weight view w (made on first use, in parallel), or NULL where there is none:
 * a type or SIMD level without the kernels, a buffer not allocated as ICL_BUF_WEIGHT, xw_off, or no memory (the
 * caller then dequantizes rows, with identical results). Its tiles are cpu_xw_tile_bytes apart. */
const uint8_t *cpu_xw_get(cpu_backend *cb, const icl_dt *w);
/* Forgets the repacked copies made from bytes [off, off+n) of b (its contents changed, or it is freed: n = SIZE_MAX). */
void cpu_xw_drop(cpu_backend *cb, const icl_buf *b, size_t off, size_t n);

/* Dequantizes n elements of one row of type t to f32 with the fastest kernel available. */
void cpu_dequant_row(const cpu_kernels *k, uint32_t t, const void *src, float *dst, int64_t n);

/* Dequantizes n elements (whole blocks) of a quantized GGUF block type to f32 (cpu_dequant.c; not src/ref's). */
void cpu_dequant_blocks(uint32_t t, const void *src, float *dst, int64_t n);

#endif
