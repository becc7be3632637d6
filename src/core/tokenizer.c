/* Tokenizer common parts: vocabulary loading from GGUF, the piece → id map, special-token splitting,
 * decoding and queries. The two algorithms live in tokenizer_bpe.c and tokenizer_spm.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ---- small containers ---------------------------------------------------------------------- */

int tok_ids_push(tok_ids *o, int32_t id) {
  if (o->n == o->cap) {
    int64_t cap = o->cap ? o->cap * 2 : 64;
    int32_t *v = realloc(o->v, (size_t)cap * sizeof *v);
    if (!v) return ICL_ENOMEM;
    o->v = v;
    o->cap = cap;
  }
  o->v[o->n++] = id;
  return ICL_OK;
}

static int bigram_before(const tok_bigram *x, const tok_bigram *y) {
  return x->key < y->key || (x->key == y->key && x->left < y->left);
}

int tok_heap_push(tok_heap *h, tok_bigram b) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    tok_bigram *v = realloc(h->v, cap * sizeof *v);
    if (!v) return ICL_ENOMEM;
    h->v = v;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i > 0 && bigram_before(&b, &h->v[(i - 1) / 2])) { /* sift up */
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = b;
  return ICL_OK;
}

int tok_heap_pop(tok_heap *h, tok_bigram *out) {
  if (h->n == 0) return 0;
  *out = h->v[0];
  tok_bigram last = h->v[--h->n];
  size_t i = 0, n = h->n;
  for (;;) { /* sift the last element down from the root */
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && bigram_before(&h->v[c + 1], &h->v[c])) c++;
    if (!bigram_before(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (n > 0) h->v[i] = last;
  return 1;
}

int tok_work_syms(tok_work *w, size_t n) {
  if (n <= w->sym_cap) return ICL_OK;
  size_t cap = w->sym_cap ? w->sym_cap : 64;
  while (cap < n) cap *= 2;
  tok_sym *s = realloc(w->sym, cap * sizeof *s);
  if (!s) return ICL_ENOMEM;
  w->sym = s;
  w->sym_cap = cap;
  return ICL_OK;
}

int tok_work_buf(tok_work *w, size_t n) {
  if (n <= w->buf_cap) return ICL_OK;
  size_t cap = w->buf_cap ? w->buf_cap : 256;
  while (cap < n) cap *= 2;
  char *b = realloc(w->buf, cap);
  if (!b) return ICL_ENOMEM;
  w->buf = b;
  w->buf_cap = cap;
  return ICL_OK;
}

void tok_work_free(tok_work *w) {
  free(w->sym);
  free(w->heap.v);
  free(w->buf);
  memset(w, 0, sizeof *w);
}

/* ---- piece → id map ------------------------------------------------------------------------ */

static uint32_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix so the low bits are usable */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (uint32_t)(h ^ (h >> 32));
}

int32_t tok_lookup(const icl_tokenizer *t, const char *s, size_t n) {
  uint32_t i = hash_bytes(s, n) & t->map.mask;
  for (;; i = (i + 1) & t->map.mask) {
    int32_t id = t->map.slot[i];
    if (id < 0) return -1;
    if (t->len[id] == n && memcmp(t->pool + t->off[id], s, n) == 0) return id;
  }
}

/* Builds the map; a piece that occurs twice keeps its first id. */
static int build_map(icl_tokenizer *t) {
  uint32_t cap = 1024;
  while (cap < 2u * (uint32_t)t->n_vocab) cap *= 2;
  t->map.slot = malloc(cap * sizeof *t->map.slot);
  if (!t->map.slot) return ICL_ENOMEM;
  memset(t->map.slot, 0xff, cap * sizeof *t->map.slot);
  t->map.mask = cap - 1;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    if (tok_lookup(t, t->pool + t->off[id], t->len[id]) >= 0) continue;
    uint32_t i = hash_bytes(t->pool + t->off[id], t->len[id]) & t->map.mask;
    while (t->map.slot[i] >= 0) i = (i + 1) & t->map.mask;
    t->map.slot[i] = id;
  }
  return ICL_OK;
}

