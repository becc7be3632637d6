/* One table-driven test of the backend op contract (src/backend.h) for every backend, in the
 * manner of ggml's test-backend-ops. Each table entry is {op, shape classes, weight types,
 * tolerances with their reasons}; every case runs through the checked wrappers (src/ops.c) on:
 *   - ref: the scalar reference backend, judged against an independent float64 computation in
 *     this test (ops_fwd_*.h; weight blocks are decoded with icl_ref_dequant, which
 *     test_ref_quant checks against hand-built blocks);
 *   - each CPU SIMD level (ICL_CPU_SIMD=generic on 1 thread, avx2 on 3, avx512 with VNNI on 2;
 *     a level the CPU lacks is reported and skipped), at EXACT precision and, for the ops whose
 *     FAST precision takes another path (int8 matmul, row attention, bf16 attention), FAST;
 *   - each Vulkan kernel family (ICL_VK_SHAPE=gpu and cpu, so lavapipe runs the GPU-shaped
 *     kernels too), with the validation layer's message count asserted 0 at the end; and FAST where the family
 *     gets another several-token matmul at FAST (ICL_VK_MATMUL: intdot), its matmuls only;
 * all judged against the ref backend's result. Every output has guard bytes on both sides (and
 * inputs keep theirs); non-finite values must match the reference's exactly.
 * The training backward ops (CPU today) have their own section (ops_bwd.h).
 * Options: --quick or ICL_OPS_QUICK=1 (drops the "big" shape class), --verbose (every measured error), --op NAME,
 * --backend SUBSTRING (targets besides ref), --list (the table's coverage, nothing run), --own-family (Vulkan:
 * only the kernel family the device runs by default), --types T1,T2,... (matmul and get_rows on these weight
 * types only). The last two are for device-check.sh --quick: on lavapipe each pipeline costs LLVM seconds.
 * How to add an entry: docs/testing.md. */
/* table rows leave their unused trailing fields (f, flags) zero */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "ops_bwd.h"
#include "ops_fwd_ew.h"
#include "ops_fwd_mm.h"
#include "ops_targets.h"


static const uint32_t WEIGHT_TYPES[] = {ICL_TYPE_F32,  ICL_TYPE_F16,  ICL_TYPE_BF16, ICL_TYPE_Q4_0,  ICL_TYPE_Q4_1,
                                        ICL_TYPE_Q5_0, ICL_TYPE_Q5_1, ICL_TYPE_Q8_0, ICL_TYPE_Q2_K,  ICL_TYPE_Q3_K,
                                        ICL_TYPE_Q4_K, ICL_TYPE_Q5_K, ICL_TYPE_Q6_K, ICL_TYPE_COUNT};
static const uint32_t T_Q4_1[] = {ICL_TYPE_Q4_1, ICL_TYPE_COUNT}, T_Q5_0[] = {ICL_TYPE_Q5_0, ICL_TYPE_COUNT};
static const uint32_t T_Q5_1[] = {ICL_TYPE_Q5_1, ICL_TYPE_COUNT}, T_Q8_0[] = {ICL_TYPE_Q8_0, ICL_TYPE_COUNT};
static const uint32_t T_F16[] = {ICL_TYPE_F16, ICL_TYPE_COUNT}, T_Q4_K[] = {ICL_TYPE_Q4_K, ICL_TYPE_COUNT};
static const uint32_t T_Q6_K[] = {ICL_TYPE_Q6_K, ICL_TYPE_COUNT};
static const uint32_t CONVERT_TYPES[] = {ICL_TYPE_F16, ICL_TYPE_F32, ICL_TYPE_COUNT};
/* matmul_add differs from matmul only in its store, the same for every weight type: the target models' types
 * (each type is one more pipeline to compile on every Vulkan family, seconds each on lavapipe) */
static const uint32_t MATMUL_ADD_TYPES[] = {ICL_TYPE_F32, ICL_TYPE_Q4_1, ICL_TYPE_Q8_0, ICL_TYPE_Q4_K, ICL_TYPE_Q6_K,
                                            ICL_TYPE_COUNT};

/* ---- shapes ----------------------------------------------------------------------------- */

