/* Sessions: the KV cache and chunk activations, incremental evaluation, and hooked runs. The top of the run path:
 * it owns the run's result and logits, the run cache of icl_model_run, and the buffers the hooks ask for; it calls
 * down into the logits (logits_select.c), the forward pass and the hooks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "logits_select.h"

static int alloc_view(icl_session *s, icl_buf **b, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t type, icl_dt *out,
                      icl_error *err) {
  icl_backend *be = s->m->be;
  size_t bytes = (size_t)(ne0 * ne1 * ne2) * 4;
  int rc = be->ops->buf_alloc(be, bytes, ICL_BUF_ACT, b, err);
  if (rc) return icl_error_wrap(err, "session: allocating %zu bytes", bytes);
  s->bytes += bytes;
  if (out) *out = (icl_dt){.buf = *b, .type = type, .ne = {ne0, ne1, ne2, 1}};
  return ICL_OK;
}

/* Activation buffers, one per view (each stays under maxStorageBufferRange-sized bindings). */
enum { A_X, A_X2, A_H, A_Q, A_Z, A_O, A_GATE, A_UP, A_IDS, A_POS, A_LOGITS, A_COUNT };

static int alloc_acts(icl_session *s, icl_error *err) {
  const icl_hparams *hp = &s->m->hp;
  icl_acts *a = &s->a;
  int64_t C = s->m->chunk, d = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, ff = hp->n_ff > 0 ? hp->n_ff : 1;
  size_t budget = s->m->be->logits_chunk_bytes ? s->m->be->logits_chunk_bytes : (size_t)64 << 20;
  int64_t rows = (int64_t)(budget / ((size_t)hp->n_vocab * 4)); /* logits in sub-chunks of <= budget bytes */
  a->logit_rows = (int)(rows < 1 ? 1 : rows > C ? C : rows);
  struct { int64_t n0, n1; uint32_t type; icl_dt *v; } spec[A_COUNT] = {
      {d, C, ICL_TYPE_F32, &a->x},      {d, C, ICL_TYPE_F32, &a->x2},    {d, C, ICL_TYPE_F32, &a->h},
      {qd, C, ICL_TYPE_F32, &a->q},     {qd, C, ICL_TYPE_F32, &a->z},     {d, C, ICL_TYPE_F32, &a->o},
      {ff, C, ICL_TYPE_F32, &a->gate},  {ff, C, ICL_TYPE_F32, &a->up},   {C, 1, ICL_TYPE_I32, &a->ids},
      {C, 1, ICL_TYPE_I32, &a->pos},
      {hp->n_vocab, a->logit_rows, ICL_TYPE_F32, &a->logits}};
  for (int i = 0; i < A_COUNT; i++) {
    icl_buf *b;
    int rc = alloc_view(s, &b, spec[i].n0, spec[i].n1, 1, spec[i].type, spec[i].v, err);
    if (rc) return rc;
  }
  return ICL_OK;
}

static int alloc_kv(icl_session *s, icl_error *err) {
  const icl_hparams *hp = &s->m->hp;
  int nl = hp->n_layer;
  s->kv_bufs = calloc((size_t)nl * 2, sizeof *s->kv_bufs);
  s->k = calloc((size_t)nl, sizeof *s->k);
  s->v = calloc((size_t)nl, sizeof *s->v);
  if (!s->kv_bufs || !s->k || !s->v) return icl_error_set(err, ICL_ENOMEM, "session: out of host memory");
  for (int il = 0; il < nl; il++) {
    int rc = alloc_view(s, &s->kv_bufs[2 * il], hp->head_dim, hp->n_head_kv, s->m->n_ctx, ICL_TYPE_F32, &s->k[il], err);
    if (!rc)
      rc = alloc_view(s, &s->kv_bufs[2 * il + 1], hp->head_dim, hp->n_head_kv, s->m->n_ctx, ICL_TYPE_F32, &s->v[il],
                      err);
    if (rc) return rc;
  }
  return ICL_OK;
}

