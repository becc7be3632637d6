/* Host tensors: allocation and the operations behind icl.tensor (float32, row-major, up to 4 dims). */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/tensor.h"
#include "tensor_mem.h"
#include "tensor_ops.h"

#define MAXD ICL_TENSOR_MAXDIM

/* ---- allocation ------------------------------------------------------------------------------------------ */

static int64_t numel_limit = ICL_TENSOR_MAX_NUMEL; /* lowered by fuzz targets (icl_tensor_limit_numel) */

void icl_tensor_limit_numel(int64_t max) { numel_limit = max > 0 && max < ICL_TENSOR_MAX_NUMEL ? max : ICL_TENSOR_MAX_NUMEL; }

/* Element count of a shape, or -1 if a dimension is negative or the shape is too large. Zero-sized dimensions
 * count as 1 in the bound, so that no product of dimensions (strides, outer/inner splits) can overflow. */
static int64_t shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1, bound = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || shape[i] > numel_limit) return -1;
    int64_t d = shape[i] ? shape[i] : 1;
    if (bound > numel_limit / d) return -1;
    bound *= d, n *= shape[i];
  }
  return n;
}

int icl_tensor_check_shape(int ndim, const int64_t *shape, const char *what, icl_error *err) {
  char s[160];
  if (ndim < 0 || ndim > MAXD)
    return icl_error_set(err, ICL_EINVAL, "%s: %d dimensions (expected 0..%d)", what, ndim, MAXD);
  if (shape_numel(ndim, shape) < 0)
    return icl_error_set(err, ICL_EINVAL, "%s: bad shape %s (each dimension >= 0, product of the non-zero "
                         "dimensions <= 2^40)", what, icl_tensor_shape_str(ndim, shape, s, sizeof s));
  return ICL_OK;
}

icl_tensor *icl_tensor_new(int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > MAXD) return NULL;
  int64_t n = shape_numel(ndim, shape);
  if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(float)) return NULL;
  icl_tensor *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->data = tensor_mem_alloc((n ? (size_t)n : 1) * sizeof(float));
  if (!t->data) {
    free(t);
    return NULL;
  }
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->numel = n;
  return t;
}

void icl_tensor_free(icl_tensor *t) {
  if (!t) return;
  tensor_mem_free(t->data);
  free(t);
}

icl_tensor *icl_tensor_clone(const icl_tensor *t) {
  icl_tensor *c = icl_tensor_new(t->ndim, t->shape);
  if (c && t->numel) memcpy(c->data, t->data, (size_t)t->numel * sizeof(float));
  return c;
}

const char *icl_tensor_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
  size_t k = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* Allocates *out or reports ENOMEM with the shape. */
static int alloc_out(int ndim, const int64_t *shape, icl_tensor **out, icl_error *err) {
  *out = NULL;
  if (icl_tensor_check_shape(ndim, shape, "result", err)) return ICL_EINVAL;
  *out = icl_tensor_new(ndim, shape);
  if (*out) return ICL_OK;
  char s[96];
  return icl_error_set(err, ICL_ENOMEM, "cannot allocate a tensor of shape %s",
                       icl_tensor_shape_str(ndim, shape, s, sizeof s));
}

int icl_tensor_full(int ndim, const int64_t *shape, float v, icl_tensor **out, icl_error *err) {
  if (icl_tensor_check_shape(ndim, shape, "tensor", err)) return ICL_EINVAL;
  int rc = alloc_out(ndim, shape, out, err);
  for (int64_t i = 0; rc == ICL_OK && i < (*out)->numel; i++) (*out)->data[i] = v;
  return rc;
}

