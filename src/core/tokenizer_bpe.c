/* Byte-level BPE (tokenizer.ggml.model = gpt2).
 *
 * Text is first split into words by the pre-tokenizer regexes of tokenizer.ggml.pre (PCRE2, Unicode
 * properties); each regex splits the pieces left by the previous one, and text a regex does not match
 * stays a piece of its own. Every byte of a word starts as the token of its GPT-2 byte-level character
 * (the vocabulary stores bytes as printable code points: space is U+0120 'Ġ'). Then the adjacent pair
 * with the lowest merge rank is joined, again and again, until no pair has a merge. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

/* ---- GPT-2 byte ↔ code point ----------------------------------------------------------------
 * Printable Latin-1 bytes stand for themselves; the other 68 bytes (0-32, 127-160, 173) take the
 * code points 256, 257, ... in byte order. */

static uint32_t byte_to_cp(unsigned b) {
  if (b <= 32) return 256 + b;
  if (b >= 127 && b <= 160) return 256 + 33 + (b - 127);
  if (b == 173) return 256 + 67;
  return b;
}

/* The byte a code point stands for, or -1 if it is not one of the 256. */
static int cp_to_byte(uint32_t cp) {
  if (cp < 256) return (cp <= 32 || (cp >= 127 && cp <= 160) || cp == 173) ? -1 : (int)cp;
  if (cp < 256 + 33) return (int)(cp - 256);
  if (cp < 256 + 67) return (int)(cp - 256 - 33 + 127);
  return cp == 256 + 67 ? 173 : -1;
}

