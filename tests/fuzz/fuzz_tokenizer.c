/* libFuzzer target: tokenizes arbitrary bytes with both tokenizer kinds (byte-level BPE from the GPT-2 vocabulary,
 * SentencePiece from the Llama one, both from tests/fixtures/tokenizer); every id must be in range, decoding must
 * succeed, and valid UTF-8 without special-token parsing must come back byte for byte (for SentencePiece, text
 * without its space marker U+2581).
 * Byte 0 of the input picks the tokenizer (bit 0), BOS (bit 1) and special-token parsing (bit 2). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/tokenizer.h"

#define MUST(c) do { if (!(c)) { fprintf(stderr, "MUST failed: %s\n", #c); abort(); } } while (0)

static icl_tokenizer *toks[2];

static icl_tokenizer *load(const char *name) {
  char path[4096];
  const char *src = getenv("ICL_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/tests/fixtures/tokenizer/%s", src ? src : ICL_SOURCE_DIR, name);
  icl_error err = {0};
  icl_gguf *g = NULL;
  icl_tokenizer *t = NULL;
  int rc = icl_gguf_open(path, &g, &err);
  if (!rc) rc = icl_tokenizer_from_gguf(g, &t, &err);
  icl_gguf_close(g);
  if (rc) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
    exit(1);
  }
  return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  toks[0] = load("ggml-vocab-gpt-2.gguf");
  toks[1] = load("ggml-vocab-llama-spm.gguf");
  return 0;
}

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points above U+10FFFF). */
static int valid_utf8(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!k || i + k > n) return 0;
    uint32_t cp = k == 1 ? c : c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + j] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const icl_tokenizer *t = toks[data[0] & 1];
  int bos = (data[0] >> 1) & 1, special = (data[0] >> 2) & 1;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error err = {0};
  if (icl_tokenize(t, text, len, bos, special, &ids, &n, &err) != ICL_OK) {
    MUST(err.msg[0] != '\0');
    return 0;
  }
  int32_t nv = icl_tokenizer_n_vocab(t);
  for (int64_t i = 0; i < n; i++) MUST(ids[i] >= 0 && ids[i] < nv);
  char *back = NULL;
  size_t nb = 0;
  MUST(icl_detokenize(t, ids, n, 0, &back, &nb, &err) == ICL_OK);
  MUST(back[nb] == '\0');
  /* SentencePiece stores spaces as U+2581 "▁": that character in the text cannot come back as itself */
  int spm_marker = (data[0] & 1) && memmem(text, len, "\xE2\x96\x81", 3);
  if (!bos && !special && !spm_marker && valid_utf8((const uint8_t *)text, len)) {
    if (nb != len || memcmp(back, text, len)) {
      fprintf(stderr, "round trip differs: %zu bytes in, %zu out\n", len, nb);
      abort();
    }
  }
  free(back);
  free(ids);
  return 0;
}
