/* Tokenizer unit tests on tiny vocabularies written in memory with icl's GGUF writer: merge order and
 * ties, special tokens, BOS rules, byte fallback, lossless round trips of arbitrary bytes (invalid
 * UTF-8 included), long inputs, and errors for malformed vocabularies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/tokenizer.h"
#include "testutil.h"

/* ---- building vocabularies -------------------------------------------------------------------- */

typedef struct vocab {
  char *piece[600];
  int32_t type[600];
  float score[600];
  int n;
} vocab;

static int add_piece(vocab *v, const char *s, int type, float score) {
  v->piece[v->n] = strdup(s);
  v->type[v->n] = type;
  v->score[v->n] = score;
  return v->n++;
}

static void vocab_free(vocab *v) {
  for (int i = 0; i < v->n; i++) free(v->piece[i]);
  v->n = 0;
}

/* GPT-2 byte-level character of byte b, as UTF-8. */
static void byte_char(unsigned b, char out[3]) {
  unsigned cp = b;
  if (b <= 32) cp = 256 + b;
  else if (b >= 127 && b <= 160) cp = 256 + 33 + (b - 127);
  else if (b == 173) cp = 256 + 67;
  if (cp < 0x80) {
    out[0] = (char)cp;
    out[1] = 0;
  } else {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    out[2] = 0;
  }
}

typedef struct kvs {
  const char *model, *pre, *arch;
  int bos, eos, add_bos, add_space_prefix; /* -1: key absent */
  const char *const *merges;
  int n_merges;
  int types_short; /* write token_type one element short (malformed) */
} kvs;

/* Writes the vocabulary to an in-memory GGUF and builds a tokenizer from it; *rc gets the result. */
static icl_tokenizer *make_tok(const vocab *v, const kvs *k, int *rc_out, icl_error *err) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  int rc = w ? ICL_OK : ICL_ENOMEM;
  if (!rc && k->arch) rc = icl_gguf_w_str(w, "general.architecture", k->arch, err);
  if (!rc && k->model) rc = icl_gguf_w_str(w, "tokenizer.ggml.model", k->model, err);
  if (!rc && k->pre) rc = icl_gguf_w_str(w, "tokenizer.ggml.pre", k->pre, err);
  if (!rc && v->n)
    rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (uint64_t)v->n, (const char *const *)v->piece, err);
  if (!rc && v->n)
    rc = icl_gguf_w_arr(w, "tokenizer.ggml.token_type", ICL_GGUF_I32, (uint64_t)(v->n - k->types_short), v->type, err);
  if (!rc && v->n) rc = icl_gguf_w_arr(w, "tokenizer.ggml.scores", ICL_GGUF_F32, (uint64_t)v->n, v->score, err);
  if (!rc && k->merges) rc = icl_gguf_w_arr_str(w, "tokenizer.ggml.merges", (uint64_t)k->n_merges, k->merges, err);
  if (!rc && k->bos >= 0) rc = icl_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)k->bos, err);
  if (!rc && k->eos >= 0) rc = icl_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)k->eos, err);
  if (!rc && k->add_bos >= 0) rc = icl_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", k->add_bos, err);
  if (!rc && k->add_space_prefix >= 0)
    rc = icl_gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", k->add_space_prefix, err);
  void *mem = NULL;
  size_t size = 0;
  icl_gguf *g = NULL;
  icl_tokenizer *t = NULL;
  if (!rc) rc = icl_gguf_writer_to_memory(w, &mem, &size, err);
  if (!rc) rc = icl_gguf_open_memory(mem, size, "tiny.gguf", &g, err);
  if (!rc) rc = icl_tokenizer_from_gguf(g, &t, err);
  icl_gguf_close(g);
  free(mem);
  icl_gguf_writer_free(w);
  *rc_out = rc;
  return t;
}

/* Tokenizes s; returns the count and fills ids (up to cap); -1 on error. */
static int64_t tok(const icl_tokenizer *t, const char *s, size_t n, int add_bos, int special, int32_t *ids, int cap) {
  int32_t *v = NULL;
  int64_t nv = 0;
  icl_error err = {0};
  if (icl_tokenize(t, s, n, add_bos, special, &v, &nv, &err) != ICL_OK) {
    fprintf(stderr, "tokenize failed: %s\n", err.msg);
    return -1;
  }
  for (int64_t i = 0; i < nv && i < cap; i++) ids[i] = v[i];
  free(v);
  return nv;
}

static int64_t tok_s(const icl_tokenizer *t, const char *s, int special, int32_t *ids) {
  return tok(t, s, strlen(s), 0, special, ids, 64);
}

