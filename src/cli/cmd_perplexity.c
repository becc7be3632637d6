/* icl perplexity: placeholder until its issue lands (replace this whole file). */
#include <stdio.h>

#include "cli.h"

int icl_cmd_perplexity(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "icl perplexity: not implemented yet\n");
  return 1;
}
