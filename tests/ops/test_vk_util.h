/* Helpers for the Vulkan op tests (test_vk_*.c): device views with guard bytes before and after
 * (sentinels that must survive every op), upload/download, NMSE + NaN/Inf comparison against the
 * reference, and the validation-message check. Header-only: each test is one executable. */
#ifndef ICL_TEST_VK_UTIL_H
#define ICL_TEST_VK_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "icl/devices.h"
#include "ref.h"
#include "testutil.h"
#include "vk.h"

#define VT_GUARD 256      /* sentinel bytes after every view */
#define VT_PATTERN 0xA7u  /* sentinel byte: 0xA7A7A7A7 is a large negative float, not NaN */

/* A device tensor: a view at offset `pre` inside a buffer with guard bytes on both sides. */
typedef struct vt {
  icl_dt dt;
  size_t pre, bytes, total;
} vt;

static icl_backend *vt_be;

/* Creates the backend once; exits the test with a message (status 1) when there is no device. */
static inline icl_backend *vt_backend(void) {
  if (vt_be) return vt_be;
  icl_error err;
  if (icl_vk_backend_new(-1, &vt_be, &err)) {
    fprintf(stderr, "no Vulkan backend: %s\n", err.msg);
    exit(1);
  }
  const icl_device_info *d = icl_vk_backend_device(vt_be);
  const char *shape = getenv("ICL_VK_SHAPE");
  printf("device: %s (%s, subgroup %u)%s%s\n", d->name, d->type, d->subgroup_size, shape ? ", kernel shapes: " : "",
         shape ? shape : "");
  return vt_be;
}

/* Switches to the other family of kernel shapes (ICL_VK_SHAPE, see vk/ops.h) with a fresh
 * backend, so the GPU-shaped kernels are tested on lavapipe and the CPU-shaped ones on GPUs. */
static inline void vt_other_shape(void) {
  int cpu = strcmp(icl_vk_backend_device(vt_backend())->type, "cpu") == 0;
  vt_be->ops->destroy(vt_be);
  vt_be = NULL;
  setenv("ICL_VK_SHAPE", cpu ? "gpu" : "cpu", 1);
  vt_backend();
}

static inline void *vt_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of host memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* A view of type t and shape ne; pre bytes before it (a multiple of 4, or of the block size for
 * weight types), all bytes outside the view set to the sentinel. */
static inline vt vt_new(uint32_t t, int64_t ne0, int64_t ne1, int64_t ne2, size_t pre) {
  icl_backend *be = vt_backend();
  icl_error err;
  vt v = {{NULL, pre, t, {ne0, ne1, ne2, 1}}, pre, 0, 0};
  v.bytes = icl_type_row_bytes(t, ne0) * (size_t)(ne1 * ne2);
  v.total = pre + v.bytes + VT_GUARD;
  if (be->ops->buf_alloc(be, v.total, ICL_BUF_ACT, &v.dt.buf, &err)) {
    fprintf(stderr, "buf_alloc(%zu): %s\n", v.total, err.msg);
    exit(1);
  }
  unsigned char *fill = vt_xmalloc(v.total);
  memset(fill, VT_PATTERN, v.total);
  CHECK(be->ops->write(be, v.dt.buf, 0, fill, v.total, &err) == ICL_OK);
  free(fill);
  return v;
}

static inline void vt_free(vt *v) {
  if (v->dt.buf) vt_be->ops->buf_free(vt_be, v->dt.buf);
  v->dt.buf = NULL;
}

static inline void vt_upload(const vt *v, const void *src) {
  icl_error err;
  int rc = vt_be->ops->write(vt_be, v->dt.buf, v->pre, src, v->bytes, &err);
  CHECKF(rc == ICL_OK, "write: %s", err.msg);
}

static inline void vt_download(const vt *v, void *dst) {
  icl_error err;
  int rc = vt_be->ops->read(vt_be, v->dt.buf, v->pre, dst, v->bytes, &err);
  CHECKF(rc == ICL_OK, "read: %s", err.msg);
}

/* 1 when every byte outside the view still holds the sentinel. */
static inline int vt_guards_ok(const vt *v) {
  unsigned char *all = vt_xmalloc(v->total);
  icl_error err;
  int ok = vt_be->ops->read(vt_be, v->dt.buf, 0, all, v->total, &err) == ICL_OK;
  for (size_t i = 0; ok && i < v->total; i++)
    if ((i < v->pre || i >= v->pre + v->bytes) && all[i] != VT_PATTERN) ok = 0;
  free(all);
  return ok;
}

/* A random f32 view in [lo, hi) with the given seed; the host copy is returned in *host. */
static inline vt vt_rand(int64_t ne0, int64_t ne1, int64_t ne2, uint64_t seed, float lo, float hi, float **host) {
  vt v = vt_new(ICL_TYPE_F32, ne0, ne1, ne2, 12);
  float *h = vt_xmalloc(v.bytes);
  t_rand_fill(h, ne0 * ne1 * ne2, seed, lo, hi);
  vt_upload(&v, h);
  *host = h;
  return v;
}

static inline int64_t vt_count_nonfinite(const float *x, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++) bad += !isfinite(x[i]);
  return bad;
}

