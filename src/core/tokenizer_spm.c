/* SentencePiece BPE (tokenizer.ggml.model = llama).
 *
 * Spaces become U+2581 '▁' (and one is prepended to a fragment when add_space_prefix is set); the text
 * is split into UTF-8 characters; then the adjacent pair whose concatenation is a vocabulary piece with
 * the highest score is joined, again and again (ties: the leftmost pair). A character that is not a
 * piece is emitted as its bytes, <0xXX> (byte fallback), or as the unknown token if those are absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static const char SPACE_MARK[] = "\xE2\x96\x81"; /* U+2581 */

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* "<0xXX>" → the byte, or -1. */
static int byte_piece_value(const char *p, size_t n) {
  if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
  int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t tok_spm_decode_piece(const icl_tokenizer *t, int32_t id, char *dst) {
  const char *p = t->pool + t->off[id];
  size_t n = t->len[id], o = 0;
  if (t->type[id] == TOK_BYTE) {
    int b = byte_piece_value(p, n);
    if (b >= 0) {
      dst[0] = (char)b;
      return 1;
    }
  }
  for (size_t i = 0; i < n;) {
    if (i + 3 <= n && memcmp(p + i, SPACE_MARK, 3) == 0) {
      dst[o++] = ' ';
      i += 3;
    } else
      dst[o++] = p[i++];
  }
  return o;
}

int tok_spm_init(icl_tokenizer *t, const icl_gguf *g, icl_error *err) {
  char buf[8];
  for (int b = 0; b < 256; b++) {
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    t->byte_tok[b] = tok_lookup(t, buf, 6);
  }
  /* Gemma vocabularies were trained without the dummy prefix; older files lack the key */
  const char *arch = icl_gguf_get_str(g, "general.architecture");
  int def = !(arch && !strncmp(arch, "gemma", 5));
  int64_t k = icl_gguf_find_key(g, "tokenizer.ggml.add_space_prefix"), v;
  t->add_space_prefix = (k >= 0 && icl_gguf_kv_int(g, k, &v) == ICL_OK) ? v != 0 : def;
  (void)err;
  return ICL_OK;
}

/* Copies the fragment with spaces escaped (and the optional prefix) into w->buf; returns its length. */
static size_t escape_spaces(const char *s, size_t n, int prefix, tok_work *w) {
  size_t o = 0;
  if (prefix) {
    memcpy(w->buf, SPACE_MARK, 3);
    o = 3;
  }
  for (size_t i = 0; i < n; i++) {
    if (s[i] == ' ') {
      memcpy(w->buf + o, SPACE_MARK, 3);
      o += 3;
    } else
      w->buf[o++] = s[i];
  }
  return o;
}

static int push_pair(const icl_tokenizer *t, tok_work *w, int32_t l, int32_t r) {
  if (l < 0 || r < 0) return ICL_OK;
  const tok_sym *a = &w->sym[l], *b = &w->sym[r];
  int32_t id = tok_lookup(t, w->buf + a->start, a->len + b->len);
  if (id < 0) return ICL_OK;
  return tok_heap_push(&w->heap, (tok_bigram){-(double)t->score[id], l, r, (int32_t)(a->len + b->len), id});
}

/* Symbols l and r are adjacent with the same combined length: the same text as when pushed. */
static int pair_current(const tok_work *w, const tok_bigram *bg) {
  const tok_sym *l = &w->sym[bg->left], *r = &w->sym[bg->right];
  return l->len > 0 && r->len > 0 && l->next == bg->right && (int32_t)(l->len + r->len) == bg->a;
}

static int merge_all(const icl_tokenizer *t, tok_work *w) {
  tok_bigram bg;
  while (tok_heap_pop(&w->heap, &bg)) {
    if (!pair_current(w, &bg)) continue;
    tok_sym *l = &w->sym[bg.left], *r = &w->sym[bg.right];
    l->id = bg.b;
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

/* Splits w->buf[0..n) into one symbol per UTF-8 character; each byte of malformed UTF-8 is a symbol of
 * its own, so it cannot swallow the U+2581 of an escaped space (which would make decoding lossy). */
static size_t split_chars(const icl_tokenizer *t, tok_work *w, size_t n) {
  size_t ns = 0;
  for (size_t i = 0; i < n; ns++) {
    size_t l = tok_utf8_char((const unsigned char *)w->buf + i, n - i);
    w->sym[ns] = (tok_sym){(int32_t)ns - 1, i + l < n ? (int32_t)ns + 1 : -1, (uint32_t)i, (uint32_t)l,
                           tok_lookup(t, w->buf + i, l)};
    i += l;
  }
  return ns;
}

/* Emits a final symbol: its token, or its bytes as byte tokens (or unk when a byte token is missing). */
static int emit_symbol(const icl_tokenizer *t, const tok_work *w, const tok_sym *s, tok_ids *out) {
  if (s->id >= 0) return tok_ids_push(out, s->id);
  int rc = ICL_OK;
  for (uint32_t i = 0; i < s->len && !rc; i++) {
    int32_t id = t->byte_tok[(unsigned char)w->buf[s->start + i]];
    if (id < 0) id = t->unk;
    if (id >= 0) rc = tok_ids_push(out, id);
  }
  return rc;
}

int tok_spm_encode(const icl_tokenizer *t, const char *text, size_t n, int space_prefix, tok_work *w, tok_ids *out,
                   icl_error *err) {
  if (n == 0) return ICL_OK;
  if (n > UINT32_MAX / 4)
    return icl_error_set(err, ICL_EINVAL, "icl_tokenize: text fragment of %zu bytes is too long", n);
  int rc = tok_work_buf(w, 3 * n + 3);
  if (!rc) rc = tok_work_syms(w, n + 1);
  if (rc) return rc;
  size_t len = escape_spaces(text, n, space_prefix, w);
  size_t ns = split_chars(t, w, len);
  w->heap.n = 0;
  for (size_t i = 1; i < ns && !rc; i++) rc = push_pair(t, w, (int32_t)i - 1, (int32_t)i);
  if (!rc) rc = merge_all(t, w);
  for (int32_t i = 0; i >= 0 && !rc; i = w->sym[i].next) rc = emit_symbol(t, w, &w->sym[i], out);
  return rc;
}
