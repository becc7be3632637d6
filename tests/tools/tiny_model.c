/* Test tool: writes a tiny random llama model (src/testmodel.c) for the CLI tests, optionally poisoned.
 * usage: icl_tiny_model OUT.gguf [--nan TENSOR] [--name TEXT]
 *   --nan TENSOR  sets element 0 of an F32 tensor to NaN (e.g. blk.0.attn_norm.weight)
 *   --name TEXT   sets general.name (any bytes: escape sequences, invalid UTF-8) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/types.h"
#include "gguf_edit.h"
#include "testmodel.h"

/* Reads the whole file at path (malloc'd). */
static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  rewind(f);
  unsigned char *b = malloc((size_t)sz + 1);
  *n = b && fread(b, 1, (size_t)sz, f) == (size_t)sz ? (size_t)sz : 0;
  fclose(f);
  return b;
}

/* Rewrites element 0 of tensor `name` (F32) in place as NaN. */
static int poison(const char *path, const char *name) {
  size_t n = 0;
  unsigned char *b = slurp(path, &n);
  icl_gguf *g = NULL;
  icl_error err = {0};
  int rc = b && n ? icl_gguf_open_memory(b, n, path, &g, &err) : 1;
  const icl_gguf_tensor *t = rc ? NULL : icl_gguf_find_tensor(g, name);
  if (t && t->type == ICL_TYPE_F32) {
    float nan = NAN;
    memcpy(b + ((const unsigned char *)t->data - b), &nan, sizeof nan);
    FILE *f = fopen(path, "wb");
    rc = !f || fwrite(b, 1, n, f) != n;
    if (f) fclose(f);
  } else {
    fprintf(stderr, "icl_tiny_model: no F32 tensor '%s' (%s)\n", name, err.msg);
    rc = 1;
  }
  icl_gguf_close(g);
  free(b);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: icl_tiny_model OUT.gguf [--nan TENSOR] [--name TEXT]\n");
    return 2;
  }
  icl_tiny_spec spec = {.arch = "llama", .wtype = ICL_TYPE_F32, .seed = 7};
  icl_error err = {0};
  if (icl_write_tiny_model(argv[1], &spec, &err)) {
    fprintf(stderr, "icl_tiny_model: %s\n", err.msg);
    return 1;
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--nan") && poison(argv[1], argv[i + 1])) return 1;
    t_edit e = {.key = "general.name", .type = ICL_GGUF_STRING, .index = -1, .sval = argv[i + 1]};
    if (!strcmp(argv[i], "--name") && t_gguf_edit(argv[1], argv[1], &e, 1, &err)) {
      fprintf(stderr, "icl_tiny_model: %s\n", err.msg);
      return 1;
    }
  }
  return 0;
}