int icl_tensor_reshape(const icl_tensor *a, int ndim, const int64_t *shape, icl_tensor **out, icl_error *err) {
  char s1[96], s2[96];
  if (icl_tensor_check_shape(ndim, shape, "reshape", err)) return ICL_EINVAL;
  if (shape_numel(ndim, shape) != a->numel)
    return icl_error_set(err, ICL_EINVAL, "cannot reshape %s (%lld elements) to %s",
                         icl_tensor_shape_str(a->ndim, a->shape, s1, sizeof s1), (long long)a->numel,
                         icl_tensor_shape_str(ndim < 0 || ndim > MAXD ? 0 : ndim, shape, s2, sizeof s2));
  int rc = alloc_out(ndim, shape, out, err);
  if (rc == ICL_OK && a->numel) memcpy((*out)->data, a->data, (size_t)a->numel * sizeof(float));
  return rc;
}

/* ---- elementwise ----------------------------------------------------------------------------------------- */

static float binop1(icl_binop op, float x, float y) {
  switch (op) {
  case ICL_BIN_ADD: return x + y;
  case ICL_BIN_SUB: return x - y;
  case ICL_BIN_MUL: return x * y;
  case ICL_BIN_DIV: return x / y;
  case ICL_BIN_POW: return powf(x, y);
  }
  assert(0 && "unknown binop");
  return 0;
}

/* Right-aligns a shape into 4 dims padded with leading 1s; fills contiguous strides (0 where the size is 1). */
static void pad4(const icl_tensor *t, int64_t sh[MAXD], int64_t st[MAXD]) {
  int off = MAXD - t->ndim;
  for (int i = 0; i < MAXD; i++) sh[i] = i < off ? 1 : t->shape[i - off];
  int64_t s = 1;
  for (int i = MAXD - 1; i >= 0; i--) {
    st[i] = sh[i] == 1 ? 0 : s;
    s *= sh[i];
  }
}

int icl_tensor_binop(const icl_tensor *a, const icl_tensor *b, icl_binop op, icl_tensor **out, icl_error *err) {
  int64_t sa[MAXD], ta[MAXD], sb[MAXD], tb[MAXD], so[MAXD];
  pad4(a, sa, ta);
  pad4(b, sb, tb);
  for (int i = 0; i < MAXD; i++) {
    if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1) {
      char s1[96], s2[96];
      return icl_error_set(err, ICL_EINVAL, "shapes %s and %s do not broadcast",
                           icl_tensor_shape_str(a->ndim, a->shape, s1, sizeof s1),
                           icl_tensor_shape_str(b->ndim, b->shape, s2, sizeof s2));
    }
    so[i] = sa[i] == 1 ? sb[i] : sa[i];
  }
  int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  int rc = alloc_out(nd, so + MAXD - nd, out, err);
  if (rc) return rc;
  float *o = (*out)->data;
  for (int64_t i0 = 0; i0 < so[0]; i0++)
    for (int64_t i1 = 0; i1 < so[1]; i1++)
      for (int64_t i2 = 0; i2 < so[2]; i2++) {
        const float *pa = a->data + i0 * ta[0] + i1 * ta[1] + i2 * ta[2];
        const float *pb = b->data + i0 * tb[0] + i1 * tb[1] + i2 * tb[2];
        for (int64_t i3 = 0; i3 < so[3]; i3++) *o++ = binop1(op, pa[i3 * ta[3]], pb[i3 * tb[3]]);
      }
  return ICL_OK;
}

int icl_tensor_binop_scalar(const icl_tensor *a, float s, int scalar_left, icl_binop op, icl_tensor **out,
                            icl_error *err) {
  int rc = alloc_out(a->ndim, a->shape, out, err);
  for (int64_t i = 0; rc == ICL_OK && i < a->numel; i++)
    (*out)->data[i] = scalar_left ? binop1(op, s, a->data[i]) : binop1(op, a->data[i], s);
  return rc;
}

static float unop1(icl_unop op, float x) {
  switch (op) {
  case ICL_UN_EXP: return expf(x);
  case ICL_UN_LOG: return logf(x);
  case ICL_UN_SQRT: return sqrtf(x);
  case ICL_UN_ABS: return fabsf(x);
  case ICL_UN_NEG: return -x;
  }
  assert(0 && "unknown unop");
  return 0;
}

