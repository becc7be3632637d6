/* The blocks' f16 fields and the K types' packed sub-block scales, shared by the dequantizer (ref_quant.c) and
 * the integer-dot reference (ref_matmul_q8.c) so both read the bytes one way. */
#ifndef ICL_REF_KQUANT_H
#define ICL_REF_KQUANT_H

#include <stdint.h>

#include "ref.h"

/* A little-endian f16 at p (a block's d, m or dmin) as a float. */
static inline float icl_ref_rd_f16(const uint8_t *p) { return icl_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block (its 12 packed bytes s). */
void icl_ref_k_scale_min(const uint8_t *s, int j, int *sc, int *m);

/* Q3_K's signed 6-bit scale j (0..15) from its 12 packed bytes s: low nibble from bytes 0..7, top two bits from
 * bytes 8..11. */
int icl_ref_q3k_scale(const uint8_t *s, int j);

#endif