/* ---- loading -------------------------------------------------------------------------------- */

/* Integer value of key, or def when absent or not an integer. */
static int64_t get_int_or(const icl_gguf *g, const char *key, int64_t def) {
  int64_t k = icl_gguf_find_key(g, key), v;
  if (k < 0 || icl_gguf_kv_int(g, k, &v) != ICL_OK) return def;
  return v;
}

/* A token id from metadata, or -1 when absent or outside the vocabulary. */
/* A special token id: -1 when the key is absent; an id outside the vocabulary is an error, not "none". */
static int get_id(const icl_tokenizer *t, const icl_gguf *g, const char *key, int32_t *out, icl_error *err) {
  int64_t i = icl_gguf_find_key(g, key), v = -1;
  *out = -1;
  if (i < 0) return ICL_OK;
  if (icl_gguf_kv_int(g, i, &v) != ICL_OK || v < 0 || v >= t->n_vocab)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %lld, expected a token id in 0..%d", icl_gguf_name(g), key,
                         (long long)v, t->n_vocab - 1);
  *out = (int32_t)v;
  return ICL_OK;
}

/* Whether array elements of GGUF type at can be read as kind (ICL_GGUF_STRING, _I32: any integer, _F32: any float). */
static int elements_fit(int at, int kind) {
  if (kind == ICL_GGUF_STRING) return at == ICL_GGUF_STRING;
  if (kind == ICL_GGUF_F32) return at == ICL_GGUF_F32 || at == ICL_GGUF_F64;
  return at >= 0 && at != ICL_GGUF_STRING && at != ICL_GGUF_ARRAY && at != ICL_GGUF_F32 && at != ICL_GGUF_F64;
}

/* Finds array key of elements readable as kind with n elements (any n if 0); -1 if absent. *rc is set
 * (with err) when the key is present with the wrong shape. */
static int64_t find_array(const icl_gguf *g, const char *key, int kind, uint64_t n, icl_error *err, int *rc) {
  int64_t k = icl_gguf_find_key(g, key);
  *rc = ICL_OK;
  if (k < 0) return -1;
  int at = icl_gguf_arr_type(g, k);
  uint64_t len = icl_gguf_arr_len(g, k);
  if (!elements_fit(at, kind) || (n && len != n))
    *rc = icl_error_set(err, ICL_EFORMAT, "%s: %s is %s with %llu elements (expected %s, %llu elements)",
                        icl_gguf_name(g), key, at < 0 ? "not an array" : icl_gguf_vtype_name(at),
                        (unsigned long long)len, icl_gguf_vtype_name(kind), (unsigned long long)n);
  return k;
}

/* Copies tokenizer.ggml.tokens into one pool. */
static int load_pieces(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  int rc;
  int64_t k = find_array(g, "tokenizer.ggml.tokens", ICL_GGUF_STRING, 0, err, &rc);
  if (rc) return rc;
  if (k < 0) return icl_error_set(err, ICL_EFORMAT, "%s: no tokenizer.ggml.tokens", icl_gguf_name(g));
  uint64_t n = icl_gguf_arr_len(g, k);
  if (n == 0 || n > TOK_MAX_VOCAB)
    return icl_error_set(err, ICL_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries, expected 1..%d",
                         icl_gguf_name(g), (unsigned long long)n, TOK_MAX_VOCAB);
  t->n_vocab = (int32_t)n;
  t->off = malloc(n * sizeof *t->off);
  t->len = malloc(n * sizeof *t->len);
  if (!t->off || !t->len) return ICL_ENOMEM;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; i++) {
    size_t len = 0;
    if (!icl_gguf_arr_str(g, k, i, &len))
      return icl_error_set(err, ICL_EFORMAT, "%s: token %llu unreadable", icl_gguf_name(g), (unsigned long long)i);
    if (len > 65535)
      return icl_error_set(err, ICL_EFORMAT, "%s: token %llu is %zu bytes long (expected at most 65535)",
                           icl_gguf_name(g), (unsigned long long)i, len);
    t->off[i] = (uint32_t)total;
    t->len[i] = (uint32_t)len;
    total += len + 1;
  }
  if (total > UINT32_MAX)
    return icl_error_set(err, ICL_EFORMAT, "%s: vocabulary text too large", icl_gguf_name(g));
  t->pool = malloc(total);
  if (!t->pool) return ICL_ENOMEM;
  for (uint64_t i = 0; i < n; i++) {
    memcpy(t->pool + t->off[i], icl_gguf_arr_str(g, k, i, NULL), t->len[i]);
    t->pool[t->off[i] + t->len[i]] = '\0';
  }
  return ICL_OK;
}