/* {K, rows, tokens}: a K that is not a whole number of a type's blocks skips that type */
static const ot_shape MATMUL[] = {
    {"tiny", {1, 1, 1}},       {"tiny", {32, 1, 1}},      {"tiny", {256, 1, 1}},     {"tiny", {256, 1, 5}},
    {"odd", {7, 5, 3}},        {"odd", {33, 7, 2}},       {"odd", {96, 7, 3}},       {"odd", {512, 7, 3}},
    {"odd", {33, 7, 1}}, /* one token: rows of 132 bytes start at every word shift, a partial last chunk */
    {"odd", {256, 33, 1}},     {"odd", {256, 33, 3}},     {"odd", {256, 33, 7}},     {"odd", {256, 33, 13}},
    {"tile", {256, 33, 32}},   {"tile", {256, 33, 37}},   {"tile", {576, 40, 2}},    {"tile", {640, 70, 9}},
    {"tile", {1536, 20, 2}},   {"tile", {512, 37, 11}},   {"tile", {576, 192, 67}},  {"tile", {768, 192, 67}},
    {"model", {576, 1536, 1}}, {"model", {576, 1536, 7}}, {"model", {640, 256, 1}},  {"model", {640, 256, 5}},
    {"model", {2048, 640, 4}}, {"model", {1536, 576, 1}}, {"model", {1536, 576, 7}}, {"model", {2048, 640, 1}},
};
/* the target models' layers with their own weight types: SmolLM2 (d 576, ff 1536, kv 192, vocab
 * 49152) and Gemma 3 270M (d 640, ff 2048), decode (1), prompt (7) and a prefill chunk (512) */
static const ot_shape MM_Q4_1[] = {{"model", {576, 1536, 1}}, {"model", {576, 1536, 7}}, {"big", {576, 1536, 512}},
                                   {"big", {576, 49152, 1}}};
static const ot_shape MM_Q5_0[] = {{"big", {1536, 576, 512}}};
static const ot_shape MM_Q8_0[] = {{"model", {576, 192, 512}}, {"model", {640, 2048, 1}}, {"big", {640, 2048, 64}}};
static const ot_shape MM_Q5_1[] = {{"model", {576, 576, 7}}};
static const ot_shape MM_F16[] = {{"model", {2048, 640, 9}}};
static const ot_shape MM_Q4_K[] = {{"model", {1536, 576, 3}}};
static const ot_shape MM_Q6_K[] = {{"model", {1536, 576, 40}}};

/* {K, rows0, tokens, rows1, rows2}: one token (the CPU's one-dispatch path) on model and odd shapes, then
 * several (the matmuls in turn) */
static const ot_shape MATMUL_GROUP[] = {
    {"tiny", {32, 5, 1, 3, 2}},         {"odd", {256, 33, 1, 7, 70}},    {"odd", {96, 5, 1, 64, 65}},
    {"model", {576, 576, 1, 192, 192}}, {"model", {768, 96, 1, 32, 64}}, {"odd", {256, 40, 5, 8, 9}}};

/* {K, rows, tokens}: the mat-vec (1) and tiled (n > 1) paths, odd and model shapes (o and down of both models) */
static const ot_shape MATMUL_ADD[] = {{"odd", {256, 33, 1}},    {"odd", {96, 7, 3}},        {"tile", {256, 33, 37}},
                                      {"model", {576, 576, 1}}, {"model", {1536, 576, 7}}, {"model", {2048, 640, 1}}};

/* {K, rows, tokens}; flag gelu: the fused path (one token) and the fallback (several) */
static const ot_shape MATMUL_GLU[] = {{"odd", {256, 33, 1}},           {"model", {576, 1536, 1}}, {"odd", {256, 65, 1}, 0, 1},
                                      {"odd", {96, 7, 3}, 0, 1}};

/* folded norms: {K, rows0, tokens, rows1, rows2} (SmolLM2's q, k, v; partial workgroups; a partial last chunk;
 * more than one window of chunk partials; unaligned views; several tokens: rms_norm then the group) */
static const ot_shape RMS_MATMUL_GROUP[] = {
    {"model", {576, 576, 1, 192, 192}}, {"odd", {256, 33, 1, 7, 65}},  {"odd", {96, 5, 1, 64, 65}},
    {"odd", {100, 5, 1, 3, 9}},         {"odd", {8448, 9, 1, 3, 2}},   {"odd", {256, 33, 1, 7, 65}, 0, OT_UNALIGNED},
    {"odd", {256, 40, 5, 8, 9}}};
/* {K, rows, tokens}; flag gelu */
static const ot_shape RMS_MATMUL_GLU[] = {{"model", {576, 1536, 1}}, {"odd", {256, 65, 1}, 0, 1},
                                          {"odd", {256, 33, 1}, 0, OT_UNALIGNED}, {"odd", {96, 7, 3}, 0, 1}};
/* {d, rows}: Gemma 3's 640 (decode, prefill), a partial chunk, more than one window */
static const ot_shape RMS_NORM_ADD[] = {{"model", {640, 1}}, {"model", {640, 9}}, {"odd", {100, 3}},
                                        {"odd", {8448, 2}}, {"odd", {100, 3}, 0, OT_UNALIGNED}};

/* {K, rows, ids} */
static const ot_shape GET_ROWS[] = {{"tiny", {32, 3, 1}},     {"tiny", {256, 3, 1}},     {"odd", {256, 3, 6}},
                                    {"odd", {576, 50, 7}},    {"odd", {512, 50, 7}},     {"model", {1536, 576, 6}},
                                    {"model", {576, 1536, 6}}, {"model", {2048, 640, 6}}};
