/* Tokenizer conformance: the public llama.cpp vocabulary test vectors in tests/fixtures/tokenizer.
 * Each .inp string is tokenized without BOS and without special-token parsing and must give exactly the
 * ids of the matching .out line; decoding those ids must give the input bytes back. Every case counts:
 * a missing file or an unreadable case is a failure, never a skip. Also reports tokens/s on GPL-3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "icl/gguf.h"
#include "icl/tokenizer.h"
#include "testutil.h"

static const char *const FILES[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"};
static const char MARK[] = "\n__ggml_vocab_test__\n";

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0, got;
  char *buf = malloc(cap + 1);
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      char *nb = realloc(buf, (cap *= 2) + 1);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) buf[len] = '\0';
  *n = len;
  return buf;
}

/* Prints s with control bytes and non-ASCII escaped, for failure reports. */
static void print_escaped(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\n') fputs("\\n", stderr);
    else if (c == '\t') fputs("\\t", stderr);
    else if (c < 0x20 || c == 0x7f) fprintf(stderr, "\\x%02x", c);
    else fputc(c, stderr);
  }
}

/* Parses one line of space-separated ids; returns the count (ids has room for cap). */
static int64_t parse_ids(const char *line, int32_t *ids, int64_t cap) {
  int64_t n = 0;
  char *end;
  for (const char *p = line; *p && *p != '\n';) {
    long v = strtol(p, &end, 10);
    if (end == p) {
      p++;
      continue;
    }
    if (n < cap) ids[n] = (int32_t)v;
    n++;
    p = end;
  }
  return n;
}

static void print_ids(const char *label, const int32_t *ids, int64_t n) {
  fprintf(stderr, "    %s:", label);
  for (int64_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
  fputc('\n', stderr);
}

/* Checks one case; returns 1 if ids and round trip both match. */
static int check_case(const icl_tokenizer *tok, const char *name, int idx, const char *text, size_t len,
                      const char *out_line) {
  int32_t want[1024], *got = NULL;
  int64_t nw = parse_ids(out_line, want, 1024), ng = 0;
  icl_error err = {0};
  int rc = icl_tokenize(tok, text, len, 0, 0, &got, &ng, &err);
  int ids_ok = rc == ICL_OK && nw <= 1024 && ng == nw && (ng == 0 || memcmp(got, want, (size_t)ng * sizeof *got) == 0);
  CHECKF(ids_ok, "%s case %d: token ids differ (%s)", name, idx, rc ? err.msg : "see below");
  if (!ids_ok) {
    fputs("    input: \"", stderr);
    print_escaped(text, len);
    fputs("\"\n", stderr);
    print_ids("want", want, nw < 1024 ? nw : 1024);
    if (rc == ICL_OK) print_ids("got ", got, ng);
  }
  char *back = NULL;
  size_t nb = 0;
  int rt_ok = rc == ICL_OK && icl_detokenize(tok, got, ng, 0, &back, &nb, &err) == ICL_OK && nb == len &&
              memcmp(back, text, len) == 0;
  CHECKF(rt_ok, "%s case %d: decode(encode(x)) != x", name, idx);
  if (!rt_ok && back) {
    fputs("    decoded: \"", stderr);
    print_escaped(back, nb);
    fputs("\"\n", stderr);
  }
  free(back);
  free(got);
  return ids_ok && rt_ok;
}

/* Runs every case of one vocabulary file; prints a summary line. */
static void run_file(const char *name) {
  char path[4096], inp_path[4200], out_path[4200];
  snprintf(path, sizeof path, "%s", t_src_path("tests/fixtures/tokenizer/"));
  snprintf(inp_path, sizeof inp_path, "%s%s.inp", path, name);
  snprintf(out_path, sizeof out_path, "%s%s.out", path, name);
  strncat(path, name, sizeof path - strlen(path) - 1);
  icl_error err = {0};
  icl_gguf *g = NULL;
  icl_tokenizer *tok = NULL;
  size_t ni = 0, no = 0;
  char *inp = read_all(inp_path, &ni), *out = read_all(out_path, &no);
  int rc = icl_gguf_open(path, &g, &err);
  if (!rc) rc = icl_tokenizer_from_gguf(g, &tok, &err);
  icl_gguf_close(g);
  CHECKF(rc == ICL_OK && inp && out, "%s: cannot load vocabulary or vectors: %s", name,
         rc ? err.msg : "missing .inp/.out");
  int cases = 0, passed = 0;
  if (rc == ICL_OK && inp && out) {
    const char *p = inp, *line = out, *m;
    while ((m = strstr(p, MARK)) != NULL) {
      CHECKF(*line != '\0', "%s case %d: no expected line in .out", name, cases);
      if (*line == '\0') break;
      passed += check_case(tok, name, cases, p, (size_t)(m - p), line);
      cases++;
      p = m + strlen(MARK);
      const char *nl = strchr(line, '\n');
      line = nl ? nl + 1 : line + strlen(line);
    }
    CHECKF(*p == '\0' && *line == '\0', "%s: trailing input or expected lines not consumed", name);
  }
  printf("%s: %d cases, %d passed (ids and round trip), %d failed\n", name, cases, passed, cases - passed);
  icl_tokenizer_free(tok);
  free(inp);
  free(out);
}

/* Informational: tokens per second on a large English text with the gpt-2 vocabulary. */
static void speed(void) {
  size_t n = 0;
  char *text = read_all("/usr/share/common-licenses/GPL-3", &n);
  if (!text) {
    printf("speed: /usr/share/common-licenses/GPL-3 not present\n");
    return;
  }
  for (int f = 0; f < 2; f++) {
    icl_error err = {0};
    icl_gguf *g = NULL;
    icl_tokenizer *tok = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s%s", t_src_path("tests/fixtures/tokenizer/"), FILES[f]);
    if (icl_gguf_open(path, &g, &err) || icl_tokenizer_from_gguf(g, &tok, &err)) {
      icl_gguf_close(g);
      continue;
    }
    icl_gguf_close(g);
    struct timespec a, b;
    int64_t total = 0, nt = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int rep = 0; rep < 5; rep++) {
      int32_t *ids = NULL;
      if (icl_tokenize(tok, text, n, 0, 0, &ids, &nt, &err) == ICL_OK) total += nt;
      free(ids);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    printf("speed: %s on GPL-3 (%zu bytes -> %lld tokens): %.0f tokens/s, %.1f MB/s\n", FILES[f], n, (long long)nt,
           (double)total / s, 5.0 * (double)n / s / 1e6);
    icl_tokenizer_free(tok);
  }
  free(text);
}

int main(void) {
  for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) run_file(FILES[i]);
  speed();
  return t_done();
}