/* icl-attn extras: the chunk's continuous inputs, the raw last key per layer for smeared keys. */
static int alloc_attn_extras(icl_session *s, icl_error *err) {
  const icl_hparams *hp = &s->m->hp;
  icl_buf *b;
  int rc = ICL_OK;
  if (hp->input_length > 0)
    rc = alloc_view(s, &b, hp->input_length, s->m->chunk, 1, ICL_TYPE_F32, &s->a.inputs, err);
  if (!rc && s->m->feat.smeared_key)
    rc = alloc_view(s, &b, (int64_t)hp->n_head_kv * hp->head_dim, hp->n_layer, 1, ICL_TYPE_F32, &s->k_last, err);
  return rc;
}

int icl_session_new(icl_model *m, icl_session **out, icl_error *err) {
  *out = NULL;
  icl_session *s = calloc(1, sizeof *s);
  if (!s) return icl_error_set(err, ICL_ENOMEM, "session: out of host memory");
  s->m = m;
  int rc = alloc_kv(s, err);
  if (!rc) rc = alloc_acts(s, err);
  if (!rc) rc = alloc_attn_extras(s, err);
  if (rc) {
    icl_session_free(s);
    return rc;
  }
  *out = s;
  return ICL_OK;
}

static void free_buf(icl_session *s, icl_buf *b) {
  if (b) s->m->be->ops->buf_free(s->m->be, b);
}

void icl_session_free(icl_session *s) {
  if (!s) return;
  icl_error e;
  s->m->be->ops->sync(s->m->be, &e);
  for (int i = 0; s->kv_bufs && i < 2 * s->m->hp.n_layer; i++) free_buf(s, s->kv_bufs[i]);
  icl_dt *views[] = {&s->a.x, &s->a.x2, &s->a.h, &s->a.q, &s->a.z, &s->a.o, &s->a.gate, &s->a.up, &s->a.ids, &s->a.pos,
                     &s->a.logits};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++) free_buf(s, views[i]->buf);
  free_buf(s, s->a.pattern_buf);
  free_buf(s, s->a.result_buf);
  free_buf(s, s->a.zmask_buf);
  free_buf(s, s->a.inputs.buf);
  free_buf(s, s->k_last.buf);
  free(s->kv_bufs);
  free(s->k);
  free(s->v);
  free(s->run_tokens);
  free(s);
}

/* The pattern buffer and the hook_result scratch, allocated on first need. */
static int need_pattern(icl_session *s, icl_error *err) {
  if (s->a.pattern_buf) return ICL_OK;
  return alloc_view(s, &s->a.pattern_buf, s->m->n_ctx, s->m->chunk, s->m->hp.n_head, ICL_TYPE_F32, NULL, err);
}

static int need_result(icl_session *s, icl_error *err) {
  if (s->a.result_buf) return ICL_OK;
  const icl_hparams *hp = &s->m->hp;
  int rc = alloc_view(s, &s->a.result_buf, hp->n_embd, hp->n_head, s->m->chunk, ICL_TYPE_F32, &s->a.result, err);
  if (!rc)
    rc = alloc_view(s, &s->a.zmask_buf, (int64_t)hp->head_dim * hp->n_head, s->m->chunk, 1, ICL_TYPE_F32, NULL, err);
  return rc;
}

void icl_session_reset(icl_session *s) { s->n_past = 0; }
int64_t icl_session_pos(const icl_session *s) { return s->n_past; }
size_t icl_session_peak_bytes(const icl_session *s) { return s->bytes; }

/* Reads logits rows of the chunk just evaluated into dst (row r of the chunk -> dst row r - first). */
/* Non-finite logits (NaN or Inf weights, an overflowing activation) are an error naming the run and the first
 * position, not garbage handed on: rows [0, n) of dst are positions pos0.. of the run `what`. */
static int check_finite(const float *dst, int64_t n, int64_t V, int64_t pos0, const char *what, icl_error *err) {
  for (int64_t i = 0; i < n * V; i++)
    if (!isfinite(dst[i]))
      return icl_error_set(err, ICL_EFORMAT,
                           "%s: the logits at position %lld (1-based; vocabulary entry %lld) are %s: the weights or "
                           "activations are not finite (icl info --check MODEL finds non-finite weights)",
                           what, (long long)(pos0 + i / V + 1), (long long)(i % V), isnan(dst[i]) ? "NaN" : "infinite");
  return ICL_OK;
}

