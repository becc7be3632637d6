/* icl tokenize: token ids (or pieces) of a text under a GGUF file's tokenizer. Needs only the GGUF
 * reader and the tokenizer, so vocabulary-only files work as well as full models. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "icl/gguf.h"
#include "file_read.h"
#include "icl/tokenizer.h"

typedef struct tok_args {
  const char *model, *text, *file;
  int add_bos;   /* -1: as the vocabulary says */
  int special;   /* parse control tokens in the text */
  int pieces;    /* 0 ids, 1 id<TAB>text, 2 id<TAB>raw vocabulary piece */
} tok_args;

static void usage(FILE *f) {
  fprintf(f, "usage: icl tokenize [options] MODEL.gguf TEXT | -f FILE   (options may also follow; '--' ends them)\n"
             "  prints the token ids separated by spaces\n"
             "  --pieces   one 'id<TAB>text' line per token (the bytes it decodes to, escaped)\n"
             "  --raw      with --pieces: the piece as stored in the vocabulary (e.g. 'Ġthe', '▁the')\n"
             "  --no-bos   never prepend BOS; --bos always (default: as tokenizer.ggml.add_bos_token says)\n"
             "  --special  text matching control tokens ('<|im_start|>') becomes those tokens\n"
             "  -f FILE    read the text from FILE ('-' for standard input)\n");
}

static int parse(int argc, char **argv, tok_args *a) {
  *a = (tok_args){.add_bos = -1};
  int only_args = 0; /* after "--", everything is MODEL or TEXT */
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (only_args || o[0] != '-' || o[1] == '\0') {
      if (!a->model) a->model = o;
      else if (!a->text) a->text = o;
      else { fprintf(stderr, "icl tokenize: unexpected argument '%s' (quote the text)\n", o); return 2; }
    } else if (!strcmp(o, "--")) only_args = 1;
    else if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(stdout); exit(0); }
    else if (!strcmp(o, "--pieces")) a->pieces = a->pieces ? a->pieces : 1;
    else if (!strcmp(o, "--raw")) a->pieces = 2;
    else if (!strcmp(o, "--no-bos")) a->add_bos = 0;
    else if (!strcmp(o, "--bos")) a->add_bos = 1;
    else if (!strcmp(o, "--special")) a->special = 1;
    else if (!strcmp(o, "-f")) {
      if (++i >= argc) { fprintf(stderr, "icl tokenize: -f needs a file name\n"); return 2; }
      a->file = argv[i];
    } else {
      fprintf(stderr, "icl tokenize: unknown option '%s' (text that starts with '-' goes after --)\n", o);
      return 2;
    }
  }
  if (!a->model || (!a->text == !a->file)) {
    fprintf(stderr, "icl tokenize: need MODEL and exactly one of TEXT or -f FILE (try --help)\n");
    return 2;
  }
  return 0;
}

/* Reads a whole file (or stdin for "-"); NULL with a message on failure. */
static char *read_text(const char *path, size_t *len) {
  icl_error err;
  FILE *f = strcmp(path, "-") ? icl_file_fopen_read(path, &err) : stdin; /* regular files only: no FIFO hang */
  if (!f) {
    fprintf(stderr, "icl tokenize: %s\n", err.msg);
    return NULL;
  }
  size_t cap = 1 << 16, n = 0, got;
  char *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  int bad = ferror(f);
  if (f != stdin) fclose(f);
  if (!buf || bad) {
    fprintf(stderr, "icl tokenize: %s: %s\n", path, buf ? "read error" : "out of memory");
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), or 0 if malformed. */
static size_t utf8_ok(const unsigned char *s, size_t n) {
  size_t l = s[0] < 0xC2 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] < 0xF5 ? 4 : 0;
  if (l == 0 || l > n) return 0;
  for (size_t i = 1; i < l; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return l;
}

/* Writes bytes with control characters, backslashes and malformed UTF-8 escaped. */
static void put_escaped(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t l;
    if (p[i] == '\\') fputs("\\\\", stdout), i++;
    else if (p[i] == '\n') fputs("\\n", stdout), i++;
    else if (p[i] == '\t') fputs("\\t", stdout), i++;
    else if (p[i] == '\r') fputs("\\r", stdout), i++;
    else if (p[i] < 0x20 || p[i] == 0x7f) printf("\\x%02x", p[i]), i++;
    else if (p[i] < 0x80) putchar(p[i]), i++;
    else if ((l = utf8_ok(p + i, n - i)) > 0) fwrite(p + i, 1, l, stdout), i += l;
    else printf("\\x%02x", p[i]), i++;
  }
}

static void print_tokens(const icl_tokenizer *t, const int32_t *ids, int64_t n, int pieces) {
  for (int64_t i = 0; i < n; i++) {
    if (!pieces) {
      printf(i ? " %d" : "%d", ids[i]);
      continue;
    }
    size_t len = 0;
    const char *s = pieces == 2 ? icl_token_piece(t, ids[i]) : icl_token_text(t, ids[i], &len);
    if (pieces == 2) len = strlen(s);
    printf("%d\t", ids[i]);
    put_escaped(s, len);
    putchar('\n');
  }
  if (!pieces) putchar('\n');
}

/* Opens the file's tokenizer; returns the exit status (2: not a usable file). */
static int open_tokenizer(const char *path, icl_tokenizer **t) {
  icl_error err = {0};
  icl_gguf *g = NULL;
  int rc = icl_gguf_open(path, &g, &err);
  if (!rc) rc = icl_tokenizer_from_gguf(g, t, &err);
  icl_gguf_close(g);
  if (rc) fprintf(stderr, "icl tokenize: %s\n", err.msg);
  return rc == ICL_OK ? 0 : rc == ICL_ENOMEM ? 1 : 2;
}

int icl_cmd_tokenize(int argc, char **argv) {
  tok_args a;
  int status = parse(argc, argv, &a);
  if (status) return status;
  size_t len = a.text ? strlen(a.text) : 0;
  char *owned = a.file ? read_text(a.file, &len) : NULL;
  if (a.file && !owned) return 2;
  icl_tokenizer *t = NULL;
  status = open_tokenizer(a.model, &t);
  if (!status) {
    int32_t *ids = NULL;
    int64_t n = 0;
    icl_error err = {0};
    int rc = icl_tokenize(t, owned ? owned : a.text, len, a.add_bos, a.special, &ids, &n, &err);
    if (rc) fprintf(stderr, "icl tokenize: %s\n", err.msg);
    else print_tokens(t, ids, n, a.pieces);
    status = rc == ICL_OK ? 0 : rc == ICL_ENOMEM ? 1 : 2;
    free(ids);
  }
  icl_tokenizer_free(t);
  free(owned);
  if (!status && fflush(stdout) != 0) status = 1;
  return status;
}
