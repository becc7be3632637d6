/* Captures (a site's rows copied to host tensors, optionally only some positions and heads) and the slow
 * host-callback path (read back, let the callback change it, write back). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks_plan.h"

/* A capture request with its positions checked once, before its points are matched. */
typedef struct cap_req {
  const icl_capture *c;
  int64_t pb, pe;
} cap_req;

static int add_capture(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud, icl_error *err) {
  const cap_req *r = ud;
  const icl_capture *c = r->c;
  icl_hk_geom g = icl_hk_geom_of(hk->m, hp);
  icl_hk_cap *nc = realloc(hk->caps, (size_t)(hk->ncaps + 1) * sizeof *nc);
  if (!nc) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  hk->caps = nc;
  icl_hk_cap *k = &hk->caps[hk->ncaps];
  memset(k, 0, sizeof *k);
  k->layer = layer;
  k->hp = hp;
  k->pb = r->pb, k->pe = r->pe;
  if (c->heads && !g.heads) return icl_error_set(err, ICL_EINVAL, "capture %s: heads given for a point without heads", name);
  int rc = g.heads ? icl_hk_head_list(c->heads, c->n_heads, g.heads, c->label ? c->label : name, &k->heads, &k->nsel,
                                      err) : ICL_OK;
  if (rc) return rc;
  hk->ncaps++;
  *icl_hk_want(hk, layer, hp) |= ICL_W_CAPTURE;
  return ICL_OK;
}

static int add_callback(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud, icl_error *err) {
  (void)err; (void)name; (void)ud;
  *icl_hk_want(hk, layer, hp) |= ICL_W_CALLBACK;
  return ICL_OK;
}

int icl_hk_resolve_captures(struct icl_hookctx *hk, icl_error *err) {
  const icl_run_opts *o = hk->o;
  for (int i = 0; i < o->n_captures; i++) {
    const icl_capture *cp = &o->captures[i];
    char what[64];
    if (cp->label) snprintf(what, sizeof what, "%s", cp->label);
    else snprintf(what, sizeof what, "capture[%d]", i + 1);
    if (!cp->pattern) return icl_error_set(err, ICL_EINVAL, "%s: no hook name", what);
    cap_req r = {.c = cp};
    int rc = icl_hk_pos_range(cp->pos_begin, cp->pos_end, hk->n, &r.pb, &r.pe, what, err);
    if (rc) return rc;
    int c = icl_hk_for_points(hk, cp->pattern, add_capture, &r, err);
    if (c < 0) return -c;
  }
  return ICL_OK;
}

int icl_hk_resolve_callbacks(struct icl_hookctx *hk, icl_error *err) {
  const icl_run_opts *o = hk->o;
  if (o->n_hook_points && !o->hook) return icl_error_set(err, ICL_EINVAL, "hook points given without a callback");
  for (int i = 0; i < o->n_hook_points; i++) {
    int c = icl_hk_for_points(hk, o->hook_points[i], add_callback, NULL, err);
    if (c < 0) return -c;
  }
  return ICL_OK;
}

icl_tensor *icl_hk_capture_tensor(struct icl_hookctx *hk, const icl_hk_cap *k, int64_t npos) {
  icl_hk_geom g = icl_hk_geom_of(hk->m, k->hp);
  int64_t shape[3];
  if (k->hp == HP_PATTERN) {
    shape[0] = k->nsel, shape[1] = npos, shape[2] = hk->n;
    return icl_tensor_new(3, shape);
  }
  if (g.heads) {
    shape[0] = npos, shape[1] = k->nsel, shape[2] = g.hsz;
    return icl_tensor_new(3, shape);
  }
  shape[0] = npos, shape[1] = g.row;
  return icl_tensor_new(2, shape);
}

static size_t capture_bytes(struct icl_hookctx *hk, const icl_hk_cap *k) {
  icl_hk_geom g = icl_hk_geom_of(hk->m, k->hp);
  int64_t npos = k->pe - k->pb;
  if (k->hp == HP_PATTERN) return (size_t)(k->nsel * npos * hk->n) * 4;
  return (size_t)(npos * (g.heads ? k->nsel * g.hsz : g.row)) * 4;
}

/* "1.50 GiB", "12.0 MiB" or "640 bytes": a size readable at any scale. */
static const char *bytes_text(double b, char *buf, size_t cap) {
  if (b >= 1073741824.0) snprintf(buf, cap, "%.2f GiB", b / 1073741824.0);
  else if (b >= 1048576.0) snprintf(buf, cap, "%.1f MiB", b / 1048576.0);
  else snprintf(buf, cap, "%.0f bytes", b);
  return buf;
}