/* token_type (default normal) and scores (default 0). */
static int load_types_scores(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  int rc;
  t->type = malloc((size_t)t->n_vocab);
  t->score = calloc((size_t)t->n_vocab, sizeof *t->score);
  if (!t->type || !t->score) return ICL_ENOMEM;
  memset(t->type, TOK_NORMAL, (size_t)t->n_vocab);
  int64_t k = find_array(g, "tokenizer.ggml.token_type", ICL_GGUF_I32, (uint64_t)t->n_vocab, err, &rc);
  if (rc) return rc;
  for (int32_t i = 0; k >= 0 && i < t->n_vocab; i++) {
    int64_t v;
    if (icl_gguf_arr_int(g, k, (uint64_t)i, &v) != ICL_OK || v < 0 || v > TOK_BYTE)
      return icl_error_set(err, ICL_EFORMAT, "%s: tokenizer.ggml.token_type[%d] = %lld, expected 0..%d (0 undefined, "
                           "1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)", icl_gguf_name(g), i,
                           (long long)v, TOK_BYTE);
    if (v >= TOK_NORMAL) t->type[i] = (uint8_t)v; /* 0 (undefined) reads as normal */
  }
  k = find_array(g, "tokenizer.ggml.scores", ICL_GGUF_F32, (uint64_t)t->n_vocab, err, &rc);
  if (rc) return rc;
  for (int32_t i = 0; k >= 0 && i < t->n_vocab; i++) {
    double v;
    if (icl_gguf_arr_float(g, k, (uint64_t)i, &v) == ICL_OK) t->score[i] = (float)v;
  }
  return ICL_OK;
}

/* Special tokens are control and user-defined pieces. Index them by first byte (which lengths start
 * with it, which second bytes follow it) so the scan over the text rarely probes the map. */
static void index_special(icl_tokenizer *t, const unsigned char *p, uint32_t len) {
  t->n_special++;
  if (len > 1) t->special_next[p[0]][p[1] >> 3] |= (uint8_t)(1u << (p[1] & 7));
  if (len <= 64) {
    t->special_lens[p[0]] |= 1ull << (len - 1);
    return;
  }
  t->special_long[p[0]] = 1;
  int j = 0, n = t->n_special_long_len;
  while (j < n && t->special_long_len[j] > len) j++;
  if ((j < n && t->special_long_len[j] == len) || n == (int)(sizeof t->special_long_len / sizeof *t->special_long_len))
    return; /* known length, or an absurd vocabulary: such pieces are then not matched */
  memmove(&t->special_long_len[j + 1], &t->special_long_len[j], (size_t)(n - j) * sizeof *t->special_long_len);
  t->special_long_len[j] = len;
  t->n_special_long_len++;
}

static void index_specials(icl_tokenizer *t) {
  for (int32_t id = 0; id < t->n_vocab; id++)
    if ((t->type[id] == TOK_CONTROL || t->type[id] == TOK_USER) && t->len[id] > 0)
      index_special(t, (const unsigned char *)t->pool + t->off[id], t->len[id]);
}

