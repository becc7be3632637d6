/* A weight matrix larger than maxStorageBufferRange (128 MiB on lavapipe): a 640 x 320000 Q8_0
 * matrix (208 MiB, shaped like Gemma 3's token embedding but taller) must be bound as several
 * row ranges, transparently to get_rows and matmul (n = 1 and n = 4). Rows on both sides of
 * every range boundary, the last row and a sample every 997 rows are checked against the
 * reference. Tolerances as in test_vk_matmul.c (exact decode, f32 sums): 1e-9. */
#include "test_vk_util.h"

#define COLS 640
#define ROWS 320000

/* Sampled rows: a stride plus both sides of each split point. */
static int64_t sample_rows(int64_t per_range, int64_t *out, int64_t cap) {
  int64_t n = 0;
  for (int64_t r = 0; r < ROWS && n < cap; r += 997) out[n++] = r;
  for (int64_t b = per_range; b < ROWS && n + 2 < cap; b += per_range) out[n++] = b - 1, out[n++] = b;
  out[n++] = ROWS - 1;
  return n;
}

static void check_matmul(const vt *w, const void *raw, int64_t ncols, const int64_t *rows, int64_t nr) {
  icl_error err;
  float *x, *y = vt_xmalloc((size_t)ROWS * (size_t)ncols * 4);
  vt xv = vt_rand(COLS, ncols, 1, 11 + (uint64_t)ncols, -1, 1, &x), yv = vt_new(ICL_TYPE_F32, ROWS, ncols, 1, 4);
  double t0 = vt_now();
  CHECKF(vt_be->ops->matmul(vt_be, &w->dt, &xv.dt, &yv.dt, &err) == ICL_OK, "matmul: %s", err.msg);
  vt_download(&yv, y);
  printf("matmul n=%lld over %d rows: %.2f s\n", (long long)ncols, ROWS, vt_now() - t0);
  CHECKF(vt_count_nonfinite(y, (int64_t)ROWS * ncols) == 0, "matmul n=%lld: non-finite outputs", (long long)ncols);
  float *ref = vt_xmalloc((size_t)(nr * ncols) * 4), *got = vt_xmalloc((size_t)(nr * ncols) * 4);
  size_t rb = icl_type_row_bytes(ICL_TYPE_Q8_0, COLS);
  for (int64_t i = 0; i < nr; i++)
    for (int64_t c = 0; c < ncols; c++) {
      icl_ref_matmul(ICL_TYPE_Q8_0, (const char *)raw + (size_t)rows[i] * rb, COLS, 1, x + c * COLS, 1,
                     &ref[i * ncols + c]);
      got[i * ncols + c] = y[(size_t)c * ROWS + (size_t)rows[i]];
    }
  double e = icl_nmse(ref, got, nr * ncols);
  CHECKF(e < 1e-9, "matmul n=%lld on sampled rows: NMSE %.3g", (long long)ncols, e);
  CHECK(vt_guards_ok(&yv));
  vt_free(&xv), vt_free(&yv);
  free(x), free(y), free(ref), free(got);
}

static void check_get_rows(const vt *w, const void *raw, const int64_t *rows, int64_t nr) {
  icl_error err;
  int32_t *ids = vt_xmalloc((size_t)nr * 4);
  for (int64_t i = 0; i < nr; i++) ids[nr - 1 - i] = (int32_t)rows[i]; /* reversed: order must not matter */
  vt iv = vt_new(ICL_TYPE_I32, nr, 1, 1, 4), out = vt_new(ICL_TYPE_F32, COLS, nr, 1, 4);
  vt_upload(&iv, ids);
  CHECKF(vt_be->ops->get_rows(vt_be, &w->dt, &iv.dt, &out.dt, &err) == ICL_OK, "get_rows: %s", err.msg);
  float *ref = vt_xmalloc((size_t)(COLS * nr) * 4);
  icl_ref_get_rows(ICL_TYPE_Q8_0, raw, COLS, ids, nr, ref);
  vt_expect("get_rows across range boundaries", &out, ref, 1e-12);
  vt_free(&iv), vt_free(&out);
  free(ids), free(ref);
}

int main(void) {
  vt_backend();
  const icl_device_info *d = icl_vk_backend_device(vt_be);
  size_t rb = icl_type_row_bytes(ICL_TYPE_Q8_0, COLS), bytes = rb * ROWS;
  printf("Q8_0 %d x %d = %.1f MiB, maxStorageBufferRange %.1f MiB\n", COLS, ROWS, bytes / 1048576.0,
         d->max_storage_range / 1048576.0);
  if (bytes <= d->max_storage_range) printf("note: this device binds it whole; the split path is not exercised\n");
  double t0 = vt_now();
  void *raw;
  vt w = vt_weights(ICL_TYPE_Q8_0, COLS, ROWS, 42, &raw);
  printf("generate + upload: %.2f s\n", vt_now() - t0);
  /* rows per binding as the backend computes it (see vk_bind_max) */
  int64_t per_range = (int64_t)((d->max_storage_range - d->min_storage_align - 32) / 4 * 4 / rb);
  int64_t rows[1024];
  int64_t nr = sample_rows(per_range, rows, 1024);
  check_get_rows(&w, raw, rows, nr);
  check_matmul(&w, raw, 1, rows, nr);
  check_matmul(&w, raw, 4, rows, nr);
  CHECK(vt_guards_ok(&w));
  vt_free(&w);
  free(raw);
  printf("total %.2f s\n", vt_now() - t0);
  return vt_finish();
}
