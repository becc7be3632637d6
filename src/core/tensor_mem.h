/* Data buffers of host tensors (tensor_mem.c): zeroed, freed only through tensor_mem_free (never free()). */
#ifndef ICL_TENSOR_MEM_H
#define ICL_TENSOR_MEM_H

#include <stddef.h>

/* Buffers of this many bytes or more are mapped on their own and recycled (tensor_mem.c). */
#define TENSOR_MEM_LARGE ((size_t)32 << 20)

/* A zeroed buffer of bytes (> 0), or NULL when out of memory. */
float *tensor_mem_alloc(size_t bytes);

/* Frees a buffer of tensor_mem_alloc; NULL is ignored. */
void tensor_mem_free(float *p);

/* Large freed buffers kept for reuse right now (tests). */
int tensor_mem_cached(void);

#endif
