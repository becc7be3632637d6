/* Resolve: every intervention request of a run becomes plan entries (hooks_plan.h), matched on the shape of
 * the site's tensor and on the shape of the caller's value, so that apply is a loop of fill/copy/add over
 * spans. A value whose shape fits none of the site's layouts is an error naming the request, the hook, the
 * given shape and the expected ones; nothing is guessed from an element count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hooks_plan.h"

/* Where a value row's columns come from, per selected head j. */
enum { SRC_ROW, SRC_ALL_HEADS, SRC_SEL_HEADS, SRC_ONE_HEAD };

/* A per-position layout a value row may have at a site: its dims and where each selected head's block lies. */
typedef struct form {
  int64_t d[2];
  int nd, src;
} form;

/* An intervention with its positions [pb, pe) checked once, before its points are matched. */
typedef struct iv_req {
  const icl_intervention *v;
  int64_t pb, pe;
} iv_req;

/* One request at one site while it is resolved. */
typedef struct req {
  const icl_intervention *v;
  char name[192]; /* "patch[1] (blocks.0.hook_z)", or the hook name alone */
  int layer, hp;
  icl_hk_geom g;
  int64_t pb, pe;
  int *heads, nsel;
} req;

/* How the value maps onto the request: rows 1 (broadcast) or one per position, and its row layout. */
typedef struct vmap {
  int64_t rows;
  form f;
} vmap;

/* The row layouts of a site, in matching order: all heads before the chosen ones (as when both could be meant,
 * e.g. a reordered full head list), one head's block (every chosen head gets it) only when broadcast. */
static int site_forms(const req *q, form *f) {
  if (!q->g.heads) {
    f[0] = (form){{q->g.row, 0}, 1, SRC_ROW};
    return 1;
  }
  int64_t hs = q->g.hsz, nh = q->g.heads, ns = q->nsel;
  f[0] = (form){{nh, hs}, 2, SRC_ALL_HEADS};
  f[1] = (form){{nh * hs, 0}, 1, SRC_ALL_HEADS};
  f[2] = (form){{ns, hs}, 2, SRC_SEL_HEADS};
  f[3] = (form){{ns * hs, 0}, 1, SRC_SEL_HEADS};
  f[4] = (form){{hs, 0}, 1, SRC_ONE_HEAD};
  return 5;
}

/* 1 if the value's trailing dims (from index lead) are the form's. */
static int dims_are(const icl_tensor *t, int lead, const form *f) {
  if (t->ndim != lead + f->nd) return 0;
  for (int i = 0; i < f->nd; i++)
    if (t->shape[lead + i] != f->d[i]) return 0;
  return 1;
}

static int can_broadcast(const req *q) { return q->v->kind != ICL_IV_PATCH; }
static int can_per_position(const req *q) { return q->v->kind != ICL_IV_MEAN; }

/* Matches the value's shape: broadcast ([row] or [1, row]) first, then one row per position ([n_pos, row]). */
static int match_value(const req *q, const icl_tensor *t, vmap *out) {
  form f[5];
  int nf = site_forms(q, f);
  int64_t npos = q->pe - q->pb;
  for (int i = 0; i < nf && can_broadcast(q); i++)
    if (dims_are(t, 0, &f[i]) || (t->ndim >= 1 && t->shape[0] == 1 && dims_are(t, 1, &f[i]))) {
      *out = (vmap){1, f[i]};
      return 1;
    }
  for (int i = 0; i < nf && can_per_position(q); i++)
    if (f[i].src != SRC_ONE_HEAD && t->ndim >= 1 && t->shape[0] == npos && dims_are(t, 1, &f[i])) {
      *out = (vmap){npos, f[i]};
      return 1;
    }
  return 0;
}

static void append(char *buf, size_t cap, const char *s) {
  size_t l = strlen(buf);
  if (l < cap) snprintf(buf + l, cap - l, "%s", s);
}

