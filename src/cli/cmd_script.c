/* icl script FILE.lua [args...]: runs a Lua experiment script with `arg` set as the stock interpreter does. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "icl_lua.h"

static void usage(FILE *f) {
  fprintf(f, "usage: icl script FILE.lua [args...]\n\n"
             "Runs FILE.lua ('-' reads standard input) with the icl library loaded as the global `icl`.\n"
             "arg[0] is the script, arg[1..] its arguments (also passed as ...). Exit status 0, or 1 after an\n"
             "error (message and traceback on stderr). Ctrl-C interrupts the script.\n");
}

int icl_cmd_script(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  lua_State *L = icl_lua_new_state();
  if (!L) return 1;
  int status = icl_lua_run_file(L, argv[1], argc - 1, argv + 1);
  lua_close(L);
  return status;
}