static int read_logits_raw(icl_session *s, int64_t first, int64_t n, float *dst, icl_error *err);

/* Reads logits rows [first, first + n) of the chunk starting at run position c0 and checks them. */
static int read_logits(icl_session *s, int64_t first, int64_t n, float *dst, int64_t c0, const char *what,
                       icl_error *err) {
  int rc = read_logits_raw(s, first, n, dst, err);
  return rc ? rc : check_finite(dst, n, s->m->hp.n_vocab, c0 + first, what, err);
}

static int read_logits_raw(icl_session *s, int64_t first, int64_t n, float *dst, icl_error *err) {
  icl_backend *be = s->m->be;
  int64_t V = s->m->hp.n_vocab, step = s->a.logit_rows;
  for (int64_t r = first; r < first + n; r += step) {
    int64_t nr = first + n - r < step ? first + n - r : step;
    int rc = icl_forward_logits(s, r, nr, err);
    if (!rc) rc = be->ops->read(be, s->a.logits.buf, 0, dst + (r - first) * V, (size_t)(nr * V) * 4, err);
    if (rc) return rc;
  }
  return ICL_OK;
}

int icl_session_eval(icl_session *s, const int32_t *tokens, int64_t n, float *logits, int want_all, icl_error *err) {
  const icl_hparams *hp = &s->m->hp;
  if (n <= 0) return icl_error_set(err, ICL_EINVAL, "eval: no tokens");
  if (s->n_past + n > s->m->n_ctx)
    return icl_error_set(err, ICL_EINVAL, "eval: %lld + %lld tokens exceed the context of %d (raise it: n_ctx in icl.load, --ctx on the command line)",
                         (long long)s->n_past, (long long)n, s->m->n_ctx);
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] < -hp->allow_no_token || tokens[i] >= hp->n_tokens)
      return icl_error_set(err, ICL_EINVAL, "tokens[%lld]: %d out of range %d..%d (1-based index)", (long long)i + 1,
                           tokens[i], -hp->allow_no_token, hp->n_tokens - 1);
  int64_t per = s->m->chunk;
  for (int64_t c = 0; c < n; c += per) {
    int64_t nc = n - c < per ? n - c : per;
    int rc = icl_forward_chunk(s, tokens + c, nc, NULL, err);
    int64_t p0 = s->n_past - nc; /* the chunk's first position in the session */
    if (!rc && logits && want_all) rc = read_logits(s, 0, nc, logits + c * hp->n_vocab, p0, "eval", err);
    if (!rc && logits && !want_all && c + nc == n) rc = read_logits(s, nc - 1, 1, logits, p0, "eval", err);
    if (rc) return rc;
  }
  return s->m->be->ops->sync(s->m->be, err);
}

/* Continuous inputs of a run (icl-attn): [n, input_length] floats; none = zeros. */
static int set_inputs(icl_session *s, const icl_run_opts *o, int64_t n, icl_error *err) {
  int64_t w = s->m->hp.input_length;
  s->inputs = NULL, s->inputs_pos0 = 0, s->inputs_n = 0;
  if (!o->inputs) return ICL_OK;
  if (w == 0)
    return icl_error_set(err, ICL_EINVAL, "run: inputs given, but model %s takes none (input_length 0)", s->m->path);
  if (o->inputs_width != w)
    return icl_error_set(err, ICL_EINVAL, "run: inputs have width %lld, expected the model's input_length %lld",
                         (long long)o->inputs_width, (long long)w);
  s->inputs = o->inputs, s->inputs_n = n;
  return ICL_OK;
}

/* The leading positions of a run that no intervention reaches: with knockouts only, those before the earliest
 * knocked-out query; none with any other intervention, a hook callback or continuous inputs. */