/* 1 if an earlier form has form i's dims (one head chosen: [hsz] is both the chosen heads and one head). */
static int same_dims_before(const form *f, int i) {
  for (int j = 0; j < i; j++)
    if (f[j].nd == f[i].nd && f[j].d[0] == f[i].d[0] && (f[i].nd == 1 || f[j].d[1] == f[i].d[1])) return 1;
  return 0;
}

/* "[3, 576] (one row per position)" and the like: every shape match_value accepts here. */
static const char *expected_text(const req *q, char *buf, size_t cap) {
  form f[5];
  int nf = site_forms(q, f);
  buf[0] = 0;
  for (int per = 0; per < 2; per++) {
    if (per ? !can_per_position(q) : !can_broadcast(q)) continue;
    if (buf[0]) append(buf, cap, " or ");
    for (int i = 0, shown = 0; i < nf; i++) {
      if ((per && f[i].src == SRC_ONE_HEAD) || same_dims_before(f, i)) continue;
      char s[64];
      int n = snprintf(s, sizeof s, "%s[", shown++ ? ", " : "");
      if (per) n += snprintf(s + n, sizeof s - (size_t)n, "%lld, ", (long long)(q->pe - q->pb));
      n += snprintf(s + n, sizeof s - (size_t)n, "%lld", (long long)f[i].d[0]);
      if (f[i].nd == 2) snprintf(s + n, sizeof s - (size_t)n, ", %lld]", (long long)f[i].d[1]);
      else snprintf(s + n, sizeof s - (size_t)n, "]");
      append(buf, cap, s);
    }
    append(buf, cap, per ? " (one row per position)" : " (one row, broadcast)");
  }
  return buf;
}

static const char *shape_text(const icl_tensor *t, char *buf, size_t cap) {
  snprintf(buf, cap, "[");
  for (int i = 0; i < t->ndim; i++) {
    char s[32];
    snprintf(s, sizeof s, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    append(buf, cap, s);
  }
  append(buf, cap, "]");
  return buf;
}

static int value_error(const req *q, const icl_tensor *t, icl_error *err) {
  char got[96], want[512];
  return icl_error_set(err, ICL_EINVAL,
                       "%s: value of shape %s fits none of the point's layouts; expected %s (positions "
                       "%lld..%lld, 1-based: %lld of them)", q->name, shape_text(t, got, sizeof got),
                       expected_text(q, want, sizeof want), (long long)q->pb + 1, (long long)q->pe,
                       (long long)(q->pe - q->pb));
}

/* Column offset in a value row of selected head j's block. */
static int64_t src_col(const req *q, const form *f, int j) {
  if (f->src == SRC_ALL_HEADS) return (int64_t)q->heads[j] * q->g.hsz;
  if (f->src == SRC_SEL_HEADS) return (int64_t)j * q->g.hsz;
  return 0;
}

/* Packs the value as rows of the chosen columns (nsel*hsz or row floats), times coef for ADD; a broadcast MEAN
 * row is repeated for every position so that device copies never need a zero stride. */
static float *pack_value(const req *q, const icl_tensor *t, const vmap *vm, int64_t rows, int64_t vrow) {
  float *host = malloc((size_t)(rows * vrow) * sizeof *host);
  if (!host) return NULL;
  int64_t src_row = vm->f.nd == 2 ? vm->f.d[0] * vm->f.d[1] : vm->f.d[0];
  int blocks = q->g.heads ? q->nsel : 1;
  int64_t width = q->g.heads ? q->g.hsz : q->g.row;
  float scale = q->v->kind == ICL_IV_ADD ? q->v->coef : 1.0f;
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < blocks; j++) {
      const float *src = t->data + (vm->rows == 1 ? 0 : r) * src_row + src_col(q, &vm->f, j);
      for (int64_t e = 0; e < width; e++) host[r * vrow + j * width + e] = src[e] * scale;
    }
  return host;
}

static int add_entry(struct icl_hookctx *hk, const icl_plan_entry *e, const char *name, icl_error *err) {
  icl_plan_entry *p = realloc(hk->plan, (size_t)(hk->nplan + 1) * sizeof *p);
  if (!p) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the plan", name);
  hk->plan = p;
  hk->plan[hk->nplan++] = *e;
  return ICL_OK;
}

