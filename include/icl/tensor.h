/* Host tensors: float32, up to 4 dimensions, row-major (last dimension contiguous, as numpy). */
#ifndef ICL_TENSOR_H
#define ICL_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "icl/icl.h"

#define ICL_TENSOR_MAXDIM 4

typedef struct icl_tensor {
  int ndim;                         /* 0..4 (0 = scalar) */
  int64_t shape[ICL_TENSOR_MAXDIM]; /* numpy order: shape[ndim-1] is contiguous */
  int64_t numel;
  float *data; /* numel floats, owned */
} icl_tensor;

/* Allocates a zero-filled tensor; NULL on allocation failure or bad shape. */
icl_tensor *icl_tensor_new(int ndim, const int64_t *shape);

/* Frees; NULL allowed. */
void icl_tensor_free(icl_tensor *t);

/* Deep copy; NULL on allocation failure. */
icl_tensor *icl_tensor_clone(const icl_tensor *t);

/* Writes one tensor as .npy (float32, C order), atomically. */
int icl_tensor_save_npy(const icl_tensor *t, const char *path, icl_error *err);

/* Reads a .npy file (float32 or float64 converted, C order, up to 4 dims). */
int icl_tensor_load_npy(const char *path, icl_tensor **out, icl_error *err);

/* Writes n named tensors as one safetensors file (dtype F32), atomically. */
int icl_tensor_save_safetensors(const char *path, int n, const char *const *names, const icl_tensor *const *ts,
                                icl_error *err);

/* Reads every tensor of a safetensors file (F32, F16, BF16 converted to f32): malloc'd arrays of names and tensors. */
int icl_tensor_load_safetensors(const char *path, int *n, char ***names, icl_tensor ***ts, icl_error *err);

#endif