static int64_t clean_prefix(const icl_run_opts *o, int64_t n) {
  if (o->inputs || o->hook || o->n_hook_points > 0) return 0;
  int64_t clean = n;
  for (int i = 0; i < o->n_interventions; i++) {
    const icl_intervention *v = &o->interventions[i];
    if (v->kind != ICL_IV_KNOCKOUT) return 0;
    for (int64_t j = 0; v->edges && j < v->n_edges; j++) { /* no array: the run fails when its hooks resolve */
      int64_t q = v->edges[2 * j] < 0 ? v->edges[2 * j] + n : v->edges[2 * j]; /* negative: from the end */
      if (q < clean) clean = q < 0 ? 0 : q; /* out of range: the run fails when its hooks resolve */
    }
  }
  return clean;
}

/* Positions of this run whose keys and values the previous run left valid in the cache (opts.reuse). */
static int64_t reusable(const icl_session *s, const int32_t *tokens, int64_t n, const icl_run_opts *o, int64_t clean) {
  if (!o->reuse || !s->run_tokens || o->n_captures > 0 || o->on_chunk ||
      (o->logits != ICL_LOGITS_LAST && o->logits != ICL_LOGITS_NONE))
    return 0;
  int64_t lim = s->run_clean < clean ? s->run_clean : clean, k = 0;
  if (lim > n - 1) lim = n - 1; /* at least the last position is computed */
  while (k < lim && tokens[k] == s->run_tokens[k]) k++;
  return k;
}

/* The model's run session, made on first use with its run cache; the model frees it through run_session_free. */
static int run_session(icl_model *m, icl_session **out, icl_error *err) {
  if (!m->run_session) {
    int rc = icl_session_new(m, &m->run_session, err);
    if (rc) return rc;
    m->run_session_free = icl_session_free;
  }
  icl_session *s = m->run_session;
  if (!s->run_tokens && !(s->run_tokens = malloc((size_t)m->n_ctx * sizeof *s->run_tokens)))
    return icl_error_set(err, ICL_ENOMEM, "run: out of host memory");
  *out = s;
  return ICL_OK;
}

/* The device buffers the hooks want (attention patterns, per-head results) and the logits tensor of the run. */
static int alloc_run_needs(icl_session *s, struct icl_hookctx *hk, int64_t n, const icl_run_opts *o,
                           icl_run_result *res, icl_error *err) {
  icl_model *m = s->m;
  int rc = ICL_OK;
  for (int il = 0; il < m->hp.n_layer && !rc; il++) {
    if (icl_hook_wants(hk, il, HP_PATTERN)) rc = need_pattern(s, err);
    if (!rc && icl_hook_wants(hk, il, HP_RESULT)) rc = need_result(s, err);
  }
  if (rc) return rc;
  if (o->logits == ICL_LOGITS_SELECT) return icl_logits_select_alloc(m, n, o, res, err);
  if (o->logits != ICL_LOGITS_ALL && o->logits != ICL_LOGITS_LAST) return ICL_OK;
  int64_t all = o->stream && o->on_chunk && n > m->chunk ? m->chunk : n; /* streaming: a chunk's rows */
  int64_t shape[2] = {o->logits == ICL_LOGITS_ALL ? all : 1, m->hp.n_vocab};
  if (!(res->logits = icl_tensor_new(2, shape)))
    return icl_error_set(err, ICL_ENOMEM, "run: no host memory for %lld x %lld logits", (long long)shape[0],
                         (long long)shape[1]);
  return ICL_OK;
}

/* Reads what a chunk [c, c + nc) gives the result: its logits rows as the run asks for them. */
static int chunk_logits(icl_session *s, int64_t c, int64_t nc, int64_t n, const icl_run_opts *o, icl_run_result *res,
                        icl_error *err) {
  int64_t V = s->m->hp.n_vocab;
  if (o->logits == ICL_LOGITS_ALL && o->stream && o->on_chunk) { /* streaming: the tensor holds this chunk's rows */
    res->logits->shape[0] = nc, res->logits->numel = nc * V;
    return read_logits(s, 0, nc, res->logits->data, c, "run", err);
  }
  if (o->logits == ICL_LOGITS_ALL) return read_logits(s, 0, nc, res->logits->data + c * V, c, "run", err);
  if (o->logits == ICL_LOGITS_LAST && c + nc == n) return read_logits(s, nc - 1, 1, res->logits->data, c, "run", err);
  if (o->logits == ICL_LOGITS_SELECT) return icl_logits_select_chunk(s, c, nc, o, res, err);
  return ICL_OK;
}