static const ot_shape GET_ROWS_Q8_0[] = {{"big", {640, 4096, 512}}};

/* {d, rows}; flags NORM_W, NORM_IN_PLACE */
static const ot_shape NORM[] = {
    {"tiny", {1, 1}, 0, NORM_W},     {"tiny", {1, 1}, 0, NORM_IN_PLACE}, {"odd", {7, 3}, 0, NORM_W},
    {"odd", {7, 3}, 0, NORM_IN_PLACE}, {"odd", {97, 5}, 0, NORM_W},       {"odd", {64, 63}, 0, NORM_W},
    {"odd", {64, 63}, 0, NORM_IN_PLACE}, {"model", {256, 28}, 0, NORM_W | NORM_IN_PLACE}, {"model", {256, 28}},
    {"model", {576, 1}, 0, NORM_W},  {"model", {576, 7}, 0, NORM_W | NORM_IN_PLACE}, {"model", {640, 9}},
    {"model", {576, 512}, 0, NORM_W}, {"model", {640, 512}, 0, NORM_W}, {"model", {640, 512}, 0, NORM_IN_PLACE},
    {"big", {49152, 2}, 0, NORM_W},  {"big", {49152, 2}, 0, NORM_IN_PLACE}};

/* {head_dim, heads, tokens, n_rot, pos0}, f = base; flag 1 = NEOX */
/* {hd, heads, tokens, n_rot, pos0, k_heads}, base; flag neox: SmolLM2's 9 and 3 heads, Gemma 3's 4 and 1 */
static const ot_shape ROPE_PAIR[] = {{"tiny", {64, 9, 1, 64, 0, 3}, 1e4},       {"odd", {64, 3, 7, 32, 5, 2}, 1e5},
                                     {"model", {64, 9, 7, 64, 1393, 3}, 1e5},  {"model", {256, 4, 1, 256, 1393, 1}, 1e6, 1},
                                     {"model", {256, 4, 5, 256, 0, 1}, 1e4, 1}, {"odd", {64, 2, 3, 32, 17, 1}, 1e4, 1}};
/* rope_pair's shapes (Gemma 3's 4 and 1 heads of 256 in NEOX mode first) and a head_dim with a partial chunk */
static const ot_shape RMS_ROPE_PAIR[] = {
    {"model", {256, 4, 1, 256, 1393, 1}, 1e6, 1}, {"model", {256, 4, 5, 256, 0, 1}, 1e4, 1},
    {"odd", {64, 3, 7, 32, 5, 2}, 1e5},           {"odd", {100, 2, 3, 40, 17, 1}, 1e4, 1},
    {"tiny", {64, 9, 1, 64, 0, 3}, 1e4}};
static const ot_shape ROPE[] = {
    {"tiny", {64, 9, 1, 64, 0}, 1e4},        {"odd", {64, 3, 7, 64, 5}, 1e5},       {"odd", {64, 9, 7, 64, 0}, 1e4},
    {"model", {64, 3, 7, 64, 1393}, 1e5},    {"model", {256, 4, 7, 256, 0}, 1e6, 1}, {"model", {256, 4, 7, 256, 1393}, 1e6, 1},
    {"model", {256, 1, 5, 256, 1395}, 1e4, 1}, {"odd", {64, 2, 5, 32, 3}, 1e4, 1},  {"odd", {64, 2, 5, 32, 3}, 1e4},
    {"odd", {64, 2, 3, 32, 17}, 1e4, 1},     {"odd", {64, 2, 3, 32, 17}, 1e4},      {"model", {64, 9, 512, 64, 0}, 1e4}};
/* positions far beyond the context (angles of 1e5 rad): f32 angle reduction costs accuracy */
static const ot_shape ROPE_FAR[] = {{"odd", {256, 1, 3, 256, 100000}, 1e4, 1}};