/* Decodes and compares with want. */
static int decodes_to(const icl_tokenizer *t, const int32_t *ids, int64_t n, int keep, const char *want, size_t wn) {
  char *s = NULL;
  size_t len = 0;
  icl_error err = {0};
  int ok = icl_detokenize(t, ids, n, keep, &s, &len, &err) == ICL_OK && len == wn && memcmp(s, want, wn) == 0;
  free(s);
  return ok;
}

static int round_trips(const icl_tokenizer *t, const char *s, size_t n) {
  int32_t *v = NULL;
  int64_t nv = 0;
  icl_error err = {0};
  if (icl_tokenize(t, s, n, 0, 0, &v, &nv, &err) != ICL_OK) return 0;
  int ok = decodes_to(t, v, nv, 0, s, n);
  free(v);
  return ok;
}

/* ---- byte-level BPE ---------------------------------------------------------------------------- */

enum { B_AB = 256, B_BC, B_ABC, B_AA, B_GA, B_12, B_EOT, B_TOOL };

static void bpe_vocab(vocab *v) {
  char c[3];
  for (unsigned b = 0; b < 256; b++) {
    byte_char(b, c);
    add_piece(v, c, 1, 0);
  }
  add_piece(v, "ab", 1, 0);
  add_piece(v, "bc", 1, 0);
  add_piece(v, "abc", 1, 0);
  add_piece(v, "aa", 1, 0);
  add_piece(v, "\xC4\xA0" "a", 1, 0); /* "Ġa" */
  add_piece(v, "12", 1, 0);
  add_piece(v, "<|eot|>", 3, 0);
  add_piece(v, "<tool>", 4, 0);
}

static void test_bpe(void) {
  vocab v = {0};
  bpe_vocab(&v);
  static const char *const merges[] = {"a b", "b c", "ab c", "a a", "\xC4\xA0 a", "1 2", "x"};
  kvs k = {"gpt2", "gpt-2", NULL, B_EOT, B_EOT, -1, -1, merges, 7, 0};
  int rc;
  icl_error err = {0};
  icl_tokenizer *t = make_tok(&v, &k, &rc, &err);
  CHECKF(rc == ICL_OK && t, "bpe vocab: %s", err.msg);
  if (!t) return;
  int32_t ids[64];
  CHECK(!strcmp(icl_tokenizer_model(t), "gpt2") && !strcmp(icl_tokenizer_pre(t), "gpt-2"));
  CHECK(tok_s(t, "abc", 0, ids) == 1 && ids[0] == B_ABC);              /* a b → ab, then ab c */
  CHECK(tok_s(t, "aaa", 0, ids) == 2 && ids[0] == B_AA && ids[1] == 'a'); /* equal ranks: leftmost first */
  CHECK(tok_s(t, "bca", 0, ids) == 2 && ids[0] == B_BC && ids[1] == 'a');
  CHECK(tok_s(t, " a", 0, ids) == 1 && ids[0] == B_GA);                /* the space joins the word */
  CHECK(tok_s(t, "12", 0, ids) == 1 && ids[0] == B_12);                /* gpt-2 keeps digit runs */
  CHECK(tok_s(t, "", 0, ids) == 0);
  /* BOS: the vocabulary does not ask for one, add_bos=1 forces it */
  CHECK(tok(t, "a", 1, -1, 0, ids, 64) == 1);
  CHECK(tok(t, "a", 1, 1, 0, ids, 64) == 2 && ids[0] == B_EOT);
  /* control tokens only with parse_special; user-defined ones always */
  int64_t n = tok_s(t, "a<|eot|>b", 0, ids);
  CHECK(n > 3 && ids[0] == 'a');
  n = tok_s(t, "a<|eot|>b", 1, ids);
  CHECK(n == 3 && ids[0] == 'a' && ids[1] == B_EOT && ids[2] == 'b');
  n = tok_s(t, "a<tool>b", 0, ids);
  CHECK(n == 3 && ids[1] == B_TOOL);
  int32_t seq[3] = {'a', B_EOT, 'b'};
  CHECK(decodes_to(t, seq, 3, 0, "ab", 2));
  CHECK(decodes_to(t, seq, 3, 1, "a<|eot|>b", 9));
  CHECK(icl_token_is_control(t, B_EOT) && !icl_token_is_control(t, 'a'));
  size_t len = 0;
  CHECK(icl_token_text(t, B_GA, &len) && len == 2 && !memcmp(icl_token_text(t, B_GA, NULL), " a", 2));
  CHECK(!strcmp(icl_token_piece(t, B_GA), "\xC4\xA0" "a"));
  CHECK(icl_token_text(t, -1, NULL) == NULL && icl_token_text(t, v.n, NULL) == NULL && icl_token_piece(t, v.n) == NULL);
  int32_t bad = v.n;
  char *s = NULL;
  CHECK(icl_detokenize(t, &bad, 1, 0, &s, &len, &err) == ICL_EINVAL && s == NULL);
  icl_tokenizer_free(t);

  /* smollm splits digits before the gpt-2 regex: "12" can no longer merge */
  k.pre = "smollm";
  t = make_tok(&v, &k, &rc, &err);
  CHECK(t && tok_s(t, "12", 0, ids) == 2 && ids[0] == '1' && ids[1] == '2');
  icl_tokenizer_free(t);
  /* every known pre-tokenizer compiles and round-trips; an unknown one falls back with a warning */
  static const char *const pres[] = {"llama3", "llama-bpe", "qwen2", "default", "no-such-pre"};
  for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++) {
    k.pre = pres[i];
    t = make_tok(&v, &k, &rc, &err);
    CHECKF(t && round_trips(t, "Hello, y'all! 123 \n\n  x", 23), "pre %s", pres[i]);
    icl_tokenizer_free(t);
  }
  vocab_free(&v);
}

