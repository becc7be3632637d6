/* Reduced logits: the LM head runs in sub-chunks of logit_rows rows (<= 64 MiB); each sub-chunk is read back and
 * reduced to the selected ids and a log-sum-exp per row at once, so a run never holds [n, vocab] on the host.
 * The reduction runs on the host for every backend (on the CPU backend the read is a copy within host memory). */
#include <math.h>
#include <stdlib.h>

#include "logits_select.h"

void icl_logits_reduce_row(const float *row, int64_t V, const int32_t *ids, int n_ids, float *sel, float *lse) {
  float mx = row[0];
  for (int64_t i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
  double z = 0;
  for (int64_t i = 0; i < V; i += 1024) { /* float partial sums over blocks, double across blocks */
    float part = 0;
    int64_t e = i + 1024 < V ? i + 1024 : V;
    for (int64_t k = i; k < e; k++) part += expf(row[k] - mx);
    z += part;
  }
  for (int j = 0; j < n_ids; j++) sel[j] = row[ids[j]];
  if (lse) *lse = (float)(mx + log(z));
}

int icl_logits_select_alloc(const icl_model *m, int64_t n, const icl_run_opts *o, icl_run_result *res,
                            icl_error *err) {
  if (o->n_logit_ids < 0 || (o->n_logit_ids && !o->logit_ids))
    return icl_error_set(err, ICL_EINVAL, "run: logits select: %d ids without a list", o->n_logit_ids);
  if (!o->n_logit_ids && !o->logit_lse)
    return icl_error_set(err, ICL_EINVAL, "run: logits select: expected ids to select or the log-sum-exp");
  for (int j = 0; j < o->n_logit_ids; j++)
    if (o->logit_ids[j] < 0 || o->logit_ids[j] >= m->hp.n_vocab)
      return icl_error_set(err, ICL_EINVAL, "run: logits select: id %d (entry %d) out of range 0..%d",
                           o->logit_ids[j], j, m->hp.n_vocab - 1);
  int64_t shape[2] = {n, o->n_logit_ids}, lshape[1] = {n};
  if (o->n_logit_ids && !(res->logits = icl_tensor_new(2, shape)))
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld x %d selected logits", (long long)n,
                         o->n_logit_ids);
  if (o->logit_lse && !(res->lse = icl_tensor_new(1, lshape)))
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld log-sum-exp values", (long long)n);
  return ICL_OK;
}

/* Reduces nr rows read into rows (row r of the sub-chunk is position p0 + r). */
static void reduce_rows(const float *rows, int64_t nr, int64_t V, int64_t p0, const icl_run_opts *o,
                        icl_run_result *res) {
  for (int64_t r = 0; r < nr; r++) {
    float *sel = res->logits ? res->logits->data + (p0 + r) * o->n_logit_ids : NULL;
    float *lse = res->lse ? res->lse->data + p0 + r : NULL;
    icl_logits_reduce_row(rows + r * V, V, o->logit_ids, o->n_logit_ids, sel, lse);
  }
}

int icl_logits_select_chunk(icl_session *s, int64_t pos0, int64_t nc, const icl_run_opts *o, icl_run_result *res,
                            icl_error *err) {
  icl_backend *be = s->m->be;
  int64_t V = s->m->hp.n_vocab, step = s->a.logit_rows;
  int64_t nsub = (nc + step - 1) / step, per = (nc + nsub - 1) / nsub; /* even sub-chunks, as read_logits */
  float *rows = malloc((size_t)(per * V) * sizeof *rows);
  if (!rows) return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld logits rows", (long long)per);
  int rc = ICL_OK;
  for (int64_t r = 0; r < nc && !rc; r += per) {
    int64_t nr = nc - r < per ? nc - r : per;
    rc = icl_forward_logits(s, r, nr, err);
    if (!rc) rc = be->ops->read(be, s->a.logits.buf, 0, rows, (size_t)(nr * V) * sizeof *rows, err);
    if (!rc) reduce_rows(rows, nr, V, pos0 + r, o, res);
  }
  free(rows);
  return rc;
}