/* {hd, heads, kv_heads, queries, n_past, window}, f = softcap; flags AT_* and OT_UNALIGNED */
#define U OT_UNALIGNED
static const ot_shape ATTENTION[] = {
    {"tiny", {64, 9, 3, 1, 0, 0}, 0, AT_PATTERN},          {"tiny", {64, 9, 3, 1, 100, 0}, 0, AT_PATTERN},
    {"odd", {64, 9, 3, 3, 10, 0}, 0, AT_MASK | AT_PATTERN}, {"model", {256, 4, 1, 1, 700, 512}, 0, AT_PATTERN},
    {"odd", {64, 9, 3, 7, 0, 0}, 0, AT_PATTERN},           {"odd", {64, 9, 3, 7, 20, 0}, 0, AT_MASK | AT_PATTERN},
    {"model", {64, 9, 3, 512, 0, 0}},                      {"model", {256, 4, 1, 7, 600, 512}, 0, AT_PATTERN},
    {"tile", {256, 4, 1, 40, 0, 16}, 0, AT_MASK | AT_PATTERN}, {"odd", {64, 4, 2, 5, 3, 0}, 30, AT_PATTERN},
    {"big", {64, 1, 1, 1400, 0, 0}, 0, AT_PATTERN},
    /* single-head work items on the CPU (one kv head, or GQA groups too few for the threads) */
    {"odd", {64, 4, 1, 2, 50, 0}, 0, AT_MASK | AT_PATTERN}, {"tiny", {64, 6, 2, 1, 30, 0}, 0, AT_MASK | AT_PATTERN},
    {"model", {256, 4, 1, 130, 0, 0}, 0, AT_PATTERN},
    /* the CPU row path's head sizes: 16-key score blocks and a register-held output row at 64/128/256, per-key
     * dots elsewhere (40: not a multiple of 16; 96: no register-held row), with a softcap */
    {"odd", {40, 2, 1, 1, 37, 0}, 0, AT_PATTERN}, {"odd", {128, 4, 2, 2, 40, 0}, 0, AT_MASK | AT_PATTERN},
    {"odd", {96, 2, 1, 1, 20, 0}, 30, AT_PATTERN},
    /* the Vulkan suite's cases: scores x4, aligned (vec4 kernels) and unaligned views */
    {"tiny", {64, 9, 3, 1, 6, 0}, 0, AT_SCALE4 | AT_PATTERN}, {"tiny", {64, 9, 3, 1, 6, 0}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"odd", {64, 9, 3, 7, 0, 0}, 0, AT_SCALE4 | AT_PATTERN},  {"odd", {64, 9, 3, 7, 0, 0}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"odd", {64, 9, 3, 7, 5, 0}, 0, AT_SCALE4},               {"odd", {64, 9, 3, 7, 5, 0}, 0, AT_SCALE4 | U},
    {"odd", {256, 4, 1, 7, 5, 4}, 0, AT_SCALE4 | AT_PATTERN}, {"odd", {256, 4, 1, 7, 5, 4}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"tiny", {256, 4, 1, 1, 11, 4}, 0, AT_SCALE4 | AT_PATTERN},
    {"tiny", {256, 4, 1, 1, 11, 4}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"odd", {64, 4, 2, 7, 3, 0}, 5, AT_SCALE4 | AT_MASK | AT_PATTERN},
    {"odd", {64, 4, 2, 7, 3, 0}, 5, AT_SCALE4 | AT_MASK | AT_PATTERN | U},
    {"odd", {64, 4, 2, 7, 3, 0}, 0, AT_SCALE4 | AT_MASKED_ROW | AT_PATTERN},
    {"odd", {64, 4, 2, 7, 3, 0}, 0, AT_SCALE4 | AT_MASKED_ROW | AT_PATTERN | U},
    {"odd", {40, 2, 1, 7, 2, 0}, 0, AT_SCALE4 | AT_PATTERN},  {"odd", {40, 2, 1, 7, 2, 0}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"model", {64, 1, 1, 512, 0, 0}, 0, AT_SCALE4 | AT_PATTERN},
    {"model", {64, 1, 1, 512, 0, 0}, 0, AT_SCALE4 | AT_PATTERN | U},
    {"big", {64, 1, 1, 1400, 0, 512}, 0, AT_SCALE4 | AT_PATTERN},
    {"big", {256, 4, 1, 1, 1399, 0}, 0, AT_SCALE4 | AT_PATTERN},
    /* Vulkan's query-block (flash) kernel: several queries, no pattern, on GPU-shaped devices; partial blocks,
     * GQA, windows shorter and longer than a key tile, softcap, masks, a fully masked row, head sizes that are not
     * a multiple of 64, n_past > 0 */
    {"odd", {64, 9, 3, 33, 0, 0}},                           {"odd", {64, 9, 3, 17, 20, 0}, 0, AT_MASK | U},
    {"odd", {256, 4, 1, 40, 0, 16}, 0, AT_MASK},             {"odd", {256, 4, 1, 37, 600, 512}, 0, AT_SCALE4},
    {"odd", {64, 4, 2, 19, 3, 4}, 30, AT_SCALE4},            {"odd", {64, 4, 2, 7, 3, 0}, 0, AT_SCALE4 | AT_MASKED_ROW},
    {"odd", {40, 2, 1, 21, 2, 0}, 5, AT_SCALE4 | U},         {"odd", {96, 2, 1, 9, 20, 0}, 30, AT_MASK},
    {"odd", {128, 4, 2, 18, 40, 0}, 0, AT_MASK},             {"big", {256, 4, 1, 1400, 0, 512}, 0, AT_SCALE4}};
#undef U

