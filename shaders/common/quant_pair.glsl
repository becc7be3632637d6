// Two weight types in one shader: the grouped mat-vec over members of different types (a Q5_0 q and k beside a
// Q8_0 v, as in Gemma 3 files). quant.glsl is included once per type with its per-type names renamed; dq_chunk and
// row_bytes then pick the decoder of the current member's type, mtype() (0: TYPE_<A>, 1: TYPE2_<B>; the including
// shader defines it, uniform across a workgroup). Each decoder is quant.glsl's own text, so a member's rows decode
// exactly as in its type's lone kernel. Block types only (the first type must not be F32).
#define dq_chunk dq_chunk_a
#define row_bytes row_bytes_a
#define fetch_chunk fetch_chunk_a
#define fetch_block fetch_block_a
#define fetch_head fetch_head_a
#define fetch_32 fetch_32_a
#define fetch_scales fetch_scales_a
#define scale_min_k4 scale_min_k4_a
#define scale_k3 scale_k3_a
#define pair pair_a
#include "quant.glsl"
#undef dq_chunk
#undef row_bytes
#undef fetch_chunk
#undef fetch_block
#undef fetch_head
#undef fetch_32
#undef fetch_scales
#undef scale_min_k4
#undef scale_k3
#undef pair
#undef QK
#undef QB
#undef TYPE_F16
#undef TYPE_BF16
#undef TYPE_Q4_0
#undef TYPE_Q4_1
#undef TYPE_Q5_0
#undef TYPE_Q5_1
#undef TYPE_Q8_0
#undef TYPE_Q2_K
#undef TYPE_Q3_K
#undef TYPE_Q4_K
#undef TYPE_Q5_K
#undef TYPE_Q6_K
#if defined(TYPE2_Q4_0)
#define TYPE_Q4_0 1
#elif defined(TYPE2_Q4_1)
#define TYPE_Q4_1 1
#elif defined(TYPE2_Q5_0)
#define TYPE_Q5_0 1
#elif defined(TYPE2_Q5_1)
#define TYPE_Q5_1 1
#elif defined(TYPE2_Q8_0)
#define TYPE_Q8_0 1
#elif defined(TYPE2_Q2_K)
#define TYPE_Q2_K 1
#elif defined(TYPE2_Q3_K)
#define TYPE_Q3_K 1
#elif defined(TYPE2_Q4_K)
#define TYPE_Q4_K 1
#elif defined(TYPE2_Q5_K)
#define TYPE_Q5_K 1
#elif defined(TYPE2_Q6_K)
#define TYPE_Q6_K 1
#else
#error "quant_pair.glsl: no TYPE2_<NAME> (a block type) given"
#endif
#define dq_chunk dq_chunk_b
#define row_bytes row_bytes_b
#define fetch_chunk fetch_chunk_b
#define fetch_block fetch_block_b
#define fetch_head fetch_head_b
#define fetch_32 fetch_32_b
#define fetch_scales fetch_scales_b
#define scale_min_k4 scale_min_k4_b
#define scale_k3 scale_k3_b
#define pair pair_b
#include "quant.glsl"
#undef dq_chunk
#undef row_bytes
#undef fetch_chunk
#undef fetch_block
#undef fetch_head
#undef fetch_32
#undef fetch_scales
#undef scale_min_k4
#undef scale_k3
#undef pair

void dq_chunk(uint row, uint ch, uint valid, out vec4 v[8]) {
  if (mtype() == 0u) dq_chunk_a(row, ch, valid, v);
  else dq_chunk_b(row, ch, valid, v);
}
uint row_bytes(uint cols) { return mtype() == 0u ? row_bytes_a(cols) : row_bytes_b(cols); }
