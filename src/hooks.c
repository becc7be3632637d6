/* Hook points: name resolution, captures (copied to host tensors), interventions applied on the device
 * (zero/mean ablation, patching, steering, attention knockout) and the slow host-callback path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks_internal.h"
#include "ops.h"

static const char *SUFFIX[HP_LAYER_COUNT] = {
    [HP_RESID_PRE] = "hook_resid_pre",    [HP_LN1] = "ln1.hook_normalized",
    [HP_Q] = "attn.hook_q",               [HP_K] = "attn.hook_k",
    [HP_V] = "attn.hook_v",               [HP_PATTERN] = "attn.hook_pattern",
    [HP_Z] = "attn.hook_z",               [HP_RESULT] = "attn.hook_result",
    [HP_ATTN_OUT] = "hook_attn_out",      [HP_LN1_POST] = "ln1_post.hook_normalized",
    [HP_RESID_MID] = "hook_resid_mid",    [HP_LN2] = "ln2.hook_normalized",
    [HP_MLP_PRE] = "mlp.hook_pre",        [HP_MLP_POST] = "mlp.hook_post",
    [HP_MLP_OUT] = "hook_mlp_out",        [HP_LN2_POST] = "ln2_post.hook_normalized",
    [HP_RESID_POST] = "hook_resid_post"};

enum { W_CAPTURE = 1, W_IV = 2, W_CALLBACK = 4 };

/* Layout of a point per position: row floats, split into `heads` blocks of hsz (heads = 0: not per head). */
typedef struct geom {
  int64_t row, hsz;
  int heads;
} geom;

typedef struct cap {
  int layer, hp;
  int64_t pb, pe;
  int *heads, nsel;
  int index; /* in res */
} cap;

typedef struct iv {
  const icl_intervention *src;
  int layer, hp;
  int64_t pb, pe;
  int *heads, nsel;
  icl_buf *vbuf;  /* uploaded value (MEAN, PATCH, ADD) */
  int64_t vrow;   /* floats per value row */
  int64_t vrows;  /* rows in vbuf (1 = broadcast) */
} iv;

struct icl_hookctx {
  icl_session *s;
  const icl_run_opts *o;
  icl_run_result *res;
  int64_t n, p0, nc;
  cap *caps;
  int ncaps;
  iv *ivs;
  int nivs;
  unsigned char *want; /* [(layer+1)*HP_COUNT + hp] */
  int *ko_layer;       /* per layer: 1 if knocked out */
  float *mask_host;    /* [n, chunk, nh] */
  icl_buf *mask_buf;
  icl_dt mask_view;
};

static geom point_geom(const icl_model *m, int hp) {
  const icl_hparams *h = &m->hp;
  int64_t hd = h->head_dim;
  switch (hp) {
  case HP_Q: case HP_Z: return (geom){hd * h->n_head, hd, h->n_head};
  case HP_K: case HP_V: return (geom){hd * h->n_head_kv, hd, h->n_head_kv};
  case HP_RESULT: return (geom){(int64_t)h->n_embd * h->n_head, h->n_embd, h->n_head};
  case HP_MLP_PRE: case HP_MLP_POST: return (geom){h->n_ff, 0, 0};
  case HP_PATTERN: return (geom){0, 0, h->n_head};
  default: return (geom){h->n_embd, 0, 0};
  }
}

int icl_hook_name(const icl_model *m, int layer, int hp, char *buf, size_t len) {
  if (layer < 0) {
    const char *g = hp == HP_EMBED ? "hook_embed" : hp == HP_LN_FINAL ? "ln_final.hook_normalized" : NULL;
    if (!g) return 0;
    snprintf(buf, len, "%s", g);
    return 1;
  }
  if ((hp == HP_LN1_POST || hp == HP_LN2_POST) && !m->arch->post_norms) return 0;
  if (hp >= HP_LN2 && hp <= HP_LN2_POST && m->hp.n_ff == 0) return 0; /* attention-only (icl-attn) */
  snprintf(buf, len, "blocks.%d.%s", layer, SUFFIX[hp]);
  return 1;
}

/* Glob match where '*' matches one dot-free run of characters. */
static int glob(const char *p, const char *s) {
  if (!*p) return !*s;
  if (*p == '*') {
    for (const char *t = s;; t++) {
      if (glob(p + 1, t)) return 1;
      if (!*t || *t == '.') return 0;
    }
  }
  return *p == *s && glob(p + 1, s + 1);
}

