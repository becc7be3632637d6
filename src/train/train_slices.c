/* Running a pass in slices of whole sequences (the forward's and the backward's dx chain): the bounds checked, the
 * slices at once on the backend's run_split (one slice: on the backend itself), and the default slicing. */
#include "ops.h"
#include "train_internal.h"

typedef struct split_ctx {
  icl_trainer *tr;
  const int64_t *b; /* slice i = sequences [b[i], b[i + 1]) */
  tr_slice_fn fn;
  int part;
} split_ctx;

static int split_item(void *ctx, int i, icl_backend *sub, icl_error *err) {
  const split_ctx *c = ctx;
  int64_t T = c->tr->T, b0 = c->b[i], nb = c->b[i + 1] - b0;
  tr_slice s = {.tr = c->tr, .be = sub, .b0 = b0, .B = nb, .n0 = b0 * T, .N = nb * T, .part = c->part};
  return nb > 0 ? c->fn(&s, err) : ICL_OK;
}

int tr_run_slices(icl_trainer *tr, const char *pass, int part, int n, const int64_t *b, tr_slice_fn fn,
                  icl_error *err) {
  if (n < 1 || b[0] != 0 || b[n] != tr->B)
    return icl_error_set(err, ICL_EINVAL, "train: %d %s slices from sequence %lld to %lld, expected 0 to %lld", n, pass,
                         (long long)(n > 0 ? b[0] : 0), (long long)(n > 0 ? b[n] : 0), (long long)tr->B);
  for (int i = 0; i < n; i++)
    if (b[i + 1] < b[i]) return icl_error_set(err, ICL_EINVAL, "train: %s slice %d ends before it starts", pass, i);
  split_ctx c = {.tr = tr, .b = b, .fn = fn, .part = part};
  return n == 1 ? split_item(&c, 0, tr->be, err) : icl_op_run_split(tr->be, n, split_item, &c, err);
}

int tr_default_slices(const icl_trainer *tr, int64_t *b) {
  /* one slice per thread where the backend runs slices at once; else all rows as one (Vulkan, or one thread) */
  int n = tr->n_threads > 1 && tr->be->ops->run_split ? tr->n_threads : 1;
  if (n > tr->B) n = (int)tr->B;
  if (n > TR_MAX_SLICES) n = TR_MAX_SLICES;
  for (int i = 0; i <= n; i++) b[i] = tr->B * i / n;
  return n;
}
