/* Test tool: writes a tiny random llama model (src/testmodel.c) for the CLI tests, optionally poisoned.
 * usage: icl_tiny_model OUT.gguf [--nan TENSOR] [--name TEXT]
 *   --nan TENSOR  sets element 0 of an F32 tensor to NaN (e.g. blk.0.attn_norm.weight)
 *   --name TEXT   sets general.name (any bytes: escape sequences, invalid UTF-8) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "icl/types.h"
#include "gguf_edit.h"
#include "testmodel.h"

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
    t_edit e = {.key = "general.name", .type = ICL_GGUF_STRING, .index = -1, .sval = argv[i + 1]};
    if (!strcmp(argv[i], "--nan")) e = (t_edit){.key = argv[i + 1], .index = -1, .nan = 1};
    if (t_gguf_edit(argv[1], argv[1], &e, 1, &err)) {
      fprintf(stderr, "icl_tiny_model: %s\n", err.msg);
      return 1;
    }
  }
  return 0;
}
