/* The operand checks the op wrappers share (ops.c, ops_train.c): each fails with a message naming the op, the
 * operand and what was expected. */
#ifndef ICL_OPS_CHECK_H
#define ICL_OPS_CHECK_H

#include <inttypes.h>
#include <stdio.h>

#include "ops.h"

/* A view must exist, point into a buffer, have a known type and positive extents. */
static inline int chk_view(const char *op, const char *name, const icl_dt *t, icl_error *err) {
  if (!t || !t->buf) return icl_error_set(err, ICL_EINVAL, "%s: %s: missing tensor", op, name);
  if (!icl_type_known(t->type)) return icl_error_set(err, ICL_EINVAL, "%s: %s: unknown type %u", op, name, t->type);
  for (int i = 0; i < 4; i++)
    if (t->ne[i] < 1) {
      char s[96];
      return icl_error_set(err, ICL_EINVAL, "%s: %s: empty or negative shape %s", op, name,
                           icl_dt_shape_str(t, s, sizeof s));
    }
  return ICL_OK;
}

static inline int chk_type(const char *op, const char *name, const icl_dt *t, uint32_t type, icl_error *err) {
  int rc = chk_view(op, name, t, err);
  if (rc) return rc;
  if (t->type != type)
    return icl_error_set(err, ICL_EINVAL, "%s: %s: expected type %s, got %s", op, name, icl_type_name(type),
                         icl_type_name(t->type));
  return ICL_OK;
}

static inline int chk_f32(const char *op, const char *name, const icl_dt *t, icl_error *err) {
  return chk_type(op, name, t, ICL_TYPE_F32, err);
}

/* got must equal want; what says where want came from ("w's columns"). */
static inline int chk_dim(const char *op, const char *name, const icl_dt *t, const char *dim, int64_t got, int64_t want,
                   const char *what, icl_error *err) {
  if (got == want) return ICL_OK;
  char s[96];
  return icl_error_set(err, ICL_EINVAL, "%s: %s: expected %s = %" PRId64 " (%s), got %" PRId64 " in shape %s", op,
                       name, dim, want, what, got, icl_dt_shape_str(t, s, sizeof s));
}

static inline int chk_same_shape(const char *op, const char *an, const icl_dt *a, const char *bn, const icl_dt *b,
                          icl_error *err) {
  for (int i = 0; i < 4; i++)
    if (a->ne[i] != b->ne[i]) {
      char sa[96], sb[96];
      return icl_error_set(err, ICL_EINVAL, "%s: %s: expected the shape of %s %s, got %s", op, bn, an,
                           icl_dt_shape_str(a, sa, sizeof sa), icl_dt_shape_str(b, sb, sizeof sb));
    }
  return ICL_OK;
}

/* Two views of the same buffer overlap (the op does not allow in-place use). */
static inline int overlaps(const icl_dt *a, const icl_dt *b) {
  if (a->buf != b->buf) return 0;
  size_t ea = a->offset + icl_type_row_bytes(a->type, a->ne[0]) * (size_t)icl_dt_nrows(a);
  size_t eb = b->offset + icl_type_row_bytes(b->type, b->ne[0]) * (size_t)icl_dt_nrows(b);
  return a->offset < eb && b->offset < ea;
}

static inline int chk_no_alias(const char *op, const char *an, const icl_dt *a, const char *bn, const icl_dt *b,
                        icl_error *err) {
  if (overlaps(a, b)) return icl_error_set(err, ICL_EINVAL, "%s: %s overlaps %s (not allowed for this op)", op, bn, an);
  return ICL_OK;
}

#define TRY(x)                                                                                                 \
  do {                                                                                                         \
    int rc_ = (x);                                                                                             \
    if (rc_) return rc_;                                                                                       \
  } while (0)

#endif
