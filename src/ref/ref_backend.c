/* The reference backend: the backend contract on host memory through the scalar src/ref ops.
 * Slow by design; it lets the whole forward pass and its hooks run on the oracle ops. */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ref.h"

struct icl_buf {
  size_t size;
  unsigned char *data;
};

static void *ptr(const icl_dt *t) { return t->buf->data + t->offset; }
static float *fp(const icl_dt *t) { return (float *)ptr(t); }

static int rb_alloc(icl_backend *be, size_t size, int usage, icl_buf **out, icl_error *err) {
  (void)be; (void)usage;
  icl_buf *b = calloc(1, sizeof *b);
  if (b) b->data = calloc(size ? size : 1, 1);
  if (!b || !b->data) {
    free(b);
    return icl_error_set(err, ICL_ENOMEM, "ref backend: cannot allocate %zu bytes", size);
  }
  b->size = size;
  *out = b;
  return ICL_OK;
}

static void rb_free(icl_backend *be, icl_buf *b) {
  (void)be;
  if (!b) return;
  free(b->data);
  free(b);
}

static int rb_write(icl_backend *be, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err) {
  (void)be;
  if (off > b->size || n > b->size - off)
    return icl_error_set(err, ICL_EINVAL, "ref backend: write of %zu bytes at %zu past buffer of %zu", n, off, b->size);
  memcpy(b->data + off, src, n);
  return ICL_OK;
}

static int rb_read(icl_backend *be, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err) {
  (void)be;
  if (off > b->size || n > b->size - off)
    return icl_error_set(err, ICL_EINVAL, "ref backend: read of %zu bytes at %zu past buffer of %zu", n, off, b->size);
  memcpy(dst, b->data + off, n);
  return ICL_OK;
}

static int rb_sync(icl_backend *be, icl_error *err) { (void)be; (void)err; return ICL_OK; }
static void rb_destroy(icl_backend *be) { free(be); }

static int rb_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  (void)err; (void)be;
  icl_ref_get_rows(w->type, ptr(w), w->ne[0], (const int32_t *)ptr(ids), icl_dt_nelem(ids), fp(out));
  return ICL_OK;
}

static int rb_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)err; (void)be;
  icl_ref_matmul(w->type, ptr(w), w->ne[0], w->ne[1], fp(x), icl_dt_nrows(x), fp(y));
  return ICL_OK;
}

static int rb_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err) {
  (void)err; (void)be;
  icl_ref_rms_norm(fp(x), w ? fp(w) : NULL, x->ne[0], icl_dt_nrows(x), eps, fp(y));
  return ICL_OK;
}

static int rb_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                         const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_layer_norm(fp(x), w ? fp(w) : NULL, b ? fp(b) : NULL, x->ne[0], icl_dt_nrows(x), eps, fp(y));
  return ICL_OK;
}

static int rb_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode,
                   icl_error *err) {
  (void)be; (void)err;
  icl_ref_rope(fp(x), x->ne[0], x->ne[1], x->ne[2] * x->ne[3], (const int32_t *)ptr(pos), n_rot, base, mode);
  return ICL_OK;
}

static int rb_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                        const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err) {
  (void)be; (void)err;
  icl_ref_attention(fp(q), fp(k), fp(v), q->ne[0], q->ne[1], k->ne[1], q->ne[2], k->ne[2], p,
                    mask ? fp(mask) : NULL, fp(out), pattern ? fp(pattern) : NULL);
  return ICL_OK;
}

static int rb_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_add(fp(a), fp(b), a->ne[0], icl_dt_nrows(a), icl_dt_nrows(b), fp(y));
  return ICL_OK;
}

static int rb_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_mul(fp(a), fp(b), a->ne[0], icl_dt_nrows(a), icl_dt_nrows(b), fp(y));
  return ICL_OK;
}

static int rb_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_scale(fp(x), s, icl_dt_nelem(x), fp(y));
  return ICL_OK;
}

static int rb_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_silu(fp(x), icl_dt_nelem(x), fp(y));
  return ICL_OK;
}

static int rb_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_gelu(fp(x), icl_dt_nelem(x), fp(y));
  return ICL_OK;
}

static int rb_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_relu(fp(x), icl_dt_nelem(x), fp(y));
  return ICL_OK;
}

static int rb_swiglu(icl_backend *be, const icl_dt *g, const icl_dt *u, const icl_dt *y, icl_error *err) {
  (void)err; (void)be;
  icl_ref_swiglu(fp(g), fp(u), icl_dt_nelem(g), fp(y));
  return ICL_OK;
}

static int rb_geglu(icl_backend *be, const icl_dt *g, const icl_dt *u, const icl_dt *y, icl_error *err) {
  (void)err; (void)be;
  icl_ref_geglu(fp(g), fp(u), icl_dt_nelem(g), fp(y));
  return ICL_OK;
}

static int rb_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_softmax(fp(x), x->ne[0], icl_dt_nrows(x), fp(y));
  return ICL_OK;
}

static int rb_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err) {
  (void)be; (void)err;
  icl_ref_convert(x->type, ptr(x), y->type, ptr(y), icl_dt_nelem(x));
  return ICL_OK;
}

static int rb_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err) {
  (void)be, (void)err;
  icl_ref_lse_select(fp(x), x->ne[0], icl_dt_nrows(x), (const int32_t *)ptr(ids), icl_dt_nelem(ids), fp(out));
  return ICL_OK;
}

static int rb_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err) {
  (void)be; (void)err;
  icl_ref_argmax(fp(x), x->ne[0], icl_dt_nrows(x), (int32_t *)ptr(out));
  return ICL_OK;
}

static int rb_copy2d(icl_backend *be, const icl_dt *src, int64_t so, int64_t ss, const icl_dt *dst, int64_t dof,
                     int64_t ds, int64_t rows, int64_t cols, icl_error *err) {
  (void)be; (void)err;
  const float *s = fp(src);
  float *d = fp(dst);
  for (int64_t r = 0; r < rows; r++) memmove(d + dof + r * ds, s + so + r * ss, (size_t)cols * 4);
  return ICL_OK;
}

static int rb_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                     float value, icl_error *err) {
  (void)be; (void)err;
  float *d = fp(dst);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) d[off + r * stride + c] = value;
  return ICL_OK;
}

static const icl_backend_ops REF_OPS = {
    .name = "ref", .buf_alloc = rb_alloc, .buf_free = rb_free, .write = rb_write, .read = rb_read,
    .sync = rb_sync, .destroy = rb_destroy, .get_rows = rb_get_rows, .matmul = rb_matmul,
    .rms_norm = rb_rms_norm, .layer_norm = rb_layer_norm, .rope = rb_rope, .attention = rb_attention,
    .add = rb_add, .mul = rb_mul, .scale = rb_scale, .silu = rb_silu, .gelu = rb_gelu, .relu = rb_relu, .swiglu = rb_swiglu,
    .geglu = rb_geglu, .softmax = rb_softmax, .convert = rb_convert, .argmax = rb_argmax, .lse_select = rb_lse_select,
    .copy2d = rb_copy2d, .fill2d = rb_fill2d,
};

int icl_ref_backend_new(icl_backend **out, icl_error *err) {
  icl_backend *be = calloc(1, sizeof *be);
  if (!be) return icl_error_set(err, ICL_ENOMEM, "ref backend: out of memory");
  be->ops = &REF_OPS;
  be->is_cpu_device = 1;
  be->exact_batch = 1; /* scalar loops per row: nothing depends on the batch */
  *out = be;
  return ICL_OK;
}