/* Uploads `floats` floats to a new device buffer that the context keeps (and frees). */
static int upload(struct icl_hookctx *hk, const float *host, int64_t floats, icl_buf **out, const char *name,
                  icl_error *err) {
  icl_backend *be = hk->m->be;
  icl_buf **nb = realloc(hk->vbufs, (size_t)(hk->nvbufs + 1) * sizeof *nb);
  if (!nb) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", name);
  hk->vbufs = nb;
  int rc = be->ops->buf_alloc(be, (size_t)floats * 4, ICL_BUF_ACT, out, err);
  if (rc) return rc;
  hk->vbufs[hk->nvbufs++] = *out;
  return be->ops->write(be, *out, 0, host, (size_t)floats * 4, err);
}

/* The span entries of a request: one per chosen head of a per-head point (ADD: the whole row), else one. */
static int span_entries(struct icl_hookctx *hk, const req *q, icl_plan_entry base, icl_error *err) {
  int per_head = q->g.heads && base.op != ICL_PLAN_ADD;
  int rc = ICL_OK;
  for (int j = 0; j < (per_head ? q->nsel : 1) && !rc; j++) {
    icl_plan_entry e = base;
    e.col = per_head ? (int64_t)q->heads[j] * q->g.hsz : 0;
    e.ncol = per_head ? q->g.hsz : q->g.row;
    e.vcol = per_head && base.op == ICL_PLAN_COPY ? (int64_t)j * q->g.hsz : 0;
    rc = add_entry(hk, &e, q->name, err);
  }
  return rc;
}

/* MEAN, PATCH, ADD: match, pack and upload the value, then its COPY or ADD entries. */
static int value_entries(struct icl_hookctx *hk, const req *q, icl_plan_entry base, icl_error *err) {
  const icl_tensor *t = q->v->value;
  if (!t) return icl_error_set(err, ICL_EINVAL, "%s: this intervention needs a value tensor", q->name);
  vmap vm;
  if (!match_value(q, t, &vm)) return value_error(q, t, err);
  int64_t npos = q->pe - q->pb, rows = q->v->kind == ICL_IV_MEAN ? npos : vm.rows;
  int64_t vrow = q->g.heads ? q->nsel * q->g.hsz : q->g.row;
  float *host = pack_value(q, t, &vm, rows, vrow);
  if (!host) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the value", q->name);
  int rc = upload(hk, host, rows * vrow, &base.vbuf, q->name, err);
  free(host);
  if (rc) return rc;
  base.op = q->v->kind == ICL_IV_ADD ? ICL_PLAN_ADD : ICL_PLAN_COPY;
  base.vstride = vrow;
  base.vrows = rows;
  return span_entries(hk, q, base, err);
}

/* Checks what the request may do at this site and fills in its heads. */
static int check_request(req *q, icl_error *err) {
  const icl_intervention *v = q->v;
  if (q->hp == HP_PATTERN)
    return icl_error_set(err, ICL_EINVAL, "%s: the pattern is an output; use a knockout to change attention", q->name);
  if (v->heads && !q->g.heads)
    return icl_error_set(err, ICL_EINVAL, "%s: heads given for a point without heads", q->name);
  if (v->heads && v->kind == ICL_IV_ADD)
    return icl_error_set(err, ICL_EINVAL, "%s: add acts on the whole point; heads are not supported", q->name);
  if (q->g.heads)
    return icl_hk_head_list(v->heads, v->n_heads, q->g.heads, v->label ? v->label : q->name, &q->heads, &q->nsel, err);
  return ICL_OK;
}

