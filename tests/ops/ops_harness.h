/* The runner of the table-driven op test: the backends under test (ref, each CPU SIMD level, each
 * Vulkan kernel family), device tensors with guard bytes, and the comparison of every output with
 * the float64 oracle (ref) or with the ref backend's result (everything else). */
#ifndef ICL_OPS_HARNESS_H
#define ICL_OPS_HARNESS_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_internal.h"
#include "ops.h"
#include "ops_table.h"
#include "testutil.h"

#define OT_GUARD 256
#define OT_GUARD_BYTE 0xA7u /* 0xA7A7A7A7 is a large negative float, not NaN */

enum { OT_REF, OT_CPU, OT_VK };

/* A backend under test and how its results are judged. */
typedef struct ot_target {
  char name[64];
  icl_backend *be;
  int kind, fast;
  double secs; /* time spent in this target's runs */
} ot_target;

enum { OT_MAX_TARGETS = 12 };
static ot_target ot_targets[OT_MAX_TARGETS];
static int ot_n_targets;
static int ot_verbose, ot_quick;
static const char *ot_only_op;

static void *ot_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static size_t ot_bytes(const ot_host *h) {
  return icl_type_row_bytes(h->type, h->ne[0]) * (size_t)(h->ne[1] * h->ne[2] * h->ne[3]);
}
static int64_t ot_nelem(const ot_host *h) { return h->ne[0] * h->ne[1] * h->ne[2] * h->ne[3]; }

static double ot_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- device tensors with guard bytes ----------------------------------------------------- */

typedef struct ot_dev {
  icl_dt dt;
  size_t pre, bytes, total;
} ot_dev;

/* Bytes before a view: >= OT_GUARD; weights an odd number of blocks (18/34-byte blocks then start
 * 2-byte aligned), f32 views 16-byte aligned unless the case asks for unaligned ones. */
static size_t ot_pre(uint32_t type, int unaligned) {
  if (icl_type_is_weight(type) && type != ICL_TYPE_F32) {
    size_t bb = icl_type_block_bytes(type), nb = OT_GUARD / bb + 1;
    return (nb | 1) * bb;
  }
  return OT_GUARD + (unaligned ? 4 : 0);
}

/* A device view of h's type and shape; its bytes are h->data (or the guard pattern), everything
 * around it the guard pattern. */
static ot_dev ot_upload(icl_backend *be, const ot_host *h, int unaligned) {
  ot_dev d = {.dt = {.type = h->type, .ne = {h->ne[0], h->ne[1], h->ne[2], h->ne[3]}}};
  d.pre = ot_pre(h->type, unaligned), d.bytes = ot_bytes(h), d.total = d.pre + d.bytes + OT_GUARD;
  d.dt.offset = d.pre;
  icl_error err;
  unsigned char *all = ot_xmalloc(d.total);
  memset(all, OT_GUARD_BYTE, d.total);
  if (h->data) memcpy(all + d.pre, h->data, d.bytes);
  if (be->ops->buf_alloc(be, d.total, ICL_BUF_ACT, &d.dt.buf, &err) ||
      be->ops->write(be, d.dt.buf, 0, all, d.total, &err)) {
    fprintf(stderr, "device tensor of %zu bytes: %s\n", d.total, err.msg);
    exit(1);
  }
  free(all);
  return d;
}

/* Reads the view into dst (bytes); returns 0 when a guard byte changed or the read failed. */
static int ot_download(icl_backend *be, const ot_dev *d, void *dst) {
  unsigned char *all = ot_xmalloc(d->total);
  icl_error err;
  int ok = be->ops->read(be, d->dt.buf, 0, all, d->total, &err) == ICL_OK;
  if (!ok) fprintf(stderr, "read: %s\n", err.msg);
  for (size_t i = 0; ok && i < d->total; i++)
    if ((i < d->pre || i >= d->pre + d->bytes) && all[i] != OT_GUARD_BYTE) ok = 0;
  if (dst) memcpy(dst, all + d->pre, d->bytes);
  free(all);
  return ok;
}

/* ---- values and comparisons -------------------------------------------------------------- */

static double ot_value(uint32_t type, const void *p, int64_t i) {
  if (type == ICL_TYPE_I32) return ((const int32_t *)p)[i];
  if (type == ICL_TYPE_F16) {
    _Float16 h;
    memcpy(&h, (const uint16_t *)p + i, 2);
    return (double)h;
  }
  return ((const float *)p)[i];
}

/* Non-finite expected values must be matched exactly; NMSE over the finite ones (a finite expected
 * value that came out non-finite makes it infinite). zeros: expected zeros must stay zeros. */
static double ot_nmse(const ot_host *h, const void *got, const double *want, int zeros) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0, n = ot_nelem(h); i < n; i++) {
    double g = ot_value(h->type, got, i), w = want[i];
    if (!isfinite(w)) {
      if (!(g == w || (isnan(g) && isnan(w)))) return INFINITY;
      continue;
    }
    if (!isfinite(g) || (zeros && (w == 0.0) != (g == 0.0))) return INFINITY;
    num += (g - w) * (g - w), den += w * w;
  }
  return den > 0.0 ? num / den : (num > 0.0 ? INFINITY : 0.0);
}

/* Largest error of an lse_select output relative to its tolerance (<= 1 passes): the selected
 * entries must be equal, the log-sum-exp column within v + v/10 |want|. */
static double ot_lse_err(const ot_host *h, const void *got, const double *want, double v) {
  int64_t w0 = h->ne[0];
  double worst = 0.0;
  for (int64_t i = 0, n = ot_nelem(h); i < n; i++) {
    double g = ot_value(h->type, got, i), w = want[i];
    if (i % w0 != w0 - 1 || !isfinite(w)) {
      if (g != w) return INFINITY;
      continue;
    }
    double e = fabs(g - w) / (v + 0.1 * v * fabs(w));
    worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
  }
  return worst;
}

/* 1 when every element of got equals want exactly. */
static int ot_exact(const ot_host *h, const void *got, const double *want) {
  for (int64_t i = 0, n = ot_nelem(h); i < n; i++)
    if (ot_value(h->type, got, i) != want[i]) return 0;
  return 1;
}

/* ---- naming a case ------------------------------------------------------------------------ */

/* "matmul q4_0 tail K=576 rows=40 tokens=2 in_place" into buf. */
static const char *ot_case_name(const ot_case *c, char *buf, size_t n) {
  const ot_op *op = c->e->op;
  size_t k = (size_t)snprintf(buf, n, "%s %s %s", op->name, icl_type_name(c->type), c->s->cls);
  const char *d = op->dims;
  for (int i = 0; d && *d && k < n; i++) {
    size_t len = strcspn(d, ",");
    if (*d == '-') (void)0; /* unused slot */
    else if (i < 6) k += (size_t)snprintf(buf + k, n - k, " %.*s=%" PRId64, (int)len, d, c->s->n[i]);
    else k += (size_t)snprintf(buf + k, n - k, " %.*s=%g", (int)len, d, c->s->f);
    d += len + (d[len] == ',');
  }
  const char *f = op->flags ? op->flags : "";
  for (int bit = 0; k < n && bit < 16; bit++) {
    size_t len = strcspn(f, ",");
    int set = (c->s->flags >> bit) & 1;
    if (set && bit == 8) k += (size_t)snprintf(buf + k, n - k, " unaligned");
    else if (set && len) k += (size_t)snprintf(buf + k, n - k, " %.*s", (int)len, f);
    f += len + (f[len] == ',');
  }
  return buf;
}

#endif
