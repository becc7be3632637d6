/* Apply: the plan entries of a site, on the chunk's view of it, as fills, copies and adds over column spans of
 * position rows; and the knockout mask of a layer's attention from its MASK entries. */
#include <math.h>
#include <string.h>

#include "hooks_plan.h"
#include "ops.h"

/* site[b..e)[col..col+ncol) += value rows: whole rows only (an add over a column span has no backend op). */
static int apply_add(icl_backend *be, const icl_plan_entry *p, const icl_dt *view, int64_t r0, int64_t nr,
                     int64_t vr0, icl_error *err) {
  if (p->col != 0 || p->ncol != p->row)
    return icl_error_set(err, ICL_EINVAL, "hook plan: add over columns %lld..%lld of %lld is not supported",
                         (long long)p->col, (long long)(p->col + p->ncol), (long long)p->row);
  icl_dt a = *view, vb = {.buf = p->vbuf, .type = ICL_TYPE_F32, .ne = {p->vstride, p->vrows == 1 ? 1 : nr, 1, 1}};
  a.offset += (size_t)(r0 * p->row) * 4;
  a.ne[0] = p->row, a.ne[1] = nr, a.ne[2] = a.ne[3] = 1;
  vb.offset = (size_t)(vr0 * p->vstride) * 4;
  return icl_op_add(be, &a, &vb, &a, err);
}

/* One FILL, COPY or ADD entry on the chunk [p0, p0 + n) of its site. */
static int apply_entry(icl_backend *be, const icl_plan_entry *p, const icl_dt *view, int64_t p0, int64_t n,
                       icl_error *err) {
  int64_t b, e;
  if (!icl_hk_overlap(p->pb, p->pe, p0, n, &b, &e)) return ICL_OK;
  int64_t r0 = b - p0, nr = e - b, vr0 = p->vrows == 1 ? 0 : b - p->pb;
  icl_dt vb = {.buf = p->vbuf, .type = ICL_TYPE_F32, .ne = {p->vstride, p->vrows, 1, 1}};
  switch (p->op) {
  case ICL_PLAN_FILL: return icl_op_fill2d(be, view, r0 * p->row + p->col, p->row, nr, p->ncol, p->fill, err);
  case ICL_PLAN_COPY:
    return icl_op_copy2d(be, &vb, vr0 * p->vstride + p->vcol, p->vstride, view, r0 * p->row + p->col, p->row, nr,
                         p->ncol, err);
  case ICL_PLAN_ADD: return apply_add(be, p, view, r0, nr, vr0, err);
  default: return icl_error_set(err, ICL_EINVAL, "hook plan: entry kind %d cannot act on a point", (int)p->op);
  }
}

int icl_hk_apply(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, int64_t n, icl_error *err) {
  int rc = ICL_OK;
  for (int i = 0; i < hk->nplan && !rc; i++) {
    const icl_plan_entry *p = &hk->plan[i];
    if (p->op != ICL_PLAN_MASK && p->layer == layer && p->hp == hp)
      rc = apply_entry(hk->m->be, p, view, hk->p0, n, err);
  }
  return rc;
}

/* An allow entry into the mask: every causal edge of the chunk's queries that it does not list is masked. */
static void fill_allowed(struct icl_hookctx *hk, const icl_plan_entry *p, int64_t nq, int64_t nkv, int64_t nh) {
  memset(hk->allowed, 0, (size_t)(nq * nkv));
  for (int64_t j = 0; j < p->n_edges; j++) {
    int64_t q = p->edges[2 * j] - hk->p0;
    if (q >= 0 && q < nq) hk->allowed[q * nkv + p->edges[2 * j + 1]] = 1;
  }
  for (int h = 0; h < (p->heads ? p->n_heads : nh); h++) {
    int64_t head = p->heads ? p->heads[h] : h;
    for (int64_t q = 0; q < nq; q++)
      for (int64_t k = 0; k <= hk->p0 + q; k++)
        if (!hk->allowed[q * nkv + k]) hk->mask_host[(head * nq + q) * nkv + k] = -INFINITY;
  }
}

/* The MASK entries of a layer into the host mask [nh, nq, nkv] of the chunk (q rows p0..p0+nq). */
static void fill_mask(struct icl_hookctx *hk, int layer, int64_t nq, int64_t nkv, int64_t nh) {
  memset(hk->mask_host, 0, (size_t)(nkv * nq * nh) * sizeof(float));
  for (int i = 0; i < hk->nplan; i++) {
    const icl_plan_entry *p = &hk->plan[i];
    if (p->op != ICL_PLAN_MASK || p->layer != layer) continue;
    if (p->allow) {
      fill_allowed(hk, p, nq, nkv, nh);
      continue;
    }
    for (int64_t j = 0; j < p->n_edges; j++) {
      int64_t q = p->edges[2 * j] - hk->p0, kk = p->edges[2 * j + 1];
      if (q < 0 || q >= nq) continue;
      for (int h = 0; h < (p->heads ? p->n_heads : nh); h++) {
        int64_t head = p->heads ? p->heads[h] : h;
        hk->mask_host[(head * nq + q) * nkv + kk] = -INFINITY;
      }
    }
  }
}

int icl_hook_mask(struct icl_hookctx *hk, int layer, const icl_dt **out, icl_error *err) {
  *out = NULL;
  if (!hk->ko_layer || !hk->ko_layer[layer]) return ICL_OK;
  icl_model *m = hk->m;
  int64_t nq = hk->nc, nkv = hk->p0 + nq, nh = m->hp.n_head;
  fill_mask(hk, layer, nq, nkv, nh);
  /* the buffer is shared by all knocked-out layers: wait until the previous layer's attention has read it */
  int rc = m->be->ops->sync(m->be, err);
  if (!rc) rc = m->be->ops->write(m->be, hk->mask_buf, 0, hk->mask_host, (size_t)(nkv * nq * nh) * 4, err);
  if (rc) return icl_error_wrap(err, "knockout mask of layer %d", layer);
  hk->mask_view = (icl_dt){.buf = hk->mask_buf, .type = ICL_TYPE_F32, .ne = {nkv, nq, nh, 1}};
  *out = &hk->mask_view;
  return ICL_OK;
}