/* The decoded bytes of every token, computed once so decoding is a copy. Never longer than the piece. */
static int build_decoded(icl_tokenizer *t) {
  size_t total = t->off[t->n_vocab - 1] + t->len[t->n_vocab - 1] + 1;
  t->dpool = malloc(total);
  t->doff = malloc((size_t)t->n_vocab * sizeof *t->doff);
  t->dlen = malloc((size_t)t->n_vocab * sizeof *t->dlen);
  if (!t->dpool || !t->doff || !t->dlen) return ICL_ENOMEM;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    const char *p = t->pool + t->off[id];
    char *d = t->dpool + t->off[id];
    size_t n = t->len[id];
    if (t->type[id] == TOK_CONTROL || t->type[id] == TOK_UNUSED || (t->kind == TOK_KIND_BPE && t->type[id] == TOK_USER))
      memcpy(d, p, n); /* stored as plain text */
    else if (t->kind == TOK_KIND_BPE)
      n = tok_bpe_decode_piece(p, n, d);
    else
      n = tok_spm_decode_piece(t, id, d);
    d[n] = '\0';
    t->doff[id] = t->off[id];
    t->dlen[id] = (uint32_t)n;
  }
  return ICL_OK;
}

/* Model kind, names and special ids from metadata. */
static int load_header(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  const char *model = icl_gguf_get_str(g, "tokenizer.ggml.model");
  const char *pre = icl_gguf_get_str(g, "tokenizer.ggml.pre");
  if (!model)
    return icl_error_set(err, ICL_EFORMAT, "%s: no tokenizer.ggml.model (not a model or vocabulary file?)",
                         icl_gguf_name(g));
  if (!strcmp(model, "gpt2")) t->kind = TOK_KIND_BPE;
  else if (!strcmp(model, "llama")) t->kind = TOK_KIND_SPM;
  else
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: tokenizer model '%s' is not supported (expected gpt2 or llama)",
                         icl_gguf_name(g), model);
  snprintf(t->model, sizeof t->model, "%s", model);
  snprintf(t->pre, sizeof t->pre, "%s", pre && *pre ? pre : "default");
  return ICL_OK;
}

static int load_ids(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  int rc;
  if ((rc = get_id(t, g, "tokenizer.ggml.bos_token_id", &t->bos, err)) ||
      (rc = get_id(t, g, "tokenizer.ggml.eos_token_id", &t->eos, err)) ||
      (rc = get_id(t, g, "tokenizer.ggml.eot_token_id", &t->eot, err)) ||
      (rc = get_id(t, g, "tokenizer.ggml.unknown_token_id", &t->unk, err)))
    return rc;
  if (t->unk < 0 && t->kind == TOK_KIND_SPM) t->unk = tok_lookup(t, "<unk>", 5);
  /* SentencePiece vocabularies add BOS unless told otherwise; byte-level BPE ones only for llama3 */
  int def_bos = t->kind == TOK_KIND_SPM || !strcmp(t->pre, "llama3") || !strcmp(t->pre, "llama-bpe") ||
                !strcmp(t->pre, "llama-v3");
  t->add_bos = get_int_or(g, "tokenizer.ggml.add_bos_token", def_bos) != 0;
  return ICL_OK;
}

int icl_tokenizer_from_gguf(const icl_gguf *g, icl_tokenizer **out, icl_error *err) {
  if (!g || !out) return icl_error_set(err, ICL_EINVAL, "icl_tokenizer_from_gguf: NULL argument");
  *out = NULL;
  icl_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return icl_error_set(err, ICL_ENOMEM, "tokenizer: out of memory");
  int rc = load_header(t, g, err);
  if (!rc) rc = load_pieces(t, g, err);
  if (!rc) rc = load_types_scores(t, g, err);
  if (!rc) rc = build_map(t);
  if (!rc) rc = load_ids(t, g, err);
  if (!rc) {
    index_specials(t);
    rc = t->kind == TOK_KIND_BPE ? tok_bpe_init(t, g, err) : tok_spm_init(t, g, err);
  }
  if (!rc) rc = build_decoded(t);
  if (rc) {
    if (rc == ICL_ENOMEM) icl_error_set(err, ICL_ENOMEM, "%s: out of memory building the tokenizer", icl_gguf_name(g));
    icl_tokenizer_free(t);
    return rc;
  }
  *out = t;
  return ICL_OK;
}