/* The chunks of a run from position start: hooks, forward, logits, per chunk; stops between chunks on Ctrl-C. */
static int run_chunks(icl_session *s, struct icl_hookctx *hk, const int32_t *tokens, int64_t start, int64_t n,
                      const icl_run_opts *o, icl_run_result *res, icl_error *err) {
  int rc = ICL_OK;
  for (int64_t c = start, per = s->m->chunk; c < n && !rc; c += per) {
    int64_t nc = n - c < per ? n - c : per;
    if (o->interrupt && *o->interrupt)
      return icl_error_set(err, ICL_EINTR, "run: interrupted at position %lld of %lld", (long long)c, (long long)n);
    if (!rc) rc = icl_hooks_chunk_begin(hk, c, nc, err);
    if (!rc) rc = icl_forward_chunk(s, tokens + c, nc, hk, err);
    if (!rc) rc = chunk_logits(s, c, nc, n, o, res, err);
    if (!rc) rc = icl_hooks_chunk_end(hk, c, nc, err);
  }
  return rc ? rc : s->m->be->ops->sync(s->m->be, err);
}

/* The run's own argument checks (the hooks check their requests when they resolve). */
static int run_check(const icl_model *m, int64_t n, icl_error *err) {
  if (n <= 0) return icl_error_set(err, ICL_EINVAL, "run: no tokens");
  if (n > m->n_ctx)
    return icl_error_set(err, ICL_EINVAL, "run: %lld tokens exceed the context of %d (load with a larger n_ctx)",
                         (long long)n, m->n_ctx);
  return ICL_OK;
}

/* After the chunks: the streamed logits dropped, the hooks and inputs let go; a failed run frees its result, a
 * successful one leaves its tokens and clean prefix for the next run's reuse. */
static int run_finish(icl_session *s, struct icl_hookctx *hk, const int32_t *tokens, int64_t n, int64_t clean,
                      const icl_run_opts *o, icl_run_result *res, int rc) {
  if (o->stream && o->on_chunk && o->logits == ICL_LOGITS_ALL) { /* the rows went to on_chunk: none kept */
    icl_tensor_free(res->logits);
    res->logits = NULL;
  }
  icl_hooks_end(hk);
  s->inputs = NULL, s->inputs_n = 0;
  if (rc) {
    icl_run_result_free(res);
  } else {
    memcpy(s->run_tokens, tokens, (size_t)n * sizeof *tokens);
    s->run_clean = clean;
  }
  return rc;
}

int icl_model_run(icl_model *m, const int32_t *tokens, int64_t n, const icl_run_opts *opts, icl_run_result *res,
                  icl_error *err) {
  memset(res, 0, sizeof *res);
  icl_session *s = NULL;
  int rc = run_check(m, n, err);
  if (!rc) rc = run_session(m, &s, err);
  if (rc) return rc;
  icl_session_reset(s);
  icl_run_opts none = {0};
  if (!opts) opts = &none;
  int64_t clean = clean_prefix(opts, n), start = reusable(s, tokens, n, opts, clean);
  s->run_clean = 0; /* the cache is being overwritten: valid again only if this run succeeds */
  if ((rc = set_inputs(s, opts, n, err))) return rc;
  struct icl_hookctx *hk = NULL;
  rc = icl_hooks_begin(m, n, opts, res, &hk, err);
  if (!rc) rc = alloc_run_needs(s, hk, n, opts, res, err);
  s->n_past = start, res->reused = start; /* chunks from the first position not kept */
  if (!rc) rc = run_chunks(s, hk, tokens, start, n, opts, res, err);
  return run_finish(s, hk, tokens, n, clean, opts, res, rc);
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