int icl_tensor_unop(const icl_tensor *a, icl_unop op, icl_tensor **out, icl_error *err) {
  int rc = alloc_out(a->ndim, a->shape, out, err);
  for (int64_t i = 0; rc == ICL_OK && i < a->numel; i++) (*out)->data[i] = unop1(op, a->data[i]);
  return rc;
}

/* ---- reductions ------------------------------------------------------------------------------------------ */

/* Views a as [outer, shape[dim], inner]. */
static void split3(const icl_tensor *a, int dim, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < dim; i++) *outer *= a->shape[i];
  for (int i = dim + 1; i < a->ndim; i++) *inner *= a->shape[i];
}

static int check_dim(const icl_tensor *a, int dim, icl_error *err) {
  if (dim >= 0 && dim < a->ndim) return ICL_OK;
  return icl_error_set(err, ICL_EINVAL, "dimension %d out of range 1..%d", dim + 1, a->ndim);
}

/* Reduces n values at stride st. */
static double reduce1(const float *x, int64_t n, int64_t st, icl_redop op) {
  double acc = 0, best = n ? x[0] : 0;
  int64_t arg = 0;
  switch (op) {
  case ICL_RED_SUM:
  case ICL_RED_MEAN:
    for (int64_t i = 0; i < n; i++) acc += x[i * st];
    return op == ICL_RED_MEAN ? acc / (double)n : acc;
  case ICL_RED_NORM:
    for (int64_t i = 0; i < n; i++) acc += (double)x[i * st] * x[i * st];
    return sqrt(acc);
  case ICL_RED_MAX:
  case ICL_RED_ARGMAX:
  case ICL_RED_MIN:
  case ICL_RED_ARGMIN: {
    int want_max = op == ICL_RED_MAX || op == ICL_RED_ARGMAX;
    for (int64_t i = 1; i < n; i++) {
      double v = x[i * st];
      if (want_max ? v > best : v < best) best = v, arg = i;
    }
    return op == ICL_RED_MAX || op == ICL_RED_MIN ? best : (double)arg;
  }
  case ICL_RED_VAR:
  case ICL_RED_STD: {
    double mean = reduce1(x, n, st, ICL_RED_MEAN);
    for (int64_t i = 0; i < n; i++) acc += (x[i * st] - mean) * (x[i * st] - mean);
    return op == ICL_RED_VAR ? acc / (double)n : sqrt(acc / (double)n);
  }
  }
  assert(0 && "unknown reduction");
  return 0;
}

static int needs_elements(icl_redop op) { return op != ICL_RED_SUM && op != ICL_RED_NORM; }

