/* Tokenizers of the real models in models/ (fetched by scripts/fetch-models.sh): SmolLM2-135M (byte-level
 * BPE, pre=smollm) and Gemma 3 270M (SentencePiece, no space prefix, user-defined whitespace runs).
 * Expected ids were produced by independent implementations (Hugging Face tokenizers for SmolLM2,
 * Google's sentencepiece for Gemma 3) from the same vocabularies. A missing model prints
 * "SKIPPED: model not present" and counts as neither pass nor fail. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/tokenizer.h"
#include "testutil.h"

static const char WORDS[] = " apple bird car egg house milk plane opera box sand sun mango rock math code phone";
static const char MIXED[] = "Hello world!\n\n  <h1>x</h1>\tThe 1234 caf\xC3\xA9 \xF0\x9F\xA6\x99";
static const char NUMBERS[] = "In 2024, 3.14159 and 1,000,000 people said: \"Hello!\"";

typedef struct expect {
  const char *text;
  const int32_t *ids;
  int64_t n;
} expect;

static const int32_t SMOL_WORDS[] = {11977, 5615, 1076, 3785, 2291, 4788, 8303, 22472,
                                     3985,  4903, 2388, 32059, 4022, 4119, 2909, 5460};
static const int32_t SMOL_MIXED[] = {19556, 905, 17, 8866, 2067, 88, 33, 46, 104, 9617, 88, 33,
                                     46, 197, 504, 216, 33, 34, 35, 36, 37366, 15107, 116, 243};
static const int32_t SMOL_NUMBERS[] = {788, 216, 34, 32, 34, 36, 28, 216, 35, 30, 33, 36, 33, 37, 41, 284,
                                       216, 33, 28, 32, 32, 32, 28, 32, 32, 32, 701, 1137, 42, 476, 19556, 6653};
static const int32_t GEMMA_WORDS[] = {17810, 8001, 1295, 8727, 3155, 9556,  8180, 32960,
                                      3673,  6784, 3768, 51894, 5441, 6596, 3393, 5154};
static const int32_t GEMMA_MIXED[] = {9259,   1902,   236888, 108, 138, 184, 236781, 191, 255968, 818, 236743,
                                      236770, 236778, 236800, 236812, 33443, 236743, 478, 397, 404, 391};
static const int32_t GEMMA_NUMBERS[] = {902,    236743, 236778, 236771, 236778, 236812, 236764, 236743, 236800,
                                        236761, 236770, 236812, 236770, 236810, 236819, 532,    236743, 236770,
                                        236764, 236771, 236771, 236771, 236764, 236771, 236771, 236771, 1331,
                                        1176,   236787, 623,    9259,   9332};

#define N(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static int skipped = 0;

/* Opens the first file matching pattern under the source tree; NULL (and a SKIPPED line) if none. */
static icl_tokenizer *open_model(const char *pattern) {
  glob_t gl;
  icl_tokenizer *t = NULL;
  if (glob(t_src_path(pattern), 0, NULL, &gl) != 0 || gl.gl_pathc == 0) {
    printf("SKIPPED: model not present (%s; scripts/fetch-models.sh fetches it)\n", pattern);
    skipped++;
    globfree(&gl);
    return NULL;
  }
  icl_error err = {0};
  icl_gguf *g = NULL;
  int rc = icl_gguf_open(gl.gl_pathv[0], &g, &err);
  if (!rc) rc = icl_tokenizer_from_gguf(g, &t, &err);
  CHECKF(rc == ICL_OK, "%s: %s", gl.gl_pathv[0], err.msg);
  icl_gguf_close(g);
  globfree(&gl);
  return t;
}

/* Tokenizes without BOS or special parsing and compares with the reference ids; checks the round trip. */
static void check_ids(const icl_tokenizer *t, const char *name, const expect *e) {
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error err = {0};
  size_t len = strlen(e->text);
  int rc = icl_tokenize(t, e->text, len, 0, 0, &ids, &n, &err);
  int same = rc == ICL_OK && n == e->n && memcmp(ids, e->ids, (size_t)n * sizeof *ids) == 0;
  CHECKF(same, "%s: ids of \"%s\" differ from the reference (%lld tokens, want %lld)", name, e->text, (long long)n,
         (long long)e->n);
  char *back = NULL;
  size_t nb = 0;
  CHECKF(rc == ICL_OK && icl_detokenize(t, ids, n, 0, &back, &nb, &err) == ICL_OK && nb == len &&
             memcmp(back, e->text, len) == 0,
         "%s: round trip of \"%s\"", name, e->text);
  free(back);
  free(ids);
}