/* {d, rows, b_rows}; flag 1 = in place */
static const ot_shape BINARY[] = {
    {"tiny", {1, 1, 1}},      {"tiny", {1, 1, 1}, 0, 1},  {"odd", {7, 3, 3}, 0, 1},     {"odd", {7, 3, 1}},
    {"odd", {97, 5, 1}},      {"odd", {2053, 1, 1}},      {"odd", {2053, 1, 1}, 0, 1},  {"model", {576, 5, 5}},
    {"model", {576, 5, 1}, 0, 1}, {"model", {640, 7, 7}, 0, 1}, {"model", {640, 7, 1}},  {"model", {1536, 3, 3}}, {"model", {1536, 3, 1}},
    {"model", {576, 1, 1}, 0, 1}, {"model", {640, 70, 70}, 0, 1}, {"tile", {576, 512, 1}}, {"big", {1536, 512, 512}}};

/* {elements}, f = scale factor; flag 1 = in place (swiglu/geglu: y = gate) */
static const ot_shape UNARY[] = {{"tiny", {1}, 0.375},        {"tiny", {1}, 0.375, 1},    {"odd", {21}, 0.375},
                                 {"odd", {21}, 0.375, 1},     {"odd", {485}, 0.375},      {"odd", {2053}, 0.375, 1},
                                 {"model", {2880}, 0.375},    {"model", {4480}, 0.375, 1}, {"model", {4608}, 0.375},
                                 {"model", {576}, 0.375, 1}, {"tile", {44800}, 0.375, 1}, {"big", {786432}, 0.375}};

/* {d, rows}; flags 1 = in place, 2 = -inf entries and a fully masked row */
static const ot_shape SOFTMAX[] = {{"tiny", {1, 1}},          {"tiny", {7, 1}, 0, 2},      {"odd", {7, 3}, 0, 1},
                                   {"odd", {5, 2}, 0, 3},     {"odd", {64, 63}},           {"model", {256, 28}, 0, 1},
                                   {"model", {576, 7}},       {"model", {640, 512}, 0, 1}, {"model", {1400, 64}, 0, 2},
                                   {"model", {49152, 3}, 0, 2}, {"model", {49152, 2}}};
/* {d, rows} */
static const ot_shape ARGMAX[] = {{"tiny", {1, 1}},    {"tiny", {7, 1}},     {"odd", {7, 3}},       {"odd", {64, 63}},
                                  {"model", {256, 28}}, {"model", {576, 7}}, {"model", {640, 512}}, {"model", {1400, 64}},
                                  {"model", {49152, 3}}};
/* {d, rows, k} */
static const ot_shape LSE[] = {{"tiny", {1, 1, 1}},       {"odd", {7, 3, 2}},        {"odd", {97, 5, 16}},
                               {"model", {49152, 9, 16}}, {"model", {49152, 2, 30}}, {"model", {262144, 3, 10}},
                               {"tile", {1000, 341, 1}}};
/* {elements} */
static const ot_shape CONVERT[] = {{"tiny", {1}},     {"odd", {21}},     {"odd", {1001}},  {"odd", {2053}},
                                   {"model", {2880}}, {"model", {4480}}, {"model", {4608}}};
/* {rows, cols, src_off, src_stride, dst_off, dst_stride} */
static const ot_shape COPY2D[] = {{"tiny", {1, 1, 0, 1, 0, 1}},       {"odd", {7, 64, 704, 576, 704, 576}},
                                  {"odd", {1, 64, 0, 0, 4608, 576}},  {"odd", {7, 128, 64, 256, 3, 131}},
                                  {"odd", {1, 5, 2, 0, 1, 7}},        {"model", {512, 576, 0, 576, 0, 576}},
                                  {"odd", {9, 576, 576, 0, 0, 576}},  {"odd", {5, 64, 3, 32, 7, 65}}};
/* {rows, cols, off, stride}, f = value */
static const ot_shape FILL2D[] = {{"tiny", {1, 1, 5, 1}, -2.5},   {"odd", {2, 5, 3, 576}, -2.5},
                                  {"odd", {7, 64, 128, 256}, 0.0}, {"model", {9, 576, 0, 576}, 0.0},
                                  {"model", {512, 64, 128, 576}, 1.0}};

/* ---- tolerances ------------------------------------------------------------------------- */

#define NONE {0, "not run"}
#define T_EXACT {0, "bit-identical: the same exactly specified operation"}
static const ot_tols TOL_MATMUL = {
    {1e-13, "ref sums in double and rounds once to f32 (NMSE ~2^-48)"},
    {1e-10, "f32 sums where ref sums in double: ~1e-7 per element, NMSE ~1e-13; an indexing error is >= 1e-4"},
    {1e-9, "f32 summation order of the tiled kernels against double: NMSE ~K*2^-48; a wrong block is >= 1e-4"},
    {1e-3, "FAST: activations quantized to 8 bits per 32-block (~1/254 of the block maximum): 1e-5..9e-5 on long rows, 4e-4 for one 32-term dot"}};