static int resolve_at(struct icl_hookctx *hk, int layer, int hp, const char *point, void *ud, icl_error *err) {
  const iv_req *r = ud;
  req q = {.v = r->v, .layer = layer, .hp = hp, .g = icl_hk_geom_of(hk->m, hp), .pb = r->pb, .pe = r->pe};
  if (q.v->label) snprintf(q.name, sizeof q.name, "%s (%s)", q.v->label, point); /* "patch[1] (blocks.0.hook_z)" */
  else snprintf(q.name, sizeof q.name, "%s", point);
  int rc = check_request(&q, err);
  icl_plan_entry base = {.op = ICL_PLAN_FILL, .layer = layer, .hp = hp, .pb = q.pb, .pe = q.pe, .row = q.g.row};
  if (!rc && q.v->kind == ICL_IV_ZERO) rc = span_entries(hk, &q, base, err);
  else if (!rc && (q.v->kind == ICL_IV_MEAN || q.v->kind == ICL_IV_PATCH || q.v->kind == ICL_IV_ADD))
    rc = value_entries(hk, &q, base, err);
  else if (!rc) rc = icl_error_set(err, ICL_EINVAL, "%s: intervention kind %d cannot act on a point", q.name, (int)q.v->kind);
  if (!rc) *icl_hk_want(hk, layer, hp) |= ICL_W_IV;
  free(q.heads);
  return rc;
}

/* Checks a knockout's or mask's edges (0-based, negative from the end) into out, 0-based from the start; the
 * messages show 1-based positions. */
static int check_edges(const struct icl_hookctx *hk, const icl_intervention *v, const char *what, int64_t *out,
                       icl_error *err) {
  const char *field = v->kind == ICL_IV_MASK ? "allow" : "edges";
  for (int64_t j = 0; j < v->n_edges; j++) {
    char w[160];
    snprintf(w, sizeof w, "%s.%s[%lld]", what, field, (long long)j + 1);
    int64_t *q = &out[2 * j], *kk = &out[2 * j + 1];
    int rc = icl_hk_position(v->edges[2 * j], hk->n, w, q, err);
    if (!rc) rc = icl_hk_position(v->edges[2 * j + 1], hk->n, w, kk, err);
    if (rc) return rc;
    if (*kk > *q)
      return icl_error_set(err, ICL_EINVAL, "%s: key position after query position (%lld > %lld)", w,
                           (long long)*kk + 1, (long long)*q + 1);
  }
  return ICL_OK;
}

/* KNOCKOUT and MASK: one MASK entry per request, its layer, heads and edges checked here. */
static int resolve_knockout(struct icl_hookctx *hk, const icl_intervention *v, icl_error *err) {
  const icl_hparams *h = &hk->m->hp;
  int allow = v->kind == ICL_IV_MASK;
  const char *what = v->label ? v->label : allow ? "mask" : "knockout";
  if (v->layer < 0 || v->layer >= h->n_layer)
    return icl_error_set(err, ICL_EINVAL, "%s.layer: %d out of range 0..%d", what, v->layer, h->n_layer - 1);
  int *heads = NULL, nsel = 0;
  int rc = icl_hk_head_list(v->heads, v->n_heads, h->n_head, what, &heads, &nsel, err);
  free(heads);
  if (rc) return rc;
  if (v->n_edges < 0 || v->n_edges > INT64_MAX / 16 || (v->n_edges > 0 && !v->edges))
    return icl_error_set(err, ICL_EINVAL, "%s.%s: %lld pairs %s", what, allow ? "allow" : "edges",
                         (long long)v->n_edges, v->edges ? "(a count out of range)" : "but no array");
  int64_t *edges = malloc((size_t)(v->n_edges > 0 ? 2 * v->n_edges : 1) * sizeof *edges);
  if (!edges) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the edges", what);
  icl_plan_entry e = {.op = ICL_PLAN_MASK, .layer = v->layer, .hp = HP_PATTERN, .heads = v->heads,
                      .n_heads = v->heads ? v->n_heads : 0, .edges = edges, .n_edges = v->n_edges, .allow = allow};
  rc = check_edges(hk, v, what, edges, err);
  if (!rc) rc = add_entry(hk, &e, what, err); /* the entry owns the edges from here on (icl_hooks_end frees them) */
  if (rc) return free(edges), rc;
  hk->ko_layer[v->layer] = 1;
  return ICL_OK;
}

/* The knockout mask's host and device memory, sized for the run's longest chunk (and the allowed-edge marks of
 * one chunk when a mask keeps edges). */
