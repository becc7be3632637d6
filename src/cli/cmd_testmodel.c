/* icl testmodel --like smollm2|gemma3 -o FILE [--seed N]: a random-weight model with the exact tensor table,
 * hyperparameters and vocabulary size of a real model, for benchmarks and device checks without the real file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "testmodel.h"

static void usage(FILE *f) {
  fprintf(f, "usage: icl testmodel --like smollm2|gemma3 -o FILE.gguf [--seed N]\n\n"
             "Writes random weights in the exact shapes, hyperparameters and per-tensor types of a real model\n"
             "(smollm2: %s, gemma3: %s) with a synthetic vocabulary of its size.\n",
          icl_like_files[0], icl_like_files[1]);
}

int icl_cmd_testmodel(int argc, char **argv) {
  const char *like = NULL, *out = NULL;
  long seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
    if (!v) return fprintf(stderr, "icl testmodel: %s needs a value (see icl testmodel --help)\n", a), 2;
    if (!strcmp(a, "--like")) like = v;
    else if (!strcmp(a, "-o")) out = v;
    else if (!strcmp(a, "--seed")) { if (cli_int("testmodel", a, v, 0, 0x7fffffff, &seed)) return 2; }
    else return fprintf(stderr, "icl testmodel: unknown option '%s' (see icl testmodel --help)\n", a), 2;
    i++;
  }
  if (!like || !out) return fprintf(stderr, "icl testmodel: --like and -o are required\n"), usage(stderr), 2;
  icl_error e = {0};
  double t0 = cli_now();
  int rc = icl_write_like_model(out, like, (uint64_t)seed, &e);
  if (rc) return fprintf(stderr, "icl testmodel: %s\n", e.msg), rc == ICL_EINVAL ? 2 : 1;
  printf("wrote %s (like %s, seed %ld) in %.1f s\n", out, like, seed, cli_now() - t0);
  return 0;
}