static const ot_tols TOL_GET_ROWS = {{0, "decoded values are copies of icl_ref_dequant's"},
                                     {0, "the same f32 decoding (its own dequantization) as ref"},
                                     {1e-12, "shader decoding: scale x quant in f32, may fuse into one rounding"}, NONE};
static const ot_tols TOL_NORM = {{1e-12, "a few f32 roundings after double sums"},
                                 {1e-10, "row sums in f32 (vector lanes) against double: relative ~1e-7"},
                                 {1e-9, "row sums in f32 in workgroup order; layer_norm centres twice in f32"}, NONE};
static const ot_tols TOL_ROPE = {{1e-13, "ref rotates in double from double angles: one f32 rounding"},
                                 {1e-10, "f32 rotation of double angles: relative ~1e-7"},
                                 {1e-7, "angles in f32 (pos * base^(-2i/n_rot)): at position 1400 ~1e-4 rad, NMSE ~1e-8"},
                                 NONE};
static const ot_tols TOL_ROPE_FAR = {{1e-13, "ref rotates in double from double angles: one f32 rounding"},
                                     {1e-10, "the CPU computes angles in double: relative ~1e-7"},
                                     {1e-5, "f32 angles at position 1e5: error ~1e-2 rad on the fastest pairs"}, NONE};
static const ot_tols TOL_ATTENTION = {{1e-12, "ref scores, exp and sums in double; one f32 rounding of each output"},
                                      {1e-10, "scores, exp and sums in f32 against double: NMSE ~1e-12"},
                                      {1e-9, "scores, exp and sums in f32 in shader order: NMSE ~1e-12"},
                                      {1e-4, "FAST: few queries in f32 (~1e-14); more on bf16 pairs where the level has a bf16 dot (2^-9 relative per value): 2e-7..1.1e-5"}};
static const ot_tols TOL_EXACT_F32 = {{1e-13, "one f32 operation rounded once: |e| <= 2^-24 relative, NMSE <= 2^-48"},
                                      {0, "the same single f32 operation as ref"},
                                      {1e-14, "the same f32 operation; the shader may keep an fma's extra precision"},
                                      NONE};
static const ot_tols TOL_RELU = {{0, "max(x, 0) is exact"}, {0, "max(x, 0) is exact"}, {0, "max(x, 0) is exact"}, NONE};
static const ot_tols TOL_ACT = {{1e-13, "ref uses libm exp/tanh in float: a few ulp"},
                                {1e-10, "the CPU's vector exp (about 1 ulp) and f32 arithmetic"},
                                {1e-11, "exp/tanh in f32 on the device against libm: a few ulp"}, NONE};
static const ot_tols TOL_SOFTMAX = {{1e-12, "ref exp and sums in double; one f32 rounding"},
                                    {1e-10, "f32 exp and sums against double: relative ~1e-7"},
                                    {1e-10, "f32 exp and row sums in workgroup order: relative ~1e-7"}, NONE};
static const ot_tols TOL_ARGMAX = {T_EXACT, T_EXACT, T_EXACT, NONE};
static const ot_tols TOL_LSE = {{1e-5, "ref sums in double; rounding the result to f32 is ~1e-7 relative"},
                                {1e-5, "exp summed in f32 (blocked order): ~1e-6 relative over 262144 terms"},
                                {1e-5, "exp summed in f32 (tree order): ~1e-6 relative over 262144 terms"}, NONE};
static const ot_tols TOL_BITS = {T_EXACT, T_EXACT, T_EXACT, NONE};

/* ---- the table -------------------------------------------------------------------------- */

