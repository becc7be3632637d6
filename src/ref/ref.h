/* Scalar C reference ops: the oracle every backend is tested against. Plain loops, no threads,
 * no SIMD, double accumulation where it matters. Shapes as in backend.h ([innermost, ...]). */
#ifndef ICL_REF_H
#define ICL_REF_H

#include <stdint.h>

#include "backend.h"

/* Dequantizes n elements (a multiple of the type's block size) of weight type t into f32. */
void icl_ref_dequant(uint32_t t, const void *src, float *dst, int64_t n);

/* Quantizes n f32 elements (a multiple of the block size) to type t by round-to-nearest. */
void icl_ref_quantize(uint32_t t, const float *src, void *dst, int64_t n);

/* Fills nbytes worth of rows of type t with random but valid data (finite scales of sane size). */
void icl_ref_random_weights(uint32_t t, void *dst, int64_t n_elems, uint64_t seed);

/* out[cols, n] = rows ids of w[cols, rows] of type t. */
void icl_ref_get_rows(uint32_t t, const void *w, int64_t cols, const int32_t *ids, int64_t n, float *out);

/* y[rows, n] = x[cols, n] . w[cols, rows]^T, w of type t. */
void icl_ref_matmul(uint32_t t, const void *w, int64_t cols, int64_t rows, const float *x, int64_t n, float *y);

/* One 32-element block of activations as the FAST integer-dot paths quantize it: d = max|x| / 127, codes
 * q = x * (1 / d) rounded half to even (0 when d is 0), s = d * sum(q). */
void icl_ref_quantize_q8_block(const float *x, int8_t q[32], float *d, float *s);

/* y[rows, n] = x[cols, n] . w^T as the FAST integer-dot paths compute it, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q3_K,
 * Q4_K, Q5_K and Q6_K: x quantized per 32-element block (icl_ref_quantize_q8_block), an exact int32 dot per block
 * (Q3_K, Q6_K: each 16-element half's dot times its integer scale), then in f32, block by block:
 * acc += dot * (dw * dx), then acc += mw * sx (types with a minimum). ICL_EUNSUPPORTED for other types or cols not
 * a multiple of the type's block. */
int icl_ref_matmul_q8(uint32_t t, const void *w, int64_t cols, int64_t rows, const float *x, int64_t n, float *y);

/* RMSNorm per row of d; w may be NULL. y may equal x. */
void icl_ref_rms_norm(const float *x, const float *w, int64_t d, int64_t rows, float eps, float *y);

/* LayerNorm per row of d; w, b may be NULL. y may equal x. */
void icl_ref_layer_norm(const float *x, const float *w, const float *b, int64_t d, int64_t rows, float eps, float *y);

/* RoPE in place on x[hd, nh, n] at positions pos[n]; the first n_rot dims of each head. */
void icl_ref_rope(float *x, int64_t hd, int64_t nh, int64_t n, const int32_t *pos, int n_rot, float base, int mode);

/* Causal attention (see backend.h): q[hd, nh, nq], k/v[hd, nkvh, nkv], mask/pattern [nkv, nq, nh] or NULL. */
void icl_ref_attention(const float *q, const float *k, const float *v, int64_t hd, int64_t nh, int64_t nkvh,
                       int64_t nq, int64_t nkv, const icl_attn_params *p, const float *mask, float *out,
                       float *pattern);

/* y = a (+|*) b with b of b_rows rows (1 = broadcast, or = rows). */
void icl_ref_add(const float *a, const float *b, int64_t d, int64_t rows, int64_t b_rows, float *y);
void icl_ref_mul(const float *a, const float *b, int64_t d, int64_t rows, int64_t b_rows, float *y);

/* Elementwise unary ops over n elements. */
void icl_ref_scale(const float *x, float s, int64_t n, float *y);
void icl_ref_silu(const float *x, int64_t n, float *y);
void icl_ref_gelu(const float *x, int64_t n, float *y); /* tanh approximation */
void icl_ref_relu(const float *x, int64_t n, float *y); /* max(x, 0) */
void icl_ref_swiglu(const float *gate, const float *up, int64_t n, float *y);
void icl_ref_geglu(const float *gate, const float *up, int64_t n, float *y);

/* Row softmax over d. */
void icl_ref_softmax(const float *x, int64_t d, int64_t rows, float *y);

/* Converts n elements between F32 and F16 (types as icl_type). */
void icl_ref_convert(uint32_t src_type, const void *src, uint32_t dst_type, void *dst, int64_t n);

/* out[r] = argmax of row r (first maximum). */
void icl_ref_argmax(const float *x, int64_t d, int64_t rows, int32_t *out);

/* out[r*(k+1) + j] = x[r*d + ids[j]] (j < k), out[r*(k+1) + k] = log sum_i exp(x[r*d + i]) (in double). */
void icl_ref_lse_select(const float *x, int64_t d, int64_t rows, const int32_t *ids, int64_t k, float *out);

/* Normalized mean squared error mse(a, b) / mse(a, 0) (0 if both are zero). */
double icl_nmse(const float *ref, const float *got, int64_t n);

#endif