/* Calls fn for every hook point of m whose name matches pattern; returns the match count or an error (< 0). */
typedef int (*point_fn)(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud, icl_error *err);
static int for_points(struct icl_hookctx *hk, const char *pattern, point_fn fn, void *ud, icl_error *err) {
  const icl_model *m = hk->s->m;
  int count = 0;
  char name[96];
  for (int layer = -1; layer < m->hp.n_layer; layer++)
    for (int hp = 0; hp < (layer < 0 ? HP_COUNT : HP_LAYER_COUNT); hp++) {
      if (layer < 0 && hp < HP_LAYER_COUNT) continue;
      if (!icl_hook_name(m, layer, hp, name, sizeof name) || !glob(pattern, name)) continue;
      int rc = fn(hk, layer, hp, name, ud, err);
      if (rc) return -rc;
      count++;
    }
  if (count == 0)
    return -icl_error_set(err, ICL_EINVAL,
                          "hook point '%s' matches nothing (names look like blocks.0.hook_resid_post, "
                          "blocks.*.attn.hook_pattern; see docs/hooks.md)", pattern);
  return count;
}

/* The positions [*b, *e) of a request's range [pb, pe) inside the chunk [p0, p0+n); 0 if they do not meet. */
static int overlap(int64_t pb, int64_t pe, int64_t p0, int64_t n, int64_t *b, int64_t *e) {
  *b = pb > p0 ? pb : p0;
  *e = pe < p0 + n ? pe : p0 + n;
  return *b < *e;
}

static unsigned char *want_at(struct icl_hookctx *hk, int layer, int hp) { return &hk->want[(layer + 1) * HP_COUNT + hp]; }

/* Normalizes a position range against the run length n: negatives count from the end, (0,0) = all. */
static int pos_range(int64_t b, int64_t e, int64_t n, int64_t *pb, int64_t *pe, const char *what, icl_error *err) {
  if (b == 0 && e == 0) e = n;
  if (b < 0) b += n;
  if (e <= 0) e += n;
  if (b < 0 || e > n || b >= e)
    return icl_error_set(err, ICL_EINVAL, "%s: positions %lld..%lld (1-based) are outside the run of %lld tokens",
                         what, (long long)b + 1, (long long)e, (long long)n);
  *pb = b;
  *pe = e;
  return ICL_OK;
}

/* Copies and checks a head list (NULL = all heads of the point). */
static int head_list(const int *heads, int nh, int max_heads, const char *what, int **out, int *nsel, icl_error *err) {
  int n = heads ? nh : max_heads;
  int *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", what);
  for (int i = 0; i < n; i++) {
    h[i] = heads ? heads[i] : i;
    if (h[i] < 0 || h[i] >= max_heads) {
      free(h);
      return icl_error_set(err, ICL_EINVAL, "%s: head %d out of range 0..%d", what, heads[i], max_heads - 1);
    }
  }
  *out = h;
  *nsel = n;
  return ICL_OK;
}

/* ---- captures ---- */

static int add_capture(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud, icl_error *err) {
  const icl_capture *c = ud;
  geom g = point_geom(hk->s->m, hp);
  cap *nc = realloc(hk->caps, (size_t)(hk->ncaps + 1) * sizeof *nc);
  if (!nc) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  hk->caps = nc;
  cap *k = &hk->caps[hk->ncaps];
  memset(k, 0, sizeof *k);
  k->layer = layer;
  k->hp = hp;
  int rc = pos_range(c->pos_begin, c->pos_end, hk->n, &k->pb, &k->pe, name, err);
  if (rc) return rc;
  if (c->heads && !g.heads) return icl_error_set(err, ICL_EINVAL, "capture %s: heads given for a point without heads", name);
  if (g.heads && (rc = head_list(c->heads, c->n_heads, g.heads, name, &k->heads, &k->nsel, err))) return rc;
  hk->ncaps++;
  *want_at(hk, layer, hp) |= W_CAPTURE;
  return ICL_OK;
}

