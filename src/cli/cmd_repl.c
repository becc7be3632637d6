/* icl repl: placeholder until its issue lands (replace this whole file). */
#include <stdio.h>

#include "cli.h"

int icl_cmd_repl(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "icl repl: not implemented yet\n");
  return 1;
}
