/* Element types: names and block layouts (GGUF / ggml numbering). */
#include <string.h>
#include <strings.h>

#include "icl/types.h"

typedef struct type_info {
  const char *name;
  int64_t block_elems;
  size_t block_bytes;
  int is_weight;
} type_info;

static const type_info TYPES[ICL_TYPE_COUNT] = {
    [ICL_TYPE_F32] = {"F32", 1, 4, 1},      [ICL_TYPE_F16] = {"F16", 1, 2, 1},
    [ICL_TYPE_Q4_0] = {"Q4_0", 32, 18, 1},  [ICL_TYPE_Q4_1] = {"Q4_1", 32, 20, 1},
    [ICL_TYPE_Q5_0] = {"Q5_0", 32, 22, 1},  [ICL_TYPE_Q5_1] = {"Q5_1", 32, 24, 1},
    [ICL_TYPE_Q8_0] = {"Q8_0", 32, 34, 1},  [ICL_TYPE_Q8_1] = {"Q8_1", 32, 36, 0},
    [ICL_TYPE_Q2_K] = {"Q2_K", 256, 84, 1}, [ICL_TYPE_Q3_K] = {"Q3_K", 256, 110, 1},
    [ICL_TYPE_Q4_K] = {"Q4_K", 256, 144, 1}, [ICL_TYPE_Q5_K] = {"Q5_K", 256, 176, 1},
    [ICL_TYPE_Q6_K] = {"Q6_K", 256, 210, 1}, [ICL_TYPE_Q8_K] = {"Q8_K", 256, 292, 0},
    [ICL_TYPE_I8] = {"I8", 1, 1, 0},        [ICL_TYPE_I16] = {"I16", 1, 2, 0},
    [ICL_TYPE_I32] = {"I32", 1, 4, 0},      [ICL_TYPE_I64] = {"I64", 1, 8, 0},
    [ICL_TYPE_F64] = {"F64", 1, 8, 0},      [ICL_TYPE_BF16] = {"BF16", 1, 2, 1},
};

int icl_type_known(uint32_t t) { return t < ICL_TYPE_COUNT && TYPES[t].name != NULL; }

const char *icl_type_name(uint32_t t) { return icl_type_known(t) ? TYPES[t].name : "?"; }

int icl_type_from_name(const char *name) {
  for (int t = 0; t < ICL_TYPE_COUNT; t++)
    if (TYPES[t].name && strcasecmp(TYPES[t].name, name) == 0) return t;
  return -1;
}

int64_t icl_type_block_elems(uint32_t t) { return icl_type_known(t) ? TYPES[t].block_elems : 0; }

size_t icl_type_block_bytes(uint32_t t) { return icl_type_known(t) ? TYPES[t].block_bytes : 0; }

size_t icl_type_row_bytes(uint32_t t, int64_t n) {
  if (!icl_type_known(t) || n < 0 || n % TYPES[t].block_elems != 0) return 0;
  return (size_t)(n / TYPES[t].block_elems) * TYPES[t].block_bytes;
}

int icl_type_is_weight(uint32_t t) { return icl_type_known(t) && TYPES[t].is_weight; }

float icl_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: renormalize */
      int e = -1;
      do { e++; mant <<= 1; } while (!(mant & 0x400));
      bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t icl_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
  if (absx < 0x38800000u) { /* subnormal or zero in f16 */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t half = m >> shift, rem = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

float icl_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

uint16_t icl_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