void icl_tokenizer_free(icl_tokenizer *t) {
  if (!t) return;
  tok_bpe_free(t);
  free(t->pool);
  free(t->off);
  free(t->len);
  free(t->score);
  free(t->type);
  free(t->dpool);
  free(t->doff);
  free(t->dlen);
  free(t->map.slot);
  free(t);
}

/* ---- tokenize ------------------------------------------------------------------------------ */

/* Id of a special token of exactly L bytes at s that is enabled, or -1. User-defined pieces always match
 * (as Hugging Face added tokens and SentencePiece user symbols do); control pieces only with parse_special. */
static int32_t special_at(const icl_tokenizer *t, const char *s, size_t L, int parse_special) {
  int32_t id = tok_lookup(t, s, L);
  if (id < 0) return -1;
  return t->type[id] == TOK_USER || (t->type[id] == TOK_CONTROL && parse_special) ? id : -1;
}

/* If a special token starts at s (n bytes left), returns its id and length; the longest one wins. */
static int32_t match_special(const icl_tokenizer *t, const char *s, size_t n, int parse_special, size_t *len) {
  const unsigned char c = (unsigned char)s[0];
  int32_t id;
  for (int j = 0; t->special_long[c] && j < t->n_special_long_len; j++)
    if (t->special_long_len[j] <= n && (id = special_at(t, s, t->special_long_len[j], parse_special)) >= 0)
      return *len = t->special_long_len[j], id;
  uint64_t lens = t->special_lens[c];
  if (n < 2 || !(t->special_next[c][(unsigned char)s[1] >> 3] & (1u << ((unsigned char)s[1] & 7))))
    lens &= 1; /* the next byte rules out every longer piece */
  for (size_t L = 64; lens && L > 0; L--) { /* longest first */
    if (!((lens >> (L - 1)) & 1)) continue;
    lens &= ~(1ull << (L - 1));
    if (L <= n && (id = special_at(t, s, L, parse_special)) >= 0) return *len = L, id;
  }
  return -1;
}

static int encode_fragment(const icl_tokenizer *t, const char *s, size_t n, int after_special, tok_work *w,
                           tok_ids *out, icl_error *err) {
  if (t->kind == TOK_KIND_BPE) return tok_bpe_encode(t, s, n, w, out, err);
  return tok_spm_encode(t, s, n, t->add_space_prefix && after_special, w, out, err);
}

/* Splits the text at special tokens and encodes the plain fragments between them. */
static int encode_text(const icl_tokenizer *t, const char *s, size_t n, int parse_special, tok_work *w, tok_ids *out,
                       icl_error *err) {
  size_t frag = 0, L = 0;
  int after_special = 1, rc = ICL_OK;
  for (size_t p = 0; p < n && !rc; p++) {
    if (!t->special_lens[(unsigned char)s[p]] && !t->special_long[(unsigned char)s[p]]) continue;
    int32_t id = match_special(t, s + p, n - p, parse_special, &L);
    if (id < 0) continue;
    if (p > frag) rc = encode_fragment(t, s + frag, p - frag, after_special, w, out, err);
    if (!rc) rc = tok_ids_push(out, id);
    after_special = 1;
    frag = p + L;
    p = frag - 1;
  }
  if (!rc && n > frag) rc = encode_fragment(t, s + frag, n - frag, after_special, w, out, err);
  return rc;
}