static icl_tensor *capture_tensor(struct icl_hookctx *hk, const cap *k, int64_t npos) {
  geom g = point_geom(hk->s->m, k->hp);
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

static size_t capture_bytes(struct icl_hookctx *hk, const cap *k) {
  geom g = point_geom(hk->s->m, k->hp);
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

static int setup_results(struct icl_hookctx *hk, icl_error *err) {
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
    icl_hook_name(hk->s->m, hk->caps[i].layer, hk->caps[i].hp, name, sizeof name);
    res->names[i] = strdup(name);
    hk->caps[i].index = i;
    if (!hk->o->stream) res->captures[i] = capture_tensor(hk, &hk->caps[i], hk->caps[i].pe - hk->caps[i].pb);
    if (!res->names[i] || (!hk->o->stream && !res->captures[i]))
      return icl_error_set(err, ICL_ENOMEM, "captures: out of memory for %s", name);
  }
  return ICL_OK;
}

/* ---- interventions ---- */

static int add_iv(struct icl_hookctx *hk, int layer, int hp, const char *point, void *ud, icl_error *err) {
  const icl_intervention *v = ud;
  char name[192]; /* messages name the caller's entry and the point: "patch[1] (blocks.0.hook_z)" */
  if (v->label) snprintf(name, sizeof name, "%s (%s)", v->label, point);
  else snprintf(name, sizeof name, "%s", point);
  icl_model *m = hk->s->m;
  geom g = point_geom(m, hp);
  if (hp == HP_PATTERN)
    return icl_error_set(err, ICL_EINVAL, "%s: the pattern is an output; use a knockout to change attention", name);
  iv *n = realloc(hk->ivs, (size_t)(hk->nivs + 1) * sizeof *n);
  if (!n) return icl_error_set(err, ICL_ENOMEM, "intervention: out of memory");
  hk->ivs = n;
  iv *k = &hk->ivs[hk->nivs];
  memset(k, 0, sizeof *k);
  k->src = v;
  k->layer = layer;
  k->hp = hp;
  hk->nivs++; /* counted now so icl_hooks_end frees what follows on error */
  int rc = pos_range(v->pos_begin, v->pos_end, hk->n, &k->pb, &k->pe, name, err);
  if (rc) return rc;
  if (v->heads && !g.heads) return icl_error_set(err, ICL_EINVAL, "%s: heads given for a point without heads", name);
  if (v->heads && v->kind == ICL_IV_ADD)
    return icl_error_set(err, ICL_EINVAL, "%s: add acts on the whole point; heads are not supported", name);
  if (g.heads && (rc = head_list(v->heads, v->n_heads, g.heads, name, &k->heads, &k->nsel, err))) return rc;
  *want_at(hk, layer, hp) |= W_IV;
  if (v->kind == ICL_IV_ZERO) return ICL_OK;

  /* the value: rows of vrow floats, either one row (broadcast) or one per position in [pb, pe) */
  const icl_tensor *t = v->value;
  if (!t) return icl_error_set(err, ICL_EINVAL, "%s: this intervention needs a value tensor", name);
  int64_t npos = k->pe - k->pb, unit = g.heads ? g.hsz : g.row;
  int64_t per_pos_all = g.row, per_pos_sel = g.heads ? k->nsel * g.hsz : g.row;
  int64_t rows = -1, src_row = 0;
  if (v->kind != ICL_IV_PATCH && (t->numel == per_pos_sel || t->numel == per_pos_all || t->numel == unit))
    rows = 1, src_row = t->numel;
  else if (v->kind != ICL_IV_MEAN && (t->numel == npos * per_pos_sel || t->numel == npos * per_pos_all))
    rows = npos, src_row = t->numel / npos;
  if (rows < 0)
    return icl_error_set(err, ICL_EINVAL,
                         "%s: value has %lld elements; expected %lld per position%s%s (positions %lld..%lld, 1-based: "
                         "%lld of them)", name, (long long)t->numel, (long long)per_pos_sel,
                         v->kind != ICL_IV_PATCH ? " (one row, broadcast)" : "",
                         v->kind != ICL_IV_MEAN ? " or one row per position" : "", (long long)k->pb + 1,
                         (long long)k->pe, (long long)npos);
  /* build rows of the selected heads only (vrow = nsel*hsz), scaled by coef for ADD; a broadcast MEAN row is
   * repeated for every position so that device copies never need a zero stride */
  int64_t src_rows = rows;
  if (v->kind == ICL_IV_MEAN) rows = npos;
  k->vrow = per_pos_sel;
  k->vrows = rows;
  float *host = malloc((size_t)(rows * k->vrow) * sizeof *host);
  if (!host) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the value", name);
  for (int64_t r = 0; r < rows; r++)
    for (int j = 0; j < (g.heads ? k->nsel : 1); j++) {
      int64_t n_el = g.heads ? g.hsz : g.row;
      const float *src = t->data + (src_rows == 1 ? 0 : r) * src_row;
      if (g.heads && src_row == per_pos_all) src += (int64_t)k->heads[j] * g.hsz; /* all heads given */
      else if (g.heads && src_row == per_pos_sel) src += (int64_t)j * g.hsz;      /* selected heads given */
      for (int64_t e = 0; e < n_el; e++)
        host[r * k->vrow + j * n_el + e] = src[e] * (v->kind == ICL_IV_ADD ? v->coef : 1.0f);
    }
  icl_backend *be = m->be;
  size_t bytes = (size_t)(rows * k->vrow) * 4;
  rc = be->ops->buf_alloc(be, bytes, ICL_BUF_ACT, &k->vbuf, err);
  if (!rc) rc = be->ops->write(be, k->vbuf, 0, host, bytes, err);
  free(host);
  return rc;
}

static int apply_iv(struct icl_hookctx *hk, const iv *k, const icl_dt *view, int64_t n, icl_error *err) {
  icl_backend *be = hk->s->m->be;
  geom g = point_geom(hk->s->m, k->hp);
  int64_t b, e;
  if (!overlap(k->pb, k->pe, hk->p0, n, &b, &e)) return ICL_OK;
  int64_t r0 = b - hk->p0, nr = e - b, vr0 = k->vrows == 1 ? 0 : b - k->pb;
  int64_t vstride = k->vrows == 1 ? 0 : k->vrow;
  icl_dt vb = {.buf = k->vbuf, .type = ICL_TYPE_F32, .ne = {k->vrow, k->vrows, 1, 1}};
  int rc = ICL_OK;
  switch (k->src->kind) {
  case ICL_IV_ZERO:
    if (!g.heads) return icl_op_fill2d(be, view, r0 * g.row, g.row, nr, g.row, 0.0f, err);
    for (int j = 0; j < k->nsel && !rc; j++)
      rc = icl_op_fill2d(be, view, r0 * g.row + k->heads[j] * g.hsz, g.row, nr, g.hsz, 0.0f, err);
    return rc;
  case ICL_IV_MEAN:
  case ICL_IV_PATCH:
    if (!g.heads) return icl_op_copy2d(be, &vb, vr0 * k->vrow, vstride, view, r0 * g.row, g.row, nr, g.row, err);
    for (int j = 0; j < k->nsel && !rc; j++)
      rc = icl_op_copy2d(be, &vb, vr0 * k->vrow + j * g.hsz, vstride, view, r0 * g.row + k->heads[j] * g.hsz, g.row,
                           nr, g.hsz, err);
    return rc;
  case ICL_IV_ADD: {
    icl_dt a = *view;
    a.offset += (size_t)(r0 * g.row) * 4;
    a.ne[0] = g.row, a.ne[1] = nr, a.ne[2] = a.ne[3] = 1;
    vb.offset = (size_t)(vr0 * k->vrow) * 4;
    vb.ne[1] = k->vrows == 1 ? 1 : nr;
    return icl_op_add(be, &a, &vb, &a, err);
  }
  default:
    return icl_error_set(err, ICL_EINVAL, "intervention kind %d cannot act on a point", (int)k->src->kind);
  }
}

/* ---- knockouts ---- */

static int setup_knockouts(struct icl_hookctx *hk, icl_error *err) {
  icl_model *m = hk->s->m;
  int any = 0;
  for (int i = 0; i < hk->o->n_interventions; i++) {
    const icl_intervention *v = &hk->o->interventions[i];
    if (v->kind != ICL_IV_KNOCKOUT) continue;
    if (v->layer < 0 || v->layer >= m->hp.n_layer)
      return icl_error_set(err, ICL_EINVAL, "knockout: layer %d out of range 0..%d", v->layer, m->hp.n_layer - 1);
    for (int j = 0; j < v->n_heads; j++)
      if (v->heads[j] < 0 || v->heads[j] >= m->hp.n_head)
        return icl_error_set(err, ICL_EINVAL, "knockout: head %d out of range 0..%d", v->heads[j], m->hp.n_head - 1);
    for (int64_t j = 0; j < v->n_edges; j++) {
      int64_t q = v->edges[2 * j], kk = v->edges[2 * j + 1];
      if (q < 0 || q >= hk->n || kk < 0 || kk > q)
        return icl_error_set(err, ICL_EINVAL, "knockout: edge %lld (q %lld -> k %lld) must have 0 <= k <= q < %lld",
                             (long long)j, (long long)q, (long long)kk, (long long)hk->n);
    }
    hk->ko_layer[v->layer] = 1;
    any = 1;
  }
  if (!any) return ICL_OK;
  size_t floats = (size_t)hk->n * (size_t)m->chunk * (size_t)m->hp.n_head;
  hk->mask_host = malloc(floats * sizeof(float));
  if (!hk->mask_host) return icl_error_set(err, ICL_ENOMEM, "knockout: no host memory for the mask");
  return m->be->ops->buf_alloc(m->be, floats * 4, ICL_BUF_ACT, &hk->mask_buf, err);
}

int icl_hook_mask(struct icl_hookctx *hk, int layer, const icl_dt **out, icl_error *err) {
  *out = NULL;
  if (!hk->ko_layer || !hk->ko_layer[layer]) return ICL_OK;
  icl_model *m = hk->s->m;
  int64_t nq = hk->nc, nkv = hk->p0 + nq, nh = m->hp.n_head;
  memset(hk->mask_host, 0, (size_t)(nkv * nq * nh) * sizeof(float));
  for (int i = 0; i < hk->o->n_interventions; i++) {
    const icl_intervention *v = &hk->o->interventions[i];
    if (v->kind != ICL_IV_KNOCKOUT || v->layer != layer) continue;
    for (int64_t j = 0; j < v->n_edges; j++) {
      int64_t q = v->edges[2 * j] - hk->p0, kk = v->edges[2 * j + 1];
      if (q < 0 || q >= nq) continue;
      for (int h = 0; h < (v->heads ? v->n_heads : nh); h++) {
        int64_t head = v->heads ? v->heads[h] : h;
        hk->mask_host[(head * nq + q) * nkv + kk] = -INFINITY;
      }
    }
  }
  /* the buffer is shared by all knocked-out layers: wait until the previous layer's attention has read it */
  int rc = m->be->ops->sync(m->be, err);
  if (!rc) rc = m->be->ops->write(m->be, hk->mask_buf, 0, hk->mask_host, (size_t)(nkv * nq * nh) * 4, err);
  if (rc) return icl_error_wrap(err, "knockout mask of layer %d", layer);
  hk->mask_view = (icl_dt){.buf = hk->mask_buf, .type = ICL_TYPE_F32, .ne = {nkv, nq, nh, 1}};
  *out = &hk->mask_view;
  return ICL_OK;
}

/* ---- callbacks ---- */

static int add_callback(struct icl_hookctx *hk, int layer, int hp, const char *name, void *ud, icl_error *err) {
  (void)err; (void)name; (void)ud;
  *want_at(hk, layer, hp) |= W_CALLBACK;
  return ICL_OK;
}

/* Positions in a view: the last dimension of a [row, n] or [hsz, heads, n] view; ne[1] of a pattern. */
static int64_t view_positions(const icl_dt *v, int hp) {
  if (hp == HP_PATTERN) return v->ne[1];
  return v->ne[2] > 1 ? v->ne[2] : v->ne[1];
}

static int run_callback(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, icl_error *err) {
  icl_backend *be = hk->s->m->be;
  int64_t n = view_positions(view, hp);
  int64_t shape[3] = {n, 0, 0};
  int nd = 2;
  geom g = point_geom(hk->s->m, hp);
  if (hp == HP_PATTERN) shape[0] = g.heads, shape[1] = n, shape[2] = view->ne[0], nd = 3;
  else if (g.heads) shape[1] = g.heads, shape[2] = g.hsz, nd = 3;
  else shape[1] = g.row;
  icl_tensor *t = icl_tensor_new(nd, shape);
  if (!t) return icl_error_set(err, ICL_ENOMEM, "hook callback: out of memory");
  size_t bytes = (size_t)t->numel * 4;
  char name[96];
  icl_hook_name(hk->s->m, layer, hp, name, sizeof name);
  int rc = be->ops->read(be, view->buf, view->offset, t->data, bytes, err);
  if (!rc && hk->o->hook(hk->o->hook_ud, name, t, hk->p0, err)) rc = err->code ? err->code : ICL_EINVAL;
  if (!rc && hp != HP_PATTERN) rc = be->ops->write(be, view->buf, view->offset, t->data, bytes, err);
  icl_tensor_free(t);
  return rc;
}

/* ---- capture at a point ---- */

static int do_capture(struct icl_hookctx *hk, const cap *k, const icl_dt *view, int64_t n, icl_error *err) {
  icl_backend *be = hk->s->m->be;
  geom g = point_geom(hk->s->m, k->hp);
  int64_t b, e;
  if (!overlap(k->pb, k->pe, hk->p0, n, &b, &e)) return ICL_OK;
  icl_tensor *t = hk->res->captures[k->index];
  int64_t tb = hk->o->stream ? b : k->pb; /* position of the tensor's first row */
  int64_t r0 = b - hk->p0, nr = e - b;
  if (k->hp == HP_PATTERN) { /* view [nkv, n, nh] -> t [nsel, npos, n_total] */
    int64_t nkv = view->ne[0];
    for (int j = 0; j < k->nsel; j++)
      for (int64_t r = 0; r < nr; r++) {
        size_t off = view->offset + (size_t)(((int64_t)k->heads[j] * n + r0 + r) * nkv) * 4;
        float *dst = t->data + ((int64_t)j * t->shape[1] + (b - tb + r)) * t->shape[2];
        int rc = be->ops->read(be, view->buf, off, dst, (size_t)nkv * 4, err);
        if (rc) return rc;
      }
    return ICL_OK;
  }
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

int icl_hook_point(struct icl_hookctx *hk, int layer, int hp, const icl_dt *view, int heads, icl_error *err) {
  if (heads != point_geom(hk->s->m, hp).heads) { /* the forward pass and the hook layouts must agree */
    char name[96];
    icl_hook_name(hk->s->m, layer, hp, name, sizeof name);
    return icl_error_set(err, ICL_EINVAL, "hook %s: the forward pass gives %d heads, the hook layout expects %d", name,
                         heads, point_geom(hk->s->m, hp).heads);
  }
  unsigned char w = *want_at(hk, layer, hp);
  if (!w) return ICL_OK;
  int64_t n = view_positions(view, hp);
  int rc = ICL_OK;
  for (int i = 0; i < hk->nivs && !rc; i++)
    if (hk->ivs[i].layer == layer && hk->ivs[i].hp == hp) rc = apply_iv(hk, &hk->ivs[i], view, n, err);
  if (!rc && (w & W_CALLBACK)) rc = run_callback(hk, layer, hp, view, err);
  for (int i = 0; i < hk->ncaps && !rc; i++)
    if (hk->caps[i].layer == layer && hk->caps[i].hp == hp) rc = do_capture(hk, &hk->caps[i], view, n, err);
  return rc;
}

int icl_hook_wants(const struct icl_hookctx *hk, int layer, int hp) {
  return hk->want[(layer + 1) * HP_COUNT + hp] != 0;
}

int icl_hook_modifies(const struct icl_hookctx *hk, int layer, int hp) {
  return (hk->want[(layer + 1) * HP_COUNT + hp] & (W_IV | W_CALLBACK)) != 0;
}

int icl_hook_needs_pattern(const struct icl_hookctx *hk, int layer) { return icl_hook_wants(hk, layer, HP_PATTERN); }

/* ---- run lifecycle ---- */

static int resolve(struct icl_hookctx *hk, icl_error *err) {
  const icl_run_opts *o = hk->o;
  for (int i = 0; i < o->n_captures; i++) {
    if (!o->captures[i].pattern) return icl_error_set(err, ICL_EINVAL, "capture %d: no hook name", i);
    int c = for_points(hk, o->captures[i].pattern, add_capture, (void *)&o->captures[i], err);
    if (c < 0) return -c;
  }
  for (int i = 0; i < o->n_interventions; i++) {
    const icl_intervention *v = &o->interventions[i];
    if (v->kind == ICL_IV_KNOCKOUT) continue;
    if (!v->hook) return icl_error_set(err, ICL_EINVAL, "intervention %d: no hook name", i);
    int c = for_points(hk, v->hook, add_iv, (void *)v, err);
    if (c < 0) return -c;
  }
  if (o->n_hook_points && !o->hook) return icl_error_set(err, ICL_EINVAL, "hook points given without a callback");
  for (int i = 0; i < o->n_hook_points; i++) {
    int c = for_points(hk, o->hook_points[i], add_callback, NULL, err);
    if (c < 0) return -c;
  }
  return ICL_OK;
}

static int alloc_device_needs(struct icl_hookctx *hk, icl_error *err) {
  icl_model *m = hk->s->m;
  int rc = ICL_OK;
  for (int il = 0; il < m->hp.n_layer && !rc; il++) {
    if (icl_hook_wants(hk, il, HP_PATTERN)) rc = icl_session_need_pattern(hk->s, err);
    if (!rc && icl_hook_wants(hk, il, HP_RESULT)) rc = icl_session_need_result(hk->s, err);
  }
  return rc;
}

int icl_hooks_begin(icl_session *s, int64_t n, const icl_run_opts *o, icl_run_result *res, struct icl_hookctx **out,
                    icl_error *err) {
  icl_model *m = s->m;
  struct icl_hookctx *hk = calloc(1, sizeof *hk);
  if (!hk) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  *out = hk;
  hk->s = s, hk->o = o, hk->res = res, hk->n = n;
  hk->want = calloc((size_t)(m->hp.n_layer + 1) * HP_COUNT, 1);
  hk->ko_layer = calloc((size_t)m->hp.n_layer, sizeof *hk->ko_layer);
  if (!hk->want || !hk->ko_layer) return icl_error_set(err, ICL_ENOMEM, "run: out of memory");
  int rc = resolve(hk, err);
  if (!rc) rc = setup_knockouts(hk, err);
  if (!rc) rc = setup_results(hk, err);
  if (!rc) rc = alloc_device_needs(hk, err);
  if (!rc && (o->logits == ICL_LOGITS_ALL || o->logits == ICL_LOGITS_LAST)) { /* SELECT: logits_select.c */
    int64_t all = o->stream && o->on_chunk && n > m->chunk ? m->chunk : n; /* streaming: one chunk's rows at a time */
    int64_t shape[2] = {o->logits == ICL_LOGITS_ALL ? all : 1, m->hp.n_vocab};
    res->logits = icl_tensor_new(2, shape);
    if (!res->logits)
      rc = icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld x %lld logits", (long long)shape[0],
                         (long long)shape[1]);
  }
  return rc;
}

int icl_hooks_chunk_begin(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err) {
  hk->p0 = pos0;
  hk->nc = n;
  if (!hk->o->stream) return ICL_OK;
  for (int i = 0; i < hk->ncaps; i++) { /* streaming: tensors hold this chunk's positions only */
    cap *k = &hk->caps[i];
    int64_t b, e;
    icl_tensor_free(hk->res->captures[i]);
    hk->res->captures[i] = NULL;
    if (!overlap(k->pb, k->pe, pos0, n, &b, &e)) continue;
    hk->res->captures[i] = capture_tensor(hk, k, e - b);
    if (!hk->res->captures[i]) return icl_error_set(err, ICL_ENOMEM, "capture: out of memory");
  }
  return ICL_OK;
}

int icl_hooks_chunk_end(struct icl_hookctx *hk, int64_t pos0, int64_t n, icl_error *err) {
  if (!hk->o->on_chunk) return ICL_OK;
  int rc = hk->s->m->be->ops->sync(hk->s->m->be, err);
  if (!rc && hk->o->on_chunk(hk->o->chunk_ud, pos0, n, hk->res, err)) rc = err->code ? err->code : ICL_EINVAL;
  return rc;
}

void icl_hooks_end(struct icl_hookctx *hk) {
  if (!hk) return;
  icl_backend *be = hk->s->m->be;
  icl_error e; /* teardown: the run's result is already decided; the sync only keeps buffers alive until unused */
  be->ops->sync(be, &e);
  for (int i = 0; i < hk->ncaps; i++) free(hk->caps[i].heads);
  for (int i = 0; i < hk->nivs; i++) {
    free(hk->ivs[i].heads);
    if (hk->ivs[i].vbuf) be->ops->buf_free(be, hk->ivs[i].vbuf);
  }
  if (hk->mask_buf) be->ops->buf_free(be, hk->mask_buf);
  free(hk->mask_host);
  free(hk->caps);
  free(hk->ivs);
  free(hk->want);
  free(hk->ko_layer);
  free(hk);
}

void icl_run_result_free(icl_run_result *res) {
  if (!res) return;
  icl_tensor_free(res->logits);
  icl_tensor_free(res->lse);
  for (int i = 0; i < res->n_captures; i++) {
    if (res->names) free(res->names[i]);
    if (res->captures) icl_tensor_free(res->captures[i]);
  }
  free(res->names);
  free(res->captures);
  memset(res, 0, sizeof *res);
}
