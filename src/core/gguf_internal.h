/* Helpers shared by the GGUF reader and writer (not public). */
#ifndef ICL_GGUF_INTERNAL_H
#define ICL_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define ICL_GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
#define ICL_GGUF_DEFAULT_ALIGNMENT 32u
#define ICL_GGUF_N_VTYPES 13      /* value type ids are 0..12 */

/* Bytes of one value of a fixed-size type; 0 for string, array and unknown ids. */
size_t icl_gguf_vtype_size(uint32_t t);

#endif