static const ot_entry TABLE[] = {
    {&OP_MATMUL, SH(MATMUL), WEIGHT_TYPES, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q4_1), T_Q4_1, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q5_0), T_Q5_0, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q8_0), T_Q8_0, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q5_1), T_Q5_1, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_F16), T_F16, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q4_K), T_Q4_K, TOL_MATMUL},
    {&OP_MATMUL, SH(MM_Q6_K), T_Q6_K, TOL_MATMUL},
    {&OP_GET_ROWS, SH(GET_ROWS), WEIGHT_TYPES, TOL_GET_ROWS},
    {&OP_GET_ROWS, SH(GET_ROWS_Q8_0), T_Q8_0, TOL_GET_ROWS},
    {&OP_RMS_NORM, SH(NORM), NULL, TOL_NORM},
    {&OP_LAYER_NORM, SH(NORM), NULL, TOL_NORM},
    {&OP_ROPE, SH(ROPE), NULL, TOL_ROPE},
    {&OP_ROPE, SH(ROPE_FAR), NULL, TOL_ROPE_FAR},
    {&OP_ATTENTION, SH(ATTENTION), NULL, TOL_ATTENTION},
    {&OP_ADD, SH(BINARY), NULL, TOL_EXACT_F32},
    {&OP_MUL, SH(BINARY), NULL, TOL_EXACT_F32},
    {&OP_SCALE, SH(UNARY), NULL, TOL_EXACT_F32},
    {&OP_SILU, SH(UNARY), NULL, TOL_ACT},
    {&OP_GELU, SH(UNARY), NULL, TOL_ACT},
    {&OP_RELU, SH(UNARY), NULL, TOL_RELU},
    {&OP_SWIGLU, SH(UNARY), NULL, TOL_ACT},
    {&OP_GEGLU, SH(UNARY), NULL, TOL_ACT},
    {&OP_SOFTMAX, SH(SOFTMAX), NULL, TOL_SOFTMAX},
    {&OP_ARGMAX, SH(ARGMAX), NULL, TOL_ARGMAX},
    {&OP_LSE_SELECT, SH(LSE), NULL, TOL_LSE},
    {&OP_CONVERT, SH(CONVERT), CONVERT_TYPES, TOL_BITS},
    {&OP_COPY2D, SH(COPY2D), NULL, TOL_BITS},
    {&OP_FILL2D, SH(FILL2D), NULL, TOL_BITS},
    /* last: an entry's seed is its index, so a new entry goes at the end and the others keep their cases */
    {&OP_MATMUL_GROUP, SH(MATMUL_GROUP), WEIGHT_TYPES, TOL_MATMUL},
    {&OP_MATMUL_ADD, SH(MATMUL_ADD), MATMUL_ADD_TYPES, TOL_MATMUL},
    {&OP_ROPE_PAIR, SH(ROPE_PAIR), NULL, TOL_ROPE},
    {&OP_MATMUL_GLU, SH(MATMUL_GLU), MATMUL_ADD_TYPES, TOL_MATMUL},
    {&OP_RMS_MATMUL_GROUP, SH(RMS_MATMUL_GROUP), MATMUL_ADD_TYPES, TOL_MATMUL},
    {&OP_RMS_MATMUL_GLU, SH(RMS_MATMUL_GLU), MATMUL_ADD_TYPES, TOL_MATMUL},
    {&OP_RMS_NORM_ADD, SH(RMS_NORM_ADD), NULL, TOL_NORM},
    {&OP_RMS_ROPE_PAIR, SH(RMS_ROPE_PAIR), NULL, TOL_ROPE},
    /* the post-norm add folded in too: the folded norms' shapes */
    {&OP_ADD_RMS_MATMUL_GROUP, SH(RMS_MATMUL_GROUP), MATMUL_ADD_TYPES, TOL_MATMUL},
    {&OP_ADD_RMS_MATMUL_GLU, SH(RMS_MATMUL_GLU), MATMUL_ADD_TYPES, TOL_MATMUL},
};

/* Every op of the backend contract has an entry (a new op must get one). */
static void check_every_op_listed(void) {
  static const char *ops[] = {"get_rows", "matmul", "rms_norm", "layer_norm", "rope",    "attention",  "add",
                              "mul",      "scale",  "silu",     "gelu",       "relu",    "swiglu",     "geglu",
                              "softmax",  "convert", "argmax",  "lse_select", "copy2d",  "fill2d", "matmul_group",
                              "matmul_add", "rope_pair", "matmul_glu", "rms_matmul_group", "rms_matmul_glu",
                              "rms_norm_add", "rms_rope_pair", "add_rms_matmul_group", "add_rms_matmul_glu"};
  for (size_t i = 0; i < N_(ops); i++) {
    int found = 0;
    for (size_t k = 0; k < N_(TABLE); k++) found |= strcmp(TABLE[k].op->name, ops[i]) == 0;
    CHECKF(found, "op %s has no entry in the table", ops[i]);
  }
  int n_weight = 0; /* and every weight type is in WEIGHT_TYPES */
  for (uint32_t t = 0; t < ICL_TYPE_COUNT; t++) n_weight += icl_type_is_weight(t);
  CHECKF(n_weight == (int)N_(WEIGHT_TYPES) - 1, "%d weight types, the table lists %d", n_weight,
         (int)N_(WEIGHT_TYPES) - 1);
  /* the training entries (backend.h "training"): each has its entries in the backward section (ops_bwd_defs.h) */
  static const char *train[][2] = {{"matmul_bwd", "matmul_bwd"}, {"norm_bwd", "layer_norm_bwd"},
                                   {"norm_bwd", "rms_norm_bwd"}, {"attention_bwd", "attention_bwd"},
                                   {"rope_bwd", "rope_bwd"},     {"gelu_bwd", "gelu_bwd"},
                                   {"relu_bwd", "relu_bwd"},     {"embed", "embed_fwd"},
                                   {"embed_bwd", "embed_bwd"},   {"sum_rows", "sum_rows"},
                                   {"smear", "smear_fwd"},       {"smear_bwd", "smear_bwd"},
                                   {"xent", "xent"},             {"optim_update", "optim_update"},
                                   {"attention_seqs", "attention_seqs"}, {"matmul_bwd_group", "matmul_bwd_group"},
                                   {"norm_fwd", "layer_norm_fwd"}, {"norm_fwd", "rms_norm_fwd"}};
  for (size_t i = 0; i < N_(train); i++) {
    int found = 0;
    for (size_t k = 0; k < N_(OB_TABLE); k++) found |= strcmp(OB_TABLE[k].op->name, train[i][1]) == 0;
    CHECKF(found, "training op %s has no %s entry in the backward table", train[i][0], train[i][1]);
  }
  const size_t n_train = 16; /* distinct entries in train[] (norm_bwd and norm_fwd twice) */
  /* the members that are not ops: name, the 7 buffer functions, counts, run_split (an execution entry: its test is
   * tests/train/test_train_slices.c) */
  CHECKF(N_(ops) + n_train == sizeof(icl_backend_ops) / sizeof(void *) - 10,
         "backend.h has ops the table does not know");
}