/* ---- SentencePiece ----------------------------------------------------------------------------- */

enum { S_UNK, S_BOS, S_EOS, S_BYTE0, S_SP = 259, S_A, S_B, S_C, S_SPA, S_AB, S_ABC, S_SPAB };

static void spm_vocab(vocab *v) {
  add_piece(v, "<unk>", 2, 0);
  add_piece(v, "<s>", 3, 0);
  add_piece(v, "</s>", 3, 0);
  for (int b = 0; b < 256; b++) {
    char s[8];
    snprintf(s, sizeof s, "<0x%02X>", b);
    add_piece(v, s, 6, 0);
  }
  add_piece(v, "\xE2\x96\x81", 1, -1);       /* ▁ */
  add_piece(v, "a", 1, -2);
  add_piece(v, "b", 1, -2);
  add_piece(v, "c", 1, -2);
  add_piece(v, "\xE2\x96\x81" "a", 1, -3);   /* ▁a */
  add_piece(v, "ab", 1, -1.5f);              /* higher than ▁a: merged first */
  add_piece(v, "abc", 1, -4);
  add_piece(v, "\xE2\x96\x81" "ab", 1, -5);
}

static void test_spm(void) {
  vocab v = {0};
  spm_vocab(&v);
  kvs k = {"llama", "default", NULL, S_BOS, S_EOS, -1, -1, NULL, 0, 0};
  int rc;
  icl_error err = {0};
  icl_tokenizer *t = make_tok(&v, &k, &rc, &err);
  CHECKF(rc == ICL_OK && t, "spm vocab: %s", err.msg);
  if (!t) return;
  int32_t ids[64];
  /* "▁ab": ab (-1.5) beats ▁a (-3); then ▁ + ab → ▁ab */
  CHECK(tok_s(t, "ab", 0, ids) == 1 && ids[0] == S_SPAB);
  CHECK(tok_s(t, "abc", 0, ids) == 2 && ids[0] == S_SP && ids[1] == S_ABC);
  CHECK(tok_s(t, "x", 0, ids) == 2 && ids[0] == S_SP && ids[1] == S_BYTE0 + 'x'); /* byte fallback */
  CHECK(tok_s(t, "\xC3\xA9", 0, ids) == 3 && ids[1] == S_BYTE0 + 0xC3 && ids[2] == S_BYTE0 + 0xA9);
  CHECK(tok_s(t, "", 0, ids) == 0);
  /* SentencePiece vocabularies add BOS by default */
  CHECK(tok(t, "a", 1, -1, 0, ids, 64) == 2 && ids[0] == S_BOS);
  CHECK(tok(t, "a", 1, 0, 0, ids, 64) == 1 && ids[0] == S_SPA);
  /* a special token starts a new fragment, which gets its own space prefix; decoding removes both */
  int64_t n = tok_s(t, "a<s>a", 1, ids);
  CHECK(n == 3 && ids[0] == S_SPA && ids[1] == S_BOS && ids[2] == S_SPA);
  CHECK(decodes_to(t, ids, n, 1, "a<s>a", 5));
  CHECK(decodes_to(t, ids, n, 0, "aa", 2));
  CHECK(round_trips(t, " a  b ", 6) && round_trips(t, "\t\n", 2));
  icl_tokenizer_free(t);

  k.add_space_prefix = 0;
  t = make_tok(&v, &k, &rc, &err);
  CHECK(t && tok_s(t, "ab", 0, ids) == 1 && ids[0] == S_AB);
  CHECK(t && round_trips(t, " ab", 3));
  icl_tokenizer_free(t);
  k.add_space_prefix = -1;
  k.arch = "gemma3"; /* Gemma vocabularies have no dummy prefix even when the key is missing */
  t = make_tok(&v, &k, &rc, &err);
  CHECK(t && tok_s(t, "ab", 0, ids) == 1 && ids[0] == S_AB);
  icl_tokenizer_free(t);
  vocab_free(&v);
}