/* Downloads an f32 output, compares with ref by NMSE <= thr, checks NaN/Inf and the guards. */
static inline double vt_expect(const char *what, const vt *out, const float *ref, double thr) {
  int64_t n = (int64_t)(out->bytes / 4);
  float *got = vt_xmalloc(out->bytes);
  vt_download(out, got);
  double e = icl_nmse(ref, got, n);
  int64_t bad = vt_count_nonfinite(got, n);
  CHECKF(bad == 0, "%s: %lld non-finite outputs", what, (long long)bad);
  CHECKF(e <= thr, "%s: NMSE %.3g > %.3g", what, e, thr);
  CHECKF(vt_guards_ok(out), "%s: guard bytes around the output were overwritten", what);
  if (getenv("ICL_TEST_VERBOSE")) printf("  %-48s NMSE %.3g (limit %.1g)\n", what, e, thr);
  free(got);
  return e;
}

/* A random weight matrix of type t, cols x rows; *raw receives the host bytes (for the
 * reference ops). The view sits 3 blocks into its buffer, so 18/22/34-byte block types start at
 * a 2-byte-aligned offset. */
static inline vt vt_weights(uint32_t t, int64_t cols, int64_t rows, uint64_t seed, void **raw) {
  size_t pre = icl_type_block_bytes(t) * 3;
  vt v = vt_new(t, cols, rows, 1, pre);
  *raw = vt_xmalloc(v.bytes);
  icl_ref_random_weights(t, *raw, cols * rows, seed);
  vt_upload(&v, *raw);
  return v;
}

/* One matmul case of the FAST-path tests (coopmat, intdot): weights of type t [cols x rows] (seed), activations
 * [cols x n] in [-1, 1) (seed + 1); with acc, y starts random (seed + 2) and matmul_add runs instead of matmul.
 * oracle holds the float64 reference (y's start added); what names the case for messages. */
typedef struct vt_mm {
  vt w, x, y;
  void *raw;
  float *xh, *y0, *oracle;
  char what[96];
} vt_mm;

static inline vt_mm vt_mm_run(const char *path, uint32_t t, int64_t cols, int64_t rows, int64_t n, int acc,
                              uint64_t seed) {
  icl_error err;
  vt_mm c = {.y0 = NULL};
  c.oracle = vt_xmalloc((size_t)(rows * n) * sizeof(float));
  c.w = vt_weights(t, cols, rows, seed, &c.raw);
  c.x = vt_rand(cols, n, 1, seed + 1, -1.0f, 1.0f, &c.xh);
  c.y = acc ? vt_rand(rows, n, 1, seed + 2, -1.0f, 1.0f, &c.y0) : vt_new(ICL_TYPE_F32, rows, n, 1, 4);
  int rc = acc ? vt_be->ops->matmul_add(vt_be, &c.w.dt, &c.x.dt, &c.y.dt, &err)
               : vt_be->ops->matmul(vt_be, &c.w.dt, &c.x.dt, &c.y.dt, &err);
  snprintf(c.what, sizeof c.what, "%s %s %s [%lld x %lld] x %lld", path, acc ? "matmul_add" : "matmul",
           icl_type_name(t), (long long)cols, (long long)rows, (long long)n);
  CHECKF(rc == ICL_OK, "%s: %s", c.what, err.msg);
  icl_ref_matmul(t, c.raw, cols, rows, c.xh, n, c.oracle);
  for (int64_t i = 0; acc && i < rows * n; i++) c.oracle[i] += c.y0[i];
  return c;
}

/* Checks that the inputs' guards survived, then frees the case. */
static inline void vt_mm_free(vt_mm *c) {
  CHECKF(vt_guards_ok(&c->w) && vt_guards_ok(&c->x), "%s: inputs' guards changed", c->what);
  vt_free(&c->w), vt_free(&c->x), vt_free(&c->y);
  free(c->raw), free(c->xh), free(c->y0), free(c->oracle);
}

/* With ICL_VK_MATMUL set to a FAST path, EXACT precision must still run the f32 kernel: t [cols x 192] x 67 within
 * the f32 kernels' NMSE (~1e-14; 1e-9 allowed). Leaves the backend at FAST precision. */
static inline void vt_exact_stays_f32(const char *path, uint32_t t, int64_t cols) {
  vt_be->precision = ICL_PRECISION_EXACT;
  CHECK(!strcmp(icl_vk_backend_matmul_path(vt_be, ICL_PRECISION_EXACT), "tiled"));
  vt_mm c = vt_mm_run(path, t, cols, 192, 67, 0, 5);
  char what[160];
  snprintf(what, sizeof what, "EXACT with ICL_VK_MATMUL=%s: %s", path, c.what);
  vt_expect(what, &c.y, c.oracle, 1e-9);
  vt_mm_free(&c);
  vt_be->precision = ICL_PRECISION_FAST;
}

static inline double vt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Destroys the backend and checks that the validation layer reported nothing. */
static inline int vt_finish(void) {
  if (vt_be) vt_be->ops->destroy(vt_be);
  vt_be = NULL;
  int msgs = icl_vk_validation_messages();
  CHECKF(msgs == 0, "%d validation-layer messages", msgs);
  return t_done();
}

#endif