/* --types: the weight types matmul and get_rows run on (the other ops' types are not weight choices) */
static int only_types[ICL_TYPE_COUNT], types_filtered;

static int parse_types(const char *list) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list);
  types_filtered = 1;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int t = icl_type_from_name(tok);
    if (t < 0 || !icl_type_is_weight((uint32_t)t)) return fprintf(stderr, "--types: '%s' is not a weight type\n", tok), 0;
    only_types[t] = 1;
  }
  return 1;
}

/* The entry as it runs: with --types, matmul and get_rows keep only the listed types (kept holds
 * them); 0 when none is left. */
static int filter_entry(const ot_entry *e, ot_entry *out, uint32_t kept[ICL_TYPE_COUNT + 1]) {
  *out = *e;
  if (!types_filtered || (e->op != &OP_MATMUL && e->op != &OP_MATMUL_GROUP && e->op != &OP_MATMUL_ADD && e->op != &OP_MATMUL_GLU &&
                            e->op != &OP_GET_ROWS)) return 1;
  int n = 0;
  for (const uint32_t *t = e->types; *t != ICL_TYPE_COUNT; t++)
    if (only_types[*t]) kept[n++] = *t;
  kept[n] = ICL_TYPE_COUNT;
  out->types = kept;
  return n > 0;
}

static int parse_args(int argc, char **argv, const char **only_be, int *list) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) ot_quick = 1;
    else if (strcmp(argv[i], "--own-family") == 0) ot_vk_own = 1;
    else if (strcmp(argv[i], "--types") == 0 && i + 1 < argc) {
      if (!parse_types(argv[++i])) return 0;
    }
    else if (strcmp(argv[i], "--verbose") == 0) ot_verbose = 1;
    else if (strcmp(argv[i], "--list") == 0) *list = 1;
    else if (strcmp(argv[i], "--op") == 0 && i + 1 < argc) ot_only_op = argv[++i];
    else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) *only_be = argv[++i];
    else
      return fprintf(stderr, "usage: %s [--quick] [--verbose] [--list] [--op NAME] [--backend SUBSTR] [--own-family] "
                             "[--types T1,T2,...]\n", argv[0]), 0;
  }
  if (getenv("ICL_TEST_VERBOSE")) ot_verbose = 1;
  if (getenv("ICL_OPS_QUICK")) ot_quick = 1; /* the sanitizer build's ctest sets it (cmake/tests.cmake) */
  return 1;
}

int main(int argc, char **argv) {
  const char *only_be = NULL;
  int list = 0;
  if (!parse_args(argc, argv, &only_be, &list)) return 2;
  check_every_op_listed();
  if (list) return ot_list(TABLE, N_(TABLE)), ot_bwd_list(), t_done();
  if (!ot_open_targets(only_be)) return t_done();
  for (size_t k = 0; k < N_(TABLE); k++) {
    if (ot_only_op && strcmp(ot_only_op, TABLE[k].op->name) != 0) continue;
    ot_entry e;
    uint32_t kept[ICL_TYPE_COUNT + 1];
    if (!filter_entry(&TABLE[k], &e, kept)) {
      printf("%-11s entry %2zu: none of its types in --types, not run\n", TABLE[k].op->name, k);
      continue;
    }
    double t0 = ot_now();
    clock_t c0 = clock(); /* the process's CPU time, every thread: on lavapipe its shader compiles too */
    long runs = ot_run_entry(&e, 100 * (uint64_t)k);
    printf("%-11s entry %2zu: %5ld runs in %6.2f s (cpu %.2f s)\n", TABLE[k].op->name, k, runs, ot_now() - t0,
           (double)(clock() - c0) / CLOCKS_PER_SEC);
  }
  ot_bwd_run();
  ot_close_targets();
  return t_done();
}
