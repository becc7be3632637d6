/* icl script: placeholder until its issue lands (replace this whole file). */
#include <stdio.h>

#include "cli.h"

int icl_cmd_script(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "icl script: not implemented yet\n");
  return 1;
}