/* UTF-8 of a code point below U+0800 (all the byte-level ones); returns the length. */
static size_t put_cp(uint32_t cp, char *d) {
  if (cp < 0x80) {
    d[0] = (char)cp;
    return 1;
  }
  d[0] = (char)(0xC0 | (cp >> 6));
  d[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

size_t tok_bpe_decode_piece(const char *piece, size_t n, char *dst) {
  const unsigned char *p = (const unsigned char *)piece;
  size_t i = 0, o = 0;
  while (i < n) {
    size_t l = tok_utf8_len(p[i]);
    if (i + l > n) l = n - i;
    int b = -1;
    if (l == 1 && p[i] < 0x80) b = cp_to_byte(p[i]);
    else if (l == 2 && (p[i + 1] & 0xC0) == 0x80) b = cp_to_byte(((uint32_t)(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F));
    if (b >= 0) dst[o++] = (char)b;
    else { /* not a byte-level character: keep it as it is */
      memcpy(dst + o, p + i, l);
      o += l;
    }
    i += l;
  }
  return o;
}

/* ---- merges ---------------------------------------------------------------------------------- */

static uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static uint64_t pair_hash(uint64_t k) {
  k ^= k >> 31;
  k *= 0x9e3779b97f4a7c15ull;
  return k ^ (k >> 29);
}

static const tok_pair *pair_find(const tok_pairmap *m, uint64_t key) {
  if (!m->slot) return NULL;
  for (uint64_t i = pair_hash(key) & m->mask;; i = (i + 1) & m->mask) {
    if (m->slot[i].key == key) return &m->slot[i];
    if (m->slot[i].key == UINT64_MAX) return NULL;
  }
}

/* Adds a merge unless the pair already has one (an earlier, lower rank wins). */
static void pair_add(tok_pairmap *m, uint64_t key, int32_t rank, int32_t result) {
  uint64_t i = pair_hash(key) & m->mask;
  while (m->slot[i].key != UINT64_MAX) {
    if (m->slot[i].key == key) return;
    i = (i + 1) & m->mask;
  }
  m->slot[i] = (tok_pair){key, rank, result};
}

/* Parses merge "left right" (split at the first space after the first byte) into token ids. */
static int parse_merge(const icl_tokenizer *t, const char *s, size_t n, char *buf, int32_t *l, int32_t *r,
                       int32_t *res) {
  const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
  if (!sp) return 0;
  size_t nl = (size_t)(sp - s), nr = n - nl - 1;
  *l = tok_lookup(t, s, nl);
  *r = tok_lookup(t, sp + 1, nr);
  memcpy(buf, s, nl);
  memcpy(buf + nl, sp + 1, nr);
  *res = tok_lookup(t, buf, nl + nr);
  return *l >= 0 && *r >= 0 && *res >= 0;
}

/* Merges whose parts or result are not tokens can never apply to token ids, so they are dropped. */
static int load_merges(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  int64_t k = icl_gguf_find_key(g, "tokenizer.ggml.merges");
  if (k < 0 || icl_gguf_arr_type(g, k) != ICL_GGUF_STRING) {
    fprintf(stderr, "icl: warning: %s: no tokenizer.ggml.merges; byte-level BPE will emit single bytes\n",
            icl_gguf_name(g));
    return ICL_OK;
  }
  uint64_t n = icl_gguf_arr_len(g, k), cap = 1024, dropped = 0;
  if (n > INT32_MAX) return icl_error_set(err, ICL_EFORMAT, "%s: too many merges", icl_gguf_name(g));
  while (cap < 2 * n) cap *= 2;
  t->merges.slot = malloc(cap * sizeof *t->merges.slot);
  char *buf = malloc(65536 * 2);
  if (!t->merges.slot || !buf) {
    free(buf);
    return ICL_ENOMEM;
  }
  memset(t->merges.slot, 0xff, cap * sizeof *t->merges.slot);
  t->merges.mask = cap - 1;
  for (uint64_t i = 0; i < n; i++) {
    size_t len = 0;
    const char *s = icl_gguf_arr_str(g, k, i, &len);
    int32_t l, r, res;
    if (s && len < 65536 && parse_merge(t, s, len, buf, &l, &r, &res))
      pair_add(&t->merges, pair_key(l, r), (int32_t)i, res);
    else
      dropped++;
  }
  free(buf);
  if (dropped)
    fprintf(stderr, "icl: warning: %s: %llu of %llu merges name pieces outside the vocabulary; ignored\n",
            icl_gguf_name(g), (unsigned long long)dropped, (unsigned long long)n);
  return ICL_OK;
}

/* ---- pre-tokenizer regexes ------------------------------------------------------------------- */

#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS_CI "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3_DIGITS(d)                                                                   \
  RE_CONTRACTIONS_CI "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}" d                                     \
  "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

typedef struct pre_rule {
  const char *names;     /* space-separated tokenizer.ggml.pre values */
  const char *re[TOK_MAX_REGEX];
  int ignore_merges;
} pre_rule;

static const pre_rule PRE_RULES[] = {
    {"gpt-2 gpt2 mpt olmo jais", {RE_GPT2}, 0},
    {"smollm starcoder refact command-r codeshell exaone minerva", {"\\p{N}", RE_GPT2}, 0},
    {"llama3 llama-v3 llama-bpe", {RE_LLAMA3_DIGITS("{1,3}")}, 1},
    {"falcon3 dbrx smaug-bpe chatglm-bpe", {RE_LLAMA3_DIGITS("{1,3}")}, 0},
    {"qwen2 stablelm2 deepseek-r1-qwen hunyuan", {RE_LLAMA3_DIGITS("")}, 0},
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0},
};

static int name_in(const char *names, const char *name) {
  size_t n = strlen(name);
  for (const char *p = names; (p = strstr(p, name)) != NULL; p += n)
    if ((p == names || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
  return 0;
}

static const pre_rule *find_rule(const char *pre) {
  size_t n = sizeof PRE_RULES / sizeof PRE_RULES[0];
  for (size_t i = 0; i < n; i++)
    if (name_in(PRE_RULES[i].names, pre)) return &PRE_RULES[i];
  return NULL;
}

static int compile_regexes(icl_tokenizer *t, const pre_rule *rule, icl_error *err) {
  for (int i = 0; i < TOK_MAX_REGEX && rule->re[i]; i++) {
    int ecode;
    PCRE2_SIZE eoff;
    /* MATCH_INVALID_UTF: bytes that are not UTF-8 never match and so become pieces of their own */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)rule->re[i], PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ecode, &eoff, NULL);
    if (!re) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(ecode, msg, sizeof msg);
      return icl_error_set(err, ICL_EFORMAT, "pre-tokenizer '%s': regex %d: %s at offset %zu", t->pre, i, (char *)msg,
                           (size_t)eoff);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if JIT is unavailable */
    t->re[t->n_re++] = re;
  }
  t->ignore_merges = rule->ignore_merges;
  return ICL_OK;
}

int tok_bpe_init(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  char buf[4];
  for (unsigned b = 0; b < 256; b++) t->byte_tok[b] = tok_lookup(t, buf, put_cp(byte_to_cp(b), buf));
  int rc = load_merges(t, g, err);
  if (rc) return rc;
  const pre_rule *rule = find_rule(t->pre);
  if (!rule) {
    fprintf(stderr, "icl: warning: %s: unknown pre-tokenizer '%s'; using 'default' (token ids may differ)\n",
            icl_gguf_name(g), t->pre);
    rule = find_rule("default");
  }
  return compile_regexes(t, rule, err);
}

void tok_bpe_free(icl_tokenizer *t) {
  for (int i = 0; i < t->n_re; i++) pcre2_code_free((pcre2_code *)t->re[i]);
  t->n_re = 0;
  free(t->merges.slot);
  t->merges.slot = NULL;
}

/* ---- splitting ------------------------------------------------------------------------------- */

typedef struct span {
  size_t off, len;
} span;

typedef struct span_list {
  span *v;
  size_t n, cap;
} span_list;

static int span_push(span_list *l, size_t off, size_t len) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    span *v = realloc(l->v, cap * sizeof *v);
    if (!v) return ICL_ENOMEM;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = (span){off, len};
  return ICL_OK;
}

/* Splits s[sp] by re into matches and the unmatched text between them, appending to out. The span is
 * the whole subject, so lookarounds see its ends as the ends of the text. */
static int split_span(const pcre2_code *re, pcre2_match_data *md, const char *s, span sp, span_list *out,
                      icl_error *err) {
  PCRE2_SPTR subj = (PCRE2_SPTR)(s + sp.off);
  size_t gap = 0, at = 0;
  int rc = ICL_OK;
  while (at < sp.len && !rc) {
    int m = pcre2_match(re, subj, sp.len, at, 0, md, NULL);
    if (m == PCRE2_ERROR_NOMATCH) break;
    if (m < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(m, msg, sizeof msg);
      return icl_error_set(err, ICL_EINVAL, "pre-tokenizer regex failed: %s", (char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t ms = ov[0], me = ov[1];
    if (me == ms) { /* an empty match splits nothing: step over one character */
      at = ms + tok_utf8_len(subj[ms]);
      continue;
    }
    if (ms > gap) rc = span_push(out, sp.off + gap, ms - gap);
    if (!rc) rc = span_push(out, sp.off + ms, me - ms);
    gap = at = me;
  }
  if (!rc && gap < sp.len) rc = span_push(out, sp.off + gap, sp.len - gap);
  return rc;
}

/* Applies the regexes in turn; the words end up in *words. */
static int pre_split(const icl_tokenizer *t, const char *s, size_t n, span_list *words, icl_error *err) {
  span_list next = {0};
  int rc = span_push(words, 0, n);
  pcre2_match_data *md = pcre2_match_data_create(16, NULL);
  if (!md) rc = ICL_ENOMEM;
  for (int r = 0; r < t->n_re && !rc; r++) {
    next.n = 0;
    for (size_t i = 0; i < words->n && !rc; i++)
      rc = split_span((const pcre2_code *)t->re[r], md, s, words->v[i], &next, err);
    span_list tmp = *words;
    *words = next;
    next = tmp;
  }
  pcre2_match_data_free(md);
  free(next.v);
  return rc;
}

/* ---- merging one word ------------------------------------------------------------------------ */

static int push_pair(const icl_tokenizer *t, tok_work *w, int32_t l, int32_t r) {
  if (l < 0 || r < 0) return ICL_OK;
  int32_t a = w->sym[l].id, b = w->sym[r].id;
  if (a < 0 || b < 0) return ICL_OK;
  const tok_pair *p = pair_find(&t->merges, pair_key(a, b));
  if (!p) return ICL_OK;
  return tok_heap_push(&w->heap, (tok_bigram){(double)p->rank, l, r, a, b});
}

/* A popped pair still applies if both symbols are alive, adjacent, and hold the same tokens. */
static int pair_current(const tok_work *w, const tok_bigram *bg) {
  const tok_sym *l = &w->sym[bg->left], *r = &w->sym[bg->right];
  return l->len > 0 && r->len > 0 && l->next == bg->right && l->id == bg->a && r->id == bg->b;
}

static int merge_word(const icl_tokenizer *t, tok_work *w) {
  tok_bigram bg;
  while (tok_heap_pop(&w->heap, &bg)) {
    if (!pair_current(w, &bg)) continue;
    tok_sym *l = &w->sym[bg.left], *r = &w->sym[bg.right];
    l->id = pair_find(&t->merges, pair_key(bg.a, bg.b))->result;
    l->len += r->len;
    r->len = 0;
    l->next = r->next;
    if (r->next >= 0) w->sym[r->next].prev = bg.left;
    int rc = push_pair(t, w, l->prev, bg.left);
    if (!rc) rc = push_pair(t, w, bg.left, l->next);
    if (rc) return rc;
  }
  return ICL_OK;
}

/* Whole-word lookup for vocabularies that skip merges when the word is a token (llama3). */
static int32_t whole_word(const icl_tokenizer *t, const unsigned char *s, size_t n, tok_work *w) {
  if (tok_work_buf(w, 2 * n)) return -1;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) m += put_cp(byte_to_cp(s[i]), w->buf + m);
  return tok_lookup(t, w->buf, m);
}

static int encode_word(const icl_tokenizer *t, const unsigned char *s, size_t n, tok_work *w, tok_ids *out) {
  if (t->ignore_merges) {
    int32_t id = whole_word(t, s, n, w);
    if (id >= 0) return tok_ids_push(out, id);
  }
  int rc = tok_work_syms(w, n);
  if (rc) return rc;
  w->heap.n = 0;
  for (size_t i = 0; i < n; i++)
    w->sym[i] = (tok_sym){(int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1, t->byte_tok[s[i]]};
  for (size_t i = 1; i < n && !rc; i++) rc = push_pair(t, w, (int32_t)i - 1, (int32_t)i);
  if (!rc) rc = merge_word(t, w);
  for (int32_t i = 0; i >= 0 && !rc; i = w->sym[i].next) {
    int32_t id = w->sym[i].id >= 0 ? w->sym[i].id : t->unk; /* only when the vocabulary lacks a byte */
    if (id >= 0) rc = tok_ids_push(out, id);
  }
  return rc;
}

int tok_bpe_encode(const icl_tokenizer *t, const char *text, size_t n, tok_work *w, tok_ids *out, icl_error *err) {
  if (n > UINT32_MAX) return icl_error_set(err, ICL_EINVAL, "icl_tokenize: text fragment of %zu bytes is too long", n);
  span_list words = {0};
  int rc = pre_split(t, text, n, &words, err);
  for (size_t i = 0; i < words.n && !rc; i++)
    rc = encode_word(t, (const unsigned char *)text + words.v[i].off, words.v[i].len, w, out);
  free(words.v);
  return rc;
}