/* Each word of the park-grid vocabulary is a single token that decodes to " word". */
static void check_one_token_per_word(const icl_tokenizer *t, const char *name) {
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error err = {0};
  CHECK(icl_tokenize(t, WORDS, strlen(WORDS), 0, 0, &ids, &n, &err) == ICL_OK);
  CHECKF(n == 16, "%s: %lld tokens for 16 words", name, (long long)n);
  const char *w = WORDS;
  for (int64_t i = 0; i < n && i < 16; i++) {
    const char *end = strchr(w + 1, ' ');
    size_t wl = end ? (size_t)(end - w) : strlen(w), tl = 0;
    const char *s = icl_token_text(t, ids[i], &tl);
    CHECKF(s && tl == wl && memcmp(s, w, wl) == 0, "%s: token %lld is not \"%.*s\"", name, (long long)i, (int)wl, w);
    w += wl;
  }
  free(ids);
}

/* Tokenizes text with the given flags; returns the count, ids copied into out (up to cap). */
static int64_t tok(const icl_tokenizer *t, const char *text, int add_bos, int special, int32_t *out, int cap) {
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error err = {0};
  if (icl_tokenize(t, text, strlen(text), add_bos, special, &ids, &n, &err) != ICL_OK) return -1;
  for (int64_t i = 0; i < n && i < cap; i++) out[i] = ids[i];
  free(ids);
  return n;
}

static void test_smollm2(void) {
  icl_tokenizer *t = open_model("models/SmolLM2-135M-Instruct*.gguf");
  if (!t) return;
  CHECK(!strcmp(icl_tokenizer_model(t), "gpt2") && !strcmp(icl_tokenizer_pre(t), "smollm"));
  CHECK(icl_tokenizer_n_vocab(t) == 49152);
  check_one_token_per_word(t, "SmolLM2");
  expect cases[] = {{WORDS, SMOL_WORDS, N(SMOL_WORDS)}, {MIXED, SMOL_MIXED, N(SMOL_MIXED)},
                    {NUMBERS, SMOL_NUMBERS, N(SMOL_NUMBERS)}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_ids(t, "SmolLM2", &cases[i]);
  int32_t ids[16];
  CHECK(tok(t, "hi", -1, 0, ids, 16) == 1);                   /* add_bos_token is false */
  int64_t n = tok(t, "<|im_start|>user\nhi<|im_end|>", 0, 1, ids, 16);
  CHECK(n >= 3 && ids[0] == 1 && ids[n - 1] == 2);            /* chat markers */
  CHECK(icl_token_is_control(t, 2) && icl_tokenizer_eos(t) == 2);
  icl_tokenizer_free(t);
}

static void test_gemma3(void) {
  icl_tokenizer *t = open_model("models/gemma-3-270m*.gguf");
  if (!t) return;
  CHECK(!strcmp(icl_tokenizer_model(t), "llama"));
  CHECK(icl_tokenizer_n_vocab(t) == 262144 && icl_tokenizer_bos(t) == 2 && icl_tokenizer_eos(t) == 1);
  check_one_token_per_word(t, "Gemma 3");
  expect cases[] = {{WORDS, GEMMA_WORDS, N(GEMMA_WORDS)}, {MIXED, GEMMA_MIXED, N(GEMMA_MIXED)},
                    {NUMBERS, GEMMA_NUMBERS, N(GEMMA_NUMBERS)}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_ids(t, "Gemma 3", &cases[i]);
  int32_t ids[16];
  CHECK(tok(t, "Hello", -1, 0, ids, 16) == 2 && ids[0] == 2 && ids[1] == 9259); /* BOS, no space prefix */
  int64_t n = tok(t, "<start_of_turn>user\nhi<end_of_turn>", 0, 1, ids, 16);
  CHECK(n >= 4 && ids[0] == 105 && ids[1] == 2364 && ids[2] == 107 && ids[n - 1] == 106);
  icl_tokenizer_free(t);
}

/* Whole GPL-3 through each present model: lossless. */
static void test_large_round_trip(void) {
  FILE *f = fopen("/usr/share/common-licenses/GPL-3", "rb");
  if (!f) return;
  static char text[65536];
  size_t len = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[len] = '\0';
  const char *pats[] = {"models/SmolLM2-135M-Instruct*.gguf", "models/gemma-3-270m*.gguf"};
  for (int i = 0; i < 2; i++) {
    glob_t gl;
    int present = glob(t_src_path(pats[i]), 0, NULL, &gl) == 0 && gl.gl_pathc > 0;
    globfree(&gl);
    if (!present) continue; /* already reported as skipped */
    icl_tokenizer *t = open_model(pats[i]);
    if (!t) continue;
    int32_t *ids = NULL;
    int64_t n = 0;
    char *back = NULL;
    size_t nb = 0;
    icl_error err = {0};
    CHECKF(icl_tokenize(t, text, len, 0, 0, &ids, &n, &err) == ICL_OK &&
               icl_detokenize(t, ids, n, 0, &back, &nb, &err) == ICL_OK && nb == len && !memcmp(back, text, len),
           "%s: GPL-3 round trip", pats[i]);
    printf("%s: GPL-3 is %lld tokens\n", pats[i], (long long)n);
    free(ids);
    free(back);
    icl_tokenizer_free(t);
  }
}

int main(void) {
  test_smollm2();
  test_gemma3();
  test_large_round_trip();
  if (skipped) printf("%d model(s) skipped\n", skipped);
  return t_done();
}
