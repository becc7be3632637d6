/* lse_select (reduced logits) on every backend against the scalar reference, and the reference against values
 * computed by hand: per row the selected entries (exact copies) and the log-sum-exp of the row. Shapes: one row,
 * odd widths, SmolLM2's and Gemma 3's vocabularies (49152, 262144) with row counts that split into sub-chunks;
 * rows with -inf entries and a row of all -inf. Output buffers carry guard bytes on both sides.
 *
 * Tolerance: the backends sum exp in float (blocked or tree order) where the reference sums in double: the
 * relative error of the sum is ~1e-6 for 262144 terms, so |lse - ref| <= 1e-5 + 1e-6 |ref|. Selected entries must
 * be bit-identical. Vulkan is tested when a device exists (lavapipe counts). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "ops.h"
#include "ref.h"
#include "testutil.h"

#define GUARD 64
#define GUARD_BYTE 0x5A

typedef struct gbuf { icl_buf *buf; icl_dt dt; size_t bytes; } gbuf;

/* A view at offset GUARD of a buffer with GUARD guard bytes on each side; data may be NULL. */
static gbuf gb_new(icl_backend *be, uint32_t type, int64_t n0, int64_t n1, const void *data) {
  gbuf g = {.bytes = (size_t)(n0 * n1) * 4};
  icl_error err;
  uint8_t *init = malloc(g.bytes + 2 * GUARD);
  memset(init, GUARD_BYTE, g.bytes + 2 * GUARD);
  if (data) memcpy(init + GUARD, data, g.bytes);
  if (be->ops->buf_alloc(be, g.bytes + 2 * GUARD, ICL_BUF_ACT, &g.buf, &err) ||
      be->ops->write(be, g.buf, 0, init, g.bytes + 2 * GUARD, &err)) {
    fprintf(stderr, "buffer: %s\n", err.msg);
    exit(1);
  }
  free(init);
  g.dt = (icl_dt){.buf = g.buf, .type = type, .offset = GUARD, .ne = {n0, n1, 1, 1}};
  return g;
}

/* Reads the view into dst; 0 when a guard byte changed. */
static int gb_read(icl_backend *be, const gbuf *g, void *dst) {
  uint8_t *all = malloc(g->bytes + 2 * GUARD);
  icl_error err;
  int ok = be->ops->read(be, g->buf, 0, all, g->bytes + 2 * GUARD, &err) == ICL_OK;
  for (size_t i = 0; ok && i < GUARD; i++) ok = all[i] == GUARD_BYTE && all[GUARD + g->bytes + i] == GUARD_BYTE;
  memcpy(dst, all + GUARD, g->bytes);
  free(all);
  return ok;
}

/* The reference on rows whose answer is known: log(e^0 + e^0 + e^0) = log 3; log(e^a) = a; all -inf -> -inf. */
static void test_ref_by_hand(void) {
  const float x[9] = {0, 0, 0, 5, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  const int32_t ids[2] = {2, 0};
  float out[9];
  icl_ref_lse_select(x, 3, 3, ids, 2, out);
  CHECK(out[0] == 0 && out[1] == 0 && fabsf(out[2] - logf(3)) < 1e-6f);
  CHECK(out[3] == -INFINITY && out[4] == 5 && out[5] == 5);
  CHECK(out[8] == -INFINITY);
}

static void run_case(icl_backend *be, const char *name, int64_t d, int64_t rows, int64_t k, uint64_t seed) {
  float *x = malloc((size_t)(d * rows) * sizeof *x), *ref = malloc((size_t)((k + 1) * rows) * sizeof *ref);
  float *got = malloc((size_t)((k + 1) * rows) * sizeof *got);
  int32_t *ids = malloc((size_t)k * sizeof *ids);
  t_rand_fill(x, d * rows, seed, -30.0f, 30.0f);
  for (int64_t i = 5; i < d * rows; i += 13) x[i] = -INFINITY;
  if (rows > 2)
    for (int64_t i = 0; i < d; i++) x[d + i] = -INFINITY; /* row 1 fully masked */
  for (int64_t j = 0; j < k; j++) ids[j] = (int32_t)((j * 7919 + seed) % (uint64_t)d);
  icl_ref_lse_select(x, d, rows, ids, k, ref);
  gbuf gx = gb_new(be, ICL_TYPE_F32, d, rows, x), gi = gb_new(be, ICL_TYPE_I32, k, 1, ids);
  gbuf go = gb_new(be, ICL_TYPE_F32, k + 1, rows, NULL);
  icl_error err;
  int rc = icl_op_lse_select(be, &gx.dt, &gi.dt, &go.dt, &err);
  CHECKF(rc == ICL_OK, "%s lse_select: %s", name, err.msg);
  CHECKF(gb_read(be, &go, got), "%s d=%lld rows=%lld: write outside the output", name, (long long)d, (long long)rows);
  int exact = 1;
  double worst = 0;
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t j = 0; j < k; j++) exact &= memcmp(&got[r * (k + 1) + j], &ref[r * (k + 1) + j], 4) == 0;
    float g = got[r * (k + 1) + k], w = ref[r * (k + 1) + k];
    if (isinf(w)) exact &= g == w;
    else worst = fmax(worst, fabs(g - w) / (1e-5 + 1e-6 * fabs(w)));
  }
  CHECKF(exact, "%s d=%lld rows=%lld k=%lld: selected entries or -inf rows differ", name, (long long)d,
         (long long)rows, (long long)k);
  CHECKF(worst <= 1.0, "%s d=%lld rows=%lld: lse error %.2f x the tolerance", name, (long long)d, (long long)rows,
         worst);
  be->ops->buf_free(be, gx.buf), be->ops->buf_free(be, gi.buf), be->ops->buf_free(be, go.buf);
  free(x), free(ref), free(got), free(ids);
}

static void run_backend(icl_backend *be, const char *name) {
  printf("testing %s\n", name);
  static const struct { int64_t d, rows, k; } C[] = {
      {1, 1, 1}, {7, 3, 2}, {97, 5, 16}, {49152, 9, 16}, {49152, 2, 30}, {262144, 3, 10}, {1000, 341, 1}};
  for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) run_case(be, name, C[i].d, C[i].rows, C[i].k, 40 + i);
  icl_error err; /* shape errors: empty ids, output of the wrong size */
  gbuf gx = gb_new(be, ICL_TYPE_F32, 8, 2, NULL), gi = gb_new(be, ICL_TYPE_I32, 2, 1, NULL);
  gbuf go = gb_new(be, ICL_TYPE_F32, 2, 2, NULL);
  CHECK(icl_op_lse_select(be, &gx.dt, &gi.dt, &go.dt, &err) == ICL_EINVAL && strstr(err.msg, "(k + 1) x rows"));
  be->ops->buf_free(be, gx.buf), be->ops->buf_free(be, gi.buf), be->ops->buf_free(be, go.buf);
}

int main(void) {
  test_ref_by_hand();
  icl_error err;
  icl_backend *be;
  if (!icl_ref_backend_new(&be, &err)) run_backend(be, "ref"), be->ops->destroy(be);
  else CHECKF(0, "ref backend: %s", err.msg);
  if (!icl_cpu_backend_new(2, &be, &err)) run_backend(be, "cpu"), be->ops->destroy(be);
  else CHECKF(0, "cpu backend: %s", err.msg);
  if (!icl_vk_backend_new(-1, &be, &err)) run_backend(be, "vulkan"), be->ops->destroy(be);
  else printf("no Vulkan device (%s): Vulkan not tested here\n", err.msg);
  return t_done();
}
