/* Tensor element types (ggml/GGUF numbering) and their block layouts. */
#ifndef ICL_TYPES_H
#define ICL_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum icl_type {
  ICL_TYPE_F32 = 0,
  ICL_TYPE_F16 = 1,
  ICL_TYPE_Q4_0 = 2,
  ICL_TYPE_Q4_1 = 3,
  ICL_TYPE_Q5_0 = 6,
  ICL_TYPE_Q5_1 = 7,
  ICL_TYPE_Q8_0 = 8,
  ICL_TYPE_Q8_1 = 9,
  ICL_TYPE_Q2_K = 10,
  ICL_TYPE_Q3_K = 11,
  ICL_TYPE_Q4_K = 12,
  ICL_TYPE_Q5_K = 13,
  ICL_TYPE_Q6_K = 14,
  ICL_TYPE_Q8_K = 15,
  ICL_TYPE_I8 = 24,
  ICL_TYPE_I16 = 25,
  ICL_TYPE_I32 = 26,
  ICL_TYPE_I64 = 27,
  ICL_TYPE_F64 = 28,
  ICL_TYPE_BF16 = 30,
  ICL_TYPE_COUNT = 31
} icl_type;

/* Returns 1 if t is a type id icl knows the layout of, else 0. */
int icl_type_known(uint32_t t);

/* Returns the type's name ("Q4_1") or "?" for unknown ids. */
const char *icl_type_name(uint32_t t);

/* Parses a type name ("q4_1", "F16"), case-insensitive; returns -1 if unknown. */
int icl_type_from_name(const char *name);

/* Elements per block (1 for plain types, 32 or 256 for quantized ones); 0 if unknown. */
int64_t icl_type_block_elems(uint32_t t);

/* Bytes per block; 0 if unknown. */
size_t icl_type_block_bytes(uint32_t t);

/* Bytes of a row of n elements; n must be a multiple of the block size (returns 0 otherwise). */
size_t icl_type_row_bytes(uint32_t t, int64_t n);

/* Returns 1 if the type can be a weight matrix for matmul and get_rows. */
int icl_type_is_weight(uint32_t t);

/* fp16 and bf16 conversions (IEEE half, round to nearest even). */
float icl_f16_to_f32(uint16_t h);
uint16_t icl_f32_to_f16(float f);
float icl_bf16_to_f32(uint16_t h);
uint16_t icl_f32_to_bf16(float f);

#endif