int icl_tensor_reduce(const icl_tensor *a, int dim, int keepdim, icl_redop op, icl_tensor **out, icl_error *err) {
  if (check_dim(a, dim, err)) return ICL_EINVAL;
  int64_t n = a->shape[dim], outer, inner, shape[MAXD];
  if (n == 0 && needs_elements(op))
    return icl_error_set(err, ICL_EINVAL, "reduction over empty dimension %d", dim + 1);
  split3(a, dim, &outer, &inner);
  int nd = 0;
  for (int i = 0; i < a->ndim; i++)
    if (i != dim) shape[nd++] = a->shape[i];
    else if (keepdim) shape[nd++] = 1;
  int rc = alloc_out(nd, shape, out, err);
  for (int64_t o = 0; rc == ICL_OK && o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      (*out)->data[o * inner + i] = (float)reduce1(a->data + o * n * inner + i, n, inner, op);
  return rc;
}

int icl_tensor_reduce_all(const icl_tensor *a, icl_redop op, double *out, icl_error *err) {
  if (a->numel == 0 && needs_elements(op)) return icl_error_set(err, ICL_EINVAL, "reduction of an empty tensor");
  *out = a->numel ? reduce1(a->data, a->numel, 1, op) : 0;
  return ICL_OK;
}

int icl_tensor_softmax(const icl_tensor *a, int dim, int logsm, icl_tensor **out, icl_error *err) {
  if (check_dim(a, dim, err)) return ICL_EINVAL;
  int64_t n = a->shape[dim], outer, inner;
  split3(a, dim, &outer, &inner);
  int rc = alloc_out(a->ndim, a->shape, out, err);
  for (int64_t o = 0; rc == ICL_OK && n && o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      const float *x = a->data + o * n * inner + i;
      float *y = (*out)->data + o * n * inner + i;
      double mx = reduce1(x, n, inner, ICL_RED_MAX), sum = 0;
      for (int64_t j = 0; j < n; j++) sum += exp(x[j * inner] - mx);
      for (int64_t j = 0; j < n; j++)
        y[j * inner] = (float)(logsm ? x[j * inner] - mx - log(sum) : exp(x[j * inner] - mx) / sum);
    }
  return rc;
}

/* ---- products -------------------------------------------------------------------------------------------- */

int icl_tensor_matmul(const icl_tensor *a, const icl_tensor *b, icl_tensor **out, icl_error *err) {
  char s1[96], s2[96];
  int ok = a->ndim >= 1 && a->ndim <= 2 && b->ndim >= 1 && b->ndim <= 2 && !(a->ndim == 1 && b->ndim == 1);
  int64_t m = a->ndim == 2 ? a->shape[0] : 1, k = ok ? a->shape[a->ndim - 1] : 0;
  int64_t kb = ok ? b->shape[0] : 0, n = b->ndim == 2 ? b->shape[1] : 1;
  if (!ok || k != kb)
    return icl_error_set(err, ICL_EINVAL, "matmul of %s and %s: expected [m,k] x [k,n] (or one side 1-D)",
                         icl_tensor_shape_str(a->ndim, a->shape, s1, sizeof s1),
                         icl_tensor_shape_str(b->ndim, b->shape, s2, sizeof s2));
  int64_t shape[2];
  int nd = 0;
  if (a->ndim == 2) shape[nd++] = m;
  if (b->ndim == 2) shape[nd++] = n;
  int rc = alloc_out(nd, shape, out, err);
  for (int64_t i = 0; rc == ICL_OK && i < m; i++) {
    float *c = (*out)->data + i * n;
    for (int64_t p = 0; p < k; p++) {
      float x = a->data[i * k + p];
      const float *brow = b->data + p * n;
      for (int64_t j = 0; j < n; j++) c[j] += x * brow[j];
    }
  }
  return rc;
}

int icl_tensor_dot(const icl_tensor *a, const icl_tensor *b, double *out, icl_error *err) {
  if (a->numel != b->numel)
    return icl_error_set(err, ICL_EINVAL, "dot of %lld and %lld elements", (long long)a->numel, (long long)b->numel);
  double acc = 0;
  for (int64_t i = 0; i < a->numel; i++) acc += (double)a->data[i] * b->data[i];
  *out = acc;
  return ICL_OK;
}

/* ---- layout ---------------------------------------------------------------------------------------------- */

int icl_tensor_transpose(const icl_tensor *a, int d1, int d2, icl_tensor **out, icl_error *err) {
  if (check_dim(a, d1, err) || check_dim(a, d2, err)) return ICL_EINVAL;
  int64_t st[MAXD] = {0}, sh[MAXD] = {1, 1, 1, 1}, s = 1, shape[MAXD];
  for (int i = a->ndim - 1; i >= 0; i--) st[i] = s, s *= a->shape[i];
  for (int i = 0; i < a->ndim; i++) shape[i] = a->shape[i];
  shape[d1] = a->shape[d2], shape[d2] = a->shape[d1];
  int64_t t = st[d1];
  st[d1] = st[d2], st[d2] = t;
  int rc = alloc_out(a->ndim, shape, out, err);
  if (rc) return rc;
  int off = MAXD - a->ndim; /* right-align into 4 loops */
  int64_t ps[MAXD] = {0};
  for (int i = 0; i < a->ndim; i++) sh[i + off] = shape[i], ps[i + off] = st[i];
  float *o = (*out)->data;
  for (int64_t i0 = 0; i0 < sh[0]; i0++)
    for (int64_t i1 = 0; i1 < sh[1]; i1++)
      for (int64_t i2 = 0; i2 < sh[2]; i2++)
        for (int64_t i3 = 0; i3 < sh[3]; i3++) *o++ = a->data[i0 * ps[0] + i1 * ps[1] + i2 * ps[2] + i3 * ps[3]];
  return ICL_OK;
}

/* Copies rows idx[j] (or from+j when idx is NULL) along dim of a into a tensor of n rows. */
static int select_rows(const icl_tensor *a, int dim, int64_t from, const int64_t *idx, int64_t n, icl_tensor **out,
                       icl_error *err) {
  int64_t outer, inner, shape[MAXD];
  split3(a, dim, &outer, &inner);
  for (int i = 0; i < a->ndim; i++) shape[i] = i == dim ? n : a->shape[i];
  int rc = alloc_out(a->ndim, shape, out, err);
  for (int64_t o = 0; rc == ICL_OK && o < outer; o++)
    for (int64_t j = 0; j < n; j++) {
      int64_t r = idx ? idx[j] : from + j;
      memcpy((*out)->data + (o * n + j) * inner, a->data + (o * a->shape[dim] + r) * inner,
             (size_t)inner * sizeof(float));
    }
  return rc;
}

int icl_tensor_slice(const icl_tensor *a, int dim, int64_t from, int64_t to, icl_tensor **out, icl_error *err) {
  if (check_dim(a, dim, err)) return ICL_EINVAL;
  if (from < 0 || to < from || to > a->shape[dim])
    return icl_error_set(err, ICL_EINVAL, "slice %lld..%lld out of range 1..%lld of dimension %d", (long long)from + 1,
                         (long long)to, (long long)a->shape[dim], dim + 1);
  return select_rows(a, dim, from, NULL, to - from, out, err);
}

int icl_tensor_index_select(const icl_tensor *a, int dim, const int64_t *idx, int64_t n, icl_tensor **out,
                            icl_error *err) {
  if (check_dim(a, dim, err)) return ICL_EINVAL;
  for (int64_t j = 0; j < n; j++)
    if (idx[j] < 0 || idx[j] >= a->shape[dim])
      return icl_error_set(err, ICL_EINVAL, "index %lld out of range 1..%lld of dimension %d", (long long)idx[j] + 1,
                           (long long)a->shape[dim], dim + 1);
  return select_rows(a, dim, 0, idx, n, out, err);
}

int icl_tensor_gather(const icl_tensor *a, int dim, int idx_ndim, const int64_t *idx_shape, const int64_t *idx,
                      icl_tensor **out, icl_error *err) {
  if (check_dim(a, dim, err)) return ICL_EINVAL;
  if (idx_ndim != a->ndim)
    return icl_error_set(err, ICL_EINVAL, "gather: index has %d dimensions, tensor %d", idx_ndim, a->ndim);
  for (int i = 0; i < a->ndim; i++)
    if (i != dim && idx_shape[i] > a->shape[i])
      return icl_error_set(err, ICL_EINVAL, "gather: index size %lld exceeds tensor size %lld in dimension %d",
                           (long long)idx_shape[i], (long long)a->shape[i], i + 1);
  int rc = alloc_out(idx_ndim, idx_shape, out, err);
  if (rc) return rc;
  int64_t ast[MAXD], s = 1, c[MAXD] = {0};
  for (int i = a->ndim - 1; i >= 0; i--) ast[i] = s, s *= a->shape[i];
  for (int64_t p = 0; p < (*out)->numel; p++) {
    int64_t r = p, off = 0;
    for (int i = a->ndim - 1; i >= 0; i--) c[i] = r % idx_shape[i], r /= idx_shape[i];
    if (idx[p] < 0 || idx[p] >= a->shape[dim]) {
      icl_tensor_free(*out), *out = NULL;
      return icl_error_set(err, ICL_EINVAL, "gather: index %lld out of range 1..%lld", (long long)idx[p] + 1,
                           (long long)a->shape[dim]);
    }
    c[dim] = idx[p];
    for (int i = 0; i < a->ndim; i++) off += c[i] * ast[i];
    (*out)->data[p] = a->data[off];
  }
  return ICL_OK;
}

int icl_tensor_cat(const icl_tensor *const *ts, int n, int dim, icl_tensor **out, icl_error *err) {
  if (n < 1) return icl_error_set(err, ICL_EINVAL, "cat of an empty list");
  if (check_dim(ts[0], dim, err)) return ICL_EINVAL;
  int64_t shape[MAXD], total = 0, outer, inner;
  for (int k = 0; k < n; k++) {
    int same = ts[k]->ndim == ts[0]->ndim;
    for (int i = 0; same && i < ts[0]->ndim; i++) same = i == dim || ts[k]->shape[i] == ts[0]->shape[i];
    if (!same) {
      char s1[96], s2[96];
      return icl_error_set(err, ICL_EINVAL, "cat: tensor %d has shape %s, tensor 1 %s (only dimension %d may differ)",
                           k + 1, icl_tensor_shape_str(ts[k]->ndim, ts[k]->shape, s1, sizeof s1),
                           icl_tensor_shape_str(ts[0]->ndim, ts[0]->shape, s2, sizeof s2), dim + 1);
    }
    if (total > ICL_TENSOR_MAX_NUMEL - ts[k]->shape[dim])
      return icl_error_set(err, ICL_EINVAL, "cat: dimension %d of the result exceeds 2^40", dim + 1);
    total += ts[k]->shape[dim];
  }
  for (int i = 0; i < ts[0]->ndim; i++) shape[i] = i == dim ? total : ts[0]->shape[i];
  split3(ts[0], dim, &outer, &inner);
  int rc = alloc_out(ts[0]->ndim, shape, out, err);
  float *o = rc ? NULL : (*out)->data;
  for (int64_t r = 0; o && r < outer; r++)
    for (int k = 0; k < n; k++) {
      size_t len = (size_t)(ts[k]->shape[dim] * inner);
      memcpy(o, ts[k]->data + r * len, len * sizeof(float));
      o += len;
    }
  return rc;
}

int icl_tensor_stack(const icl_tensor *const *ts, int n, int dim, icl_tensor **out, icl_error *err) {
  if (n < 1) return icl_error_set(err, ICL_EINVAL, "stack of an empty list");
  const icl_tensor *t0 = ts[0];
  if (t0->ndim >= MAXD) return icl_error_set(err, ICL_EINVAL, "stack: result would have more than %d dimensions", MAXD);
  if (dim < 0 || dim > t0->ndim)
    return icl_error_set(err, ICL_EINVAL, "stack: dimension %d out of range 1..%d", dim + 1, t0->ndim + 1);
  for (int k = 1; k < n; k++) {
    int same = ts[k]->ndim == t0->ndim;
    for (int i = 0; same && i < t0->ndim; i++) same = ts[k]->shape[i] == t0->shape[i];
    if (!same) return icl_error_set(err, ICL_EINVAL, "stack: tensor %d differs in shape from tensor 1", k + 1);
  }
  int64_t shape[MAXD], outer = 1, inner = 1;
  for (int i = 0, j = 0; i <= t0->ndim; i++) shape[i] = i == dim ? n : t0->shape[j++];
  for (int i = 0; i < t0->ndim; i++) *(i < dim ? &outer : &inner) *= t0->shape[i];
  int rc = alloc_out(t0->ndim + 1, shape, out, err);
  for (int64_t r = 0; rc == ICL_OK && r < outer; r++)
    for (int k = 0; k < n; k++)
      memcpy((*out)->data + (r * n + k) * inner, ts[k]->data + r * inner, (size_t)inner * sizeof(float));
  return rc;
}
