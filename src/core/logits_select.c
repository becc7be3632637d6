/* Reduced logits: the LM head runs in sub-chunks of logit_rows rows (<= 64 MiB, or the backend's logits_chunk_bytes); the lse_select op reduces each
 * sub-chunk on the device to the selected ids and a log-sum-exp per row, and only those k + 1 floats per row are
 * read back, so a run never holds [n, vocab] on the host. */
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "logits_select.h"
#include "ops.h"

int icl_logits_select_alloc(const icl_model *m, int64_t n, const icl_run_opts *o, icl_run_result *res,
                            icl_error *err) {
  if (o->n_logit_ids < 0 || (o->n_logit_ids && !o->logit_ids))
    return icl_error_set(err, ICL_EINVAL, "run: logits select: %d ids without a list", o->n_logit_ids);
  if (!o->n_logit_ids && !o->logit_lse)
    return icl_error_set(err, ICL_EINVAL, "logits: expected select = {ids} and/or lse = true (logit_ids, logit_lse)");
  for (int j = 0; j < o->n_logit_ids; j++)
    if (o->logit_ids[j] < 0 || o->logit_ids[j] >= m->hp.n_vocab)
      return icl_error_set(err, ICL_EINVAL, "logits.select[%d]: %d is not a token id in 0..%d (1-based entry)", j + 1,
                           o->logit_ids[j], m->hp.n_vocab - 1);
  int64_t shape[2] = {n, o->n_logit_ids}, lshape[1] = {n};
  if (o->n_logit_ids && !(res->logits = icl_tensor_new(2, shape)))
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld x %d selected logits", (long long)n,
                         o->n_logit_ids);
  if (o->logit_lse && !(res->lse = icl_tensor_new(1, lshape)))
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld log-sum-exp values", (long long)n);
  return ICL_OK;
}

/* Device buffers of one chunk's reduction: the ids (a single dummy id when none are selected) and the output
 * [k + 1, rows] of the lse_select op. */
typedef struct sel_bufs {
  icl_buf *ids, *out;
  icl_dt ids_v;
  int64_t k; /* ids on the device (>= 1) */
} sel_bufs;

static int sel_open(icl_session *s, const icl_run_opts *o, int64_t rows, sel_bufs *b, icl_error *err) {
  icl_backend *be = s->m->be;
  static const int32_t dummy = 0;
  const int32_t *ids = o->n_logit_ids ? o->logit_ids : &dummy;
  b->k = o->n_logit_ids ? o->n_logit_ids : 1;
  int rc = be->ops->buf_alloc(be, (size_t)b->k * 4, ICL_BUF_ACT, &b->ids, err);
  if (!rc) rc = be->ops->write(be, b->ids, 0, ids, (size_t)b->k * 4, err);
  if (!rc) rc = be->ops->buf_alloc(be, (size_t)((b->k + 1) * rows) * 4, ICL_BUF_ACT, &b->out, err);
  b->ids_v = (icl_dt){.buf = b->ids, .type = ICL_TYPE_I32, .ne = {b->k, 1, 1, 1}};
  return rc ? icl_error_wrap(err, "run: logits select buffers") : ICL_OK;
}

static void sel_close(icl_session *s, sel_bufs *b) {
  if (b->ids) s->m->be->ops->buf_free(s->m->be, b->ids);
  if (b->out) s->m->be->ops->buf_free(s->m->be, b->out);
}

/* Copies the op's rows [k + 1] (row r = position p0 + r) into the result tensors. */
static void scatter_rows(const float *red, int64_t nr, int64_t k, int64_t p0, const icl_run_opts *o,
                         icl_run_result *res) {
  for (int64_t r = 0; r < nr; r++) {
    const float *row = red + r * (k + 1);
    if (res->logits) memcpy(res->logits->data + (p0 + r) * o->n_logit_ids, row, (size_t)o->n_logit_ids * 4);
    if (res->lse) res->lse->data[p0 + r] = row[k];
  }
}

int icl_logits_select_chunk(icl_session *s, int64_t pos0, int64_t nc, const icl_run_opts *o, icl_run_result *res,
                            icl_error *err) {
  icl_backend *be = s->m->be;
  int64_t V = s->m->hp.n_vocab, step = s->a.logit_rows;
  int64_t nsub = (nc + step - 1) / step, per = (nc + nsub - 1) / nsub; /* even sub-chunks, as read_logits */
  sel_bufs b = {0};
  int rc = sel_open(s, o, per, &b, err);
  float *red = rc ? NULL : malloc((size_t)((b.k + 1) * per) * sizeof *red);
  if (!rc && !red) rc = icl_error_set(err, ICL_ENOMEM, "run: no host memory for reduced logits");
  for (int64_t r = 0; r < nc && !rc; r += per) {
    int64_t nr = nc - r < per ? nc - r : per;
    icl_dt Y = {.buf = s->a.logits.buf, .type = ICL_TYPE_F32, .offset = s->a.logits.offset, .ne = {V, nr, 1, 1}};
    icl_dt out = {.buf = b.out, .type = ICL_TYPE_F32, .ne = {b.k + 1, nr, 1, 1}};
    rc = icl_forward_logits(s, r, nr, err);
    if (!rc) rc = icl_op_lse_select(be, &Y, &b.ids_v, &out, err);
    if (!rc) rc = be->ops->read(be, b.out, 0, red, (size_t)((b.k + 1) * nr) * sizeof *red, err);
    if (!rc) scatter_rows(red, nr, b.k, pos0 + r, o, res);
  }
  free(red);
  sel_close(s, &b);
  return rc;
}