static int alloc_mask(struct icl_hookctx *hk, int any_allow, icl_error *err) {
  icl_model *m = hk->m;
  size_t floats = (size_t)hk->n * (size_t)m->chunk * (size_t)m->hp.n_head;
  hk->mask_host = malloc(floats * sizeof(float));
  if (!hk->mask_host) return icl_error_set(err, ICL_ENOMEM, "knockout: no host memory for the mask");
  if (any_allow && !(hk->allowed = malloc((size_t)hk->n * (size_t)m->chunk)))
    return icl_error_set(err, ICL_ENOMEM, "mask: no host memory for the allowed edges");
  return m->be->ops->buf_alloc(m->be, floats * 4, ICL_BUF_ACT, &hk->mask_buf, err);
}

/* The point pattern of an intervention into *out: its full hook name, or a short one ("z", "result", "q", "k",
 * "v"; NULL: "z" for ZERO, MEAN, and PATCH with a layer) of attention layer v->layer, written into buf. */
static int hook_of(const struct icl_hookctx *hk, const icl_intervention *v, const char *what, char *buf, size_t cap,
                   const char **out, icl_error *err) {
  const char *h = v->hook;
  *out = h;
  if (h && strchr(h, '.')) return ICL_OK;
  int by_layer = v->kind == ICL_IV_ZERO || v->kind == ICL_IV_MEAN || (v->kind == ICL_IV_PATCH && v->layer != -1);
  if (!h && !by_layer) return icl_error_set(err, ICL_EINVAL, "%s.hook: required", what);
  if (!h) h = "z";
  if (strcmp(h, "z") && strcmp(h, "result") && strcmp(h, "q") && strcmp(h, "k") && strcmp(h, "v"))
    return icl_error_set(err, ICL_EINVAL, "%s.hook: '%s' is not z, result, q, k, v or a full hook name", what, h);
  if (v->layer == -1) return icl_error_set(err, ICL_EINVAL, "%s.layer: required with the short hook '%s'", what, h);
  if (v->layer < 0 || v->layer >= hk->m->hp.n_layer)
    return icl_error_set(err, ICL_EINVAL, "%s.layer: %d out of range 0..%d", what, v->layer, hk->m->hp.n_layer - 1);
  snprintf(buf, cap, "blocks.%d.attn.hook_%s", v->layer, h);
  *out = buf;
  return ICL_OK;
}

int icl_hk_resolve_interventions(struct icl_hookctx *hk, icl_error *err) {
  const icl_run_opts *o = hk->o;
  for (int i = 0; i < o->n_interventions; i++) {
    const icl_intervention *v = &o->interventions[i];
    if (v->kind == ICL_IV_KNOCKOUT || v->kind == ICL_IV_MASK) continue;
    char what[64], name[96];
    if (v->label) snprintf(what, sizeof what, "%s", v->label);
    else snprintf(what, sizeof what, "intervention[%d]", i + 1);
    const char *hook;
    iv_req r = {.v = v};
    int rc = hook_of(hk, v, what, name, sizeof name, &hook, err);
    if (!rc) rc = icl_hk_pos_range(v->pos_begin, v->pos_end, hk->n, &r.pb, &r.pe, what, err);
    if (rc) return rc;
    int c = icl_hk_for_points(hk, hook, resolve_at, &r, err);
    if (c < 0) return -c;
  }
  return ICL_OK;
}

int icl_hk_resolve_knockouts(struct icl_hookctx *hk, icl_error *err) {
  int any = 0, any_allow = 0;
  for (int i = 0; i < hk->o->n_interventions; i++) {
    const icl_intervention *v = &hk->o->interventions[i];
    if (v->kind != ICL_IV_KNOCKOUT && v->kind != ICL_IV_MASK) continue;
    int rc = resolve_knockout(hk, v, err);
    if (rc) return rc;
    any = 1, any_allow |= v->kind == ICL_IV_MASK;
  }
  return any ? alloc_mask(hk, any_allow, err) : ICL_OK;
}