int icl_hk_setup_results(struct icl_hookctx *hk, icl_error *err) {
  icl_run_result *res = hk->res;
  size_t total = 0;
  for (int i = 0; i < hk->ncaps; i++) total += capture_bytes(hk, &hk->caps[i]);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  double limit = pages > 0 && psz > 0 ? 0.75 * (double)pages * (double)psz : 8e9;
  const char *env = getenv("ICL_MAX_CAPTURE_BYTES");
  if (env) limit = atof(env);
  char need[32], lim[32];
  if (!hk->o->stream && (double)total > limit)
    return icl_error_set(err, ICL_ENOMEM,
                         "captures need %s of host memory, above the limit of %s (ICL_MAX_CAPTURE_BYTES): "
                         "capture fewer points, positions or heads, or stream chunks",
                         bytes_text((double)total, need, sizeof need), bytes_text(limit, lim, sizeof lim));
  res->names = calloc((size_t)(hk->ncaps ? hk->ncaps : 1), sizeof *res->names);
  res->captures = calloc((size_t)(hk->ncaps ? hk->ncaps : 1), sizeof *res->captures);
  if (!res->names || !res->captures) return icl_error_set(err, ICL_ENOMEM, "captures: out of memory");
  res->n_captures = hk->ncaps;
  for (int i = 0; i < hk->ncaps; i++) {
    char name[96];
    icl_hook_name(hk->m, hk->caps[i].layer, hk->caps[i].hp, name, sizeof name);
    res->names[i] = strdup(name);
    hk->caps[i].index = i;
    if (!hk->o->stream) res->captures[i] = icl_hk_capture_tensor(hk, &hk->caps[i], hk->caps[i].pe - hk->caps[i].pb);
    if (!res->names[i] || (!hk->o->stream && !res->captures[i]))
      return icl_error_set(err, ICL_ENOMEM, "captures: out of memory for %s", name);
  }
  return ICL_OK;
}

int icl_hk_callback(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, icl_error *err) {
  icl_backend *be = hk->m->be;
  int64_t n = icl_hk_view_positions(view, hp);
  int64_t shape[3] = {n, 0, 0};
  int nd = 2;
  icl_hk_geom g = icl_hk_geom_of(hk->m, hp);
  if (hp == HP_PATTERN) shape[0] = g.heads, shape[1] = n, shape[2] = view->ne[0], nd = 3;
  else if (g.heads) shape[1] = g.heads, shape[2] = g.hsz, nd = 3;
  else shape[1] = g.row;
  icl_tensor *t = icl_tensor_new(nd, shape);
  if (!t) return icl_error_set(err, ICL_ENOMEM, "hook callback: out of memory");
  size_t bytes = (size_t)t->numel * 4;
  char name[96];
  icl_hook_name(hk->m, layer, hp, name, sizeof name);
  int rc = be->ops->read(be, view->buf, view->offset, t->data, bytes, err);
  if (!rc && hk->o->hook(hk->o->hook_ud, name, t, hk->p0, err)) rc = err->code ? err->code : ICL_EINVAL;
  if (!rc && hp != HP_PATTERN) rc = be->ops->write(be, view->buf, view->offset, t->data, bytes, err);
  icl_tensor_free(t);
  return rc;
}

/* The pattern's view [nkv, n, nh] into t [nsel, npos, n_total], rows r0.. of the chunk. One read per head:
 * on a discrete GPU every read is a staging copy and a wait, and a read per row (12,600 for one layer of
 * SmolLM2 at 1400 tokens) cost 0.6 s on an H200. */
static int capture_pattern(icl_backend *be, const icl_hk_cap *k, const icl_dt *view, int64_t n, int64_t r0,
                           int64_t nr, int64_t trow, icl_tensor *t, icl_error *err) {
  int64_t nkv = view->ne[0];
  int direct = t->shape[2] == nkv; /* t's rows are as long as the view's: read straight into t */
  float *tmp = direct ? NULL : malloc((size_t)(nr * nkv) * sizeof *tmp);
  if (!direct && !tmp) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  int rc = ICL_OK;
  for (int j = 0; j < k->nsel && !rc; j++) {
    size_t off = view->offset + (size_t)(((int64_t)k->heads[j] * n + r0) * nkv) * 4;
    float *dst = t->data + ((int64_t)j * t->shape[1] + trow) * t->shape[2];
    rc = be->ops->read(be, view->buf, off, direct ? dst : tmp, (size_t)(nr * nkv) * 4, err);
    for (int64_t r = 0; !rc && !direct && r < nr; r++)
      memcpy(dst + r * t->shape[2], tmp + r * nkv, (size_t)nkv * 4);
  }
  free(tmp);
  return rc;
}

int icl_hk_capture(struct icl_hookctx *hk, const icl_hk_cap *k, const icl_dt *view, int64_t n, icl_error *err) {
  icl_backend *be = hk->m->be;
  icl_hk_geom g = icl_hk_geom_of(hk->m, k->hp);
  int64_t b, e;
  if (!icl_hk_overlap(k->pb, k->pe, hk->p0, n, &b, &e)) return ICL_OK;
  icl_tensor *t = hk->res->captures[k->index];
  int64_t tb = hk->o->stream ? b : k->pb; /* position of the tensor's first row */
  int64_t r0 = b - hk->p0, nr = e - b;
  if (k->hp == HP_PATTERN) return capture_pattern(be, k, view, n, r0, nr, b - tb, t, err);
  if (!g.heads) /* rows are contiguous: one read */
    return be->ops->read(be, view->buf, view->offset + (size_t)(r0 * g.row) * 4, t->data + (b - tb) * g.row,
                         (size_t)(nr * g.row) * 4, err);
  float *tmp = malloc((size_t)(nr * g.row) * sizeof *tmp);
  if (!tmp) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  int rc = be->ops->read(be, view->buf, view->offset + (size_t)(r0 * g.row) * 4, tmp, (size_t)(nr * g.row) * 4, err);
  for (int64_t r = 0; r < nr && !rc; r++)
    for (int j = 0; j < k->nsel; j++)
      memcpy(t->data + ((b - tb + r) * k->nsel + j) * g.hsz, tmp + r * g.row + (int64_t)k->heads[j] * g.hsz,
             (size_t)g.hsz * 4);
  free(tmp);
  return rc;
}