/* ---- arbitrary bytes, long inputs, errors ------------------------------------------------------ */

static void test_random_round_trip(void) {
  vocab vb = {0}, vs = {0};
  bpe_vocab(&vb);
  spm_vocab(&vs);
  static const char *const merges[] = {"a b", "b c"};
  kvs kb = {"gpt2", "llama3", NULL, -1, -1, -1, -1, merges, 2, 0};
  kvs ks = {"llama", NULL, NULL, 1, 2, -1, -1, NULL, 0, 0};
  int rc;
  icl_error err = {0};
  icl_tokenizer *tb = make_tok(&vb, &kb, &rc, &err), *ts = make_tok(&vs, &ks, &rc, &err);
  CHECK(tb && ts);
  if (!tb || !ts) return;
  uint64_t seed = 42;
  char buf[512];
  int bad_b = 0, bad_s = 0;
  for (int iter = 0; iter < 300; iter++) {
    size_t n = (size_t)(t_rand_u64(&seed) % sizeof buf);
    for (size_t i = 0; i < n; i++) { /* mostly text-like bytes, some arbitrary (invalid UTF-8) */
      uint64_t r = t_rand_u64(&seed);
      buf[i] = (char)(r % 4 ? " ab\n\t1'cxyz<>"[(r >> 8) % 13] : (int)(r >> 16));
    }
    bad_b += !round_trips(tb, buf, n);
    bad_s += !round_trips(ts, buf, n);
  }
  CHECKF(bad_b == 0, "byte-level BPE: %d of 300 random strings do not round-trip", bad_b);
  CHECKF(bad_s == 0, "SentencePiece: %d of 300 random strings do not round-trip", bad_s);
  /* long runs: one huge word, one huge whitespace run (regex lookahead), one huge SPM fragment */
  size_t big = 200000;
  char *s = malloc(big);
  memset(s, 'a', big);
  CHECK(round_trips(tb, s, big) && round_trips(ts, s, big));
  memset(s, ' ', big);
  CHECK(round_trips(tb, s, big) && round_trips(ts, s, big));
  free(s);
  icl_tokenizer_free(tb);
  icl_tokenizer_free(ts);
  vocab_free(&vb);
  vocab_free(&vs);
}

static void test_errors(void) {
  vocab v = {0};
  add_piece(&v, "a", 1, 0);
  int rc;
  icl_error err = {0};
  kvs k = {"bert", NULL, NULL, -1, -1, -1, -1, NULL, 0, 0};
  icl_tokenizer *t = make_tok(&v, &k, &rc, &err);
  CHECKF(!t && rc == ICL_EUNSUPPORTED && strstr(err.msg, "bert"), "unsupported model: %s", err.msg);
  k.model = NULL;
  t = make_tok(&v, &k, &rc, &err);
  CHECKF(!t && rc == ICL_EFORMAT, "no model key: %s", err.msg);
  k.model = "llama";
  k.types_short = 1;
  t = make_tok(&v, &k, &rc, &err);
  CHECKF(!t && rc == ICL_EFORMAT && strstr(err.msg, "token_type"), "short token_type: %s", err.msg);
  k.types_short = 0;
  vocab_free(&v);
  t = make_tok(&v, &k, &rc, &err);
  CHECKF(!t && rc == ICL_EFORMAT && strstr(err.msg, "tokens"), "no tokens: %s", err.msg);
  CHECK(icl_tokenizer_from_gguf(NULL, &t, &err) == ICL_EINVAL);
  icl_tokenizer_free(NULL);
  CHECK(icl_tokenizer_n_vocab(NULL) == 0 && icl_tokenizer_bos(NULL) == -1);
}

int main(void) {
  test_bpe();
  test_spm();
  test_random_round_trip();
  test_errors();
  return t_done();
}