int icl_tokenize(const icl_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                 int64_t *n, icl_error *err) {
  if (!t || !ids || !n || (!text && len)) return icl_error_set(err, ICL_EINVAL, "icl_tokenize: NULL argument");
  *ids = NULL;
  *n = 0;
  tok_ids out = {0};
  tok_work w = {0};
  int rc = ICL_OK;
  if (t->bos >= 0 && (add_bos > 0 || (add_bos < 0 && t->add_bos))) rc = tok_ids_push(&out, t->bos);
  if (!rc) rc = encode_text(t, text, len, parse_special, &w, &out, err);
  tok_work_free(&w);
  if (!rc && !out.v) { /* empty result: still hand back a valid allocation */
    out.v = malloc(sizeof *out.v);
    if (!out.v) rc = ICL_ENOMEM;
  }
  if (rc) {
    free(out.v);
    if (rc == ICL_ENOMEM) icl_error_set(err, ICL_ENOMEM, "icl_tokenize: out of memory");
    return rc;
  }
  *ids = out.v;
  *n = out.n;
  return ICL_OK;
}

/* ---- decode and queries -------------------------------------------------------------------- */

const char *icl_token_text(const icl_tokenizer *t, int32_t id, size_t *len) {
  if (!t || id < 0 || id >= t->n_vocab) return NULL;
  if (len) *len = t->dlen[id];
  return t->dpool + t->doff[id];
}

const char *icl_token_piece(const icl_tokenizer *t, int32_t id) {
  if (!t || id < 0 || id >= t->n_vocab) return NULL;
  return t->pool + t->off[id];
}

static int is_special_type(int type) { return type == TOK_CONTROL || type == TOK_USER; }

int icl_detokenize(const icl_tokenizer *t, const int32_t *ids, int64_t n, int keep_special, char **out, size_t *len,
                   icl_error *err) {
  if (!t || !out || (!ids && n > 0) || n < 0) return icl_error_set(err, ICL_EINVAL, "icl_detokenize: bad argument");
  *out = NULL;
  size_t total = 1;
  for (int64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n_vocab)
      return icl_error_set(err, ICL_EINVAL, "tokens[%lld]: %d out of range 0..%d (1-based index)", (long long)i + 1,
                           ids[i], t->n_vocab - 1);
    total += t->dlen[ids[i]];
  }
  char *s = malloc(total), *d = s;
  if (!s) return icl_error_set(err, ICL_ENOMEM, "icl_detokenize: out of memory");
  /* SentencePiece with a space prefix put a U+2581 before each fragment: drop that space again */
  int strip = t->kind == TOK_KIND_SPM && t->add_space_prefix, after_special = 1;
  for (int64_t i = 0; i < n; i++) {
    int type = t->type[ids[i]];
    const char *p = t->dpool + t->doff[ids[i]];
    size_t m = t->dlen[ids[i]];
    if (!is_special_type(type) && strip && after_special && m > 0 && p[0] == ' ') p++, m--;
    after_special = is_special_type(type);
    if (type == TOK_CONTROL && !keep_special) continue;
    memcpy(d, p, m);
    d += m;
  }
  *d = '\0';
  *out = s;
  if (len) *len = (size_t)(d - s);
  return ICL_OK;
}

int32_t icl_tokenizer_n_vocab(const icl_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t icl_tokenizer_bos(const icl_tokenizer *t) { return t ? t->bos : -1; }
int32_t icl_tokenizer_eos(const icl_tokenizer *t) { return t ? t->eos : -1; }

int icl_token_is_control(const icl_tokenizer *t, int32_t id) {
  if (!t || id < 0 || id >= t->n_vocab) return 0;
  return t->type[id] == TOK_CONTROL || id == t->eos || id == t->eot;
}

const char *icl_tokenizer_model(const icl_tokenizer *t) { return t ? t->model : NULL; }
const char *icl_tokenizer_pre(const icl_tokenizer *t) { return t ? t->pre : NULL; }
