/* icl repl (also `icl` with no arguments): the interactive Lua REPL with the icl library loaded. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "icl_lua.h"
#include "repl.h"

static void usage(FILE *f) {
  fprintf(f, "usage: icl repl\n\n"
             "Interactive Lua with the icl library loaded as the global `icl`. Expressions print their values;\n"
             "incomplete statements continue on the next line ('>>'). Ctrl-C interrupts running code (or clears\n"
             "the line), Ctrl-D exits. History: ~/.icl_history (ICL_HISTORY=FILE to change, empty for none).\n"
             "When standard input is not a terminal, lines are read without prompts.\n");
}

int icl_cmd_repl(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return 0;
  }
  if (argc >= 2 && strcmp(argv[0], "repl") == 0) {
    fprintf(stderr, "icl repl: unexpected argument '%s'\n", argv[1]);
    usage(stderr);
    return 2;
  }
  lua_State *L = icl_lua_new_state();
  if (!L) return 1;
  int status = icl_lua_repl(L);
  lua_close(L);
  return status;
}
