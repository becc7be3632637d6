/* Host tensor operations (internal to icl; the Lua binding's icl.tensor methods call these).
 * Every operation allocates its result; dimensions and indices are 0-based; errors are ICL_EINVAL (shapes or
 * arguments that do not fit, with a message naming them) or ICL_ENOMEM. Sums accumulate in double. */
#ifndef ICL_TENSOR_OPS_H
#define ICL_TENSOR_OPS_H

#include <stdint.h>

#include "icl/tensor.h"

typedef enum icl_binop { ICL_BIN_ADD, ICL_BIN_SUB, ICL_BIN_MUL, ICL_BIN_DIV, ICL_BIN_POW } icl_binop;
typedef enum icl_unop { ICL_UN_EXP, ICL_UN_LOG, ICL_UN_SQRT, ICL_UN_ABS, ICL_UN_NEG } icl_unop;
typedef enum icl_redop {
  ICL_RED_SUM, ICL_RED_MEAN, ICL_RED_MAX, ICL_RED_MIN, ICL_RED_ARGMAX, ICL_RED_ARGMIN, ICL_RED_VAR, ICL_RED_STD,
  ICL_RED_NORM /* L2 */
} icl_redop;

/* The largest product of a shape's non-zero dimensions (2^40): bounds every size and stride computation. */
#define ICL_TENSOR_MAX_NUMEL ((int64_t)1 << 40)

/* Checks ndim (0..4) and shape (dims >= 0, product of the non-zero ones <= ICL_TENSOR_MAX_NUMEL); what names the
 * caller in the message. Every constructor, reshape and file header goes through it. */
int icl_tensor_check_shape(int ndim, const int64_t *shape, const char *what, icl_error *err);

/* Lowers the shape bound for this process (fuzz targets: keeps single allocations small); <= 0 restores it. */
void icl_tensor_limit_numel(int64_t max);

/* Formats a shape as "[2, 3]" into buf (returns buf). */
const char *icl_tensor_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

/* Allocates a tensor filled with v. */
int icl_tensor_full(int ndim, const int64_t *shape, float v, icl_tensor **out, icl_error *err);

/* Copy with a new shape of the same element count. */
int icl_tensor_reshape(const icl_tensor *a, int ndim, const int64_t *shape, icl_tensor **out, icl_error *err);

/* a op b with numpy broadcasting (dimensions aligned from the right; equal, or one of them 1). */
int icl_tensor_binop(const icl_tensor *a, const icl_tensor *b, icl_binop op, icl_tensor **out, icl_error *err);

/* a op s (scalar_left = 0) or s op a (scalar_left = 1). */
int icl_tensor_binop_scalar(const icl_tensor *a, float s, int scalar_left, icl_binop op, icl_tensor **out,
                            icl_error *err);

/* Elementwise function. */
int icl_tensor_unop(const icl_tensor *a, icl_unop op, icl_tensor **out, icl_error *err);

/* Reduction along dim (removed, or kept with size 1 when keepdim); ARGMAX/ARGMIN give 0-based indices as floats;
 * VAR and STD are population statistics (divide by n). */
int icl_tensor_reduce(const icl_tensor *a, int dim, int keepdim, icl_redop op, icl_tensor **out, icl_error *err);

/* Reduction over all elements; ARGMAX/ARGMIN give the 0-based flat index. EINVAL for an empty tensor (except SUM,
 * NORM). */
int icl_tensor_reduce_all(const icl_tensor *a, icl_redop op, double *out, icl_error *err);

/* Softmax (or log-softmax when logsm) along dim. */
int icl_tensor_softmax(const icl_tensor *a, int dim, int logsm, icl_tensor **out, icl_error *err);

/* Matrix product: [m,k]x[k,n] -> [m,n]; [m,k]x[k] -> [m]; [k]x[k,n] -> [n]. */
int icl_tensor_matmul(const icl_tensor *a, const icl_tensor *b, icl_tensor **out, icl_error *err);

/* Sum of a[i]*b[i] over all elements (equal element counts). */
int icl_tensor_dot(const icl_tensor *a, const icl_tensor *b, double *out, icl_error *err);

/* Swaps two dimensions. */
int icl_tensor_transpose(const icl_tensor *a, int d1, int d2, icl_tensor **out, icl_error *err);

/* Elements [from, to) along dim. */
int icl_tensor_slice(const icl_tensor *a, int dim, int64_t from, int64_t to, icl_tensor **out, icl_error *err);

/* The n entries idx[0..n) along dim, in that order. */
int icl_tensor_index_select(const icl_tensor *a, int dim, const int64_t *idx, int64_t n, icl_tensor **out,
                            icl_error *err);

/* torch.gather: out has the index's shape (same ndim as a, each other dimension <= a's);
 * out[p] = a[p with coordinate dim replaced by idx[p]]. */
int icl_tensor_gather(const icl_tensor *a, int dim, int idx_ndim, const int64_t *idx_shape, const int64_t *idx,
                      icl_tensor **out, icl_error *err);

/* Concatenation along dim (other dimensions equal). */
int icl_tensor_cat(const icl_tensor *const *ts, int n, int dim, icl_tensor **out, icl_error *err);

/* Stacks n equal-shape tensors along a new dimension dim (0..ndim). */
int icl_tensor_stack(const icl_tensor *const *ts, int n, int dim, icl_tensor **out, icl_error *err);

#endif
