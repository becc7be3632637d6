/* Running Lua code from the command line: protected calls with a traceback and Ctrl-C (icl_lua.c), and the
 * interactive REPL (repl.c). */
#ifndef ICL_REPL_H
#define ICL_REPL_H

#include <lua.h>

/* Calls the function below narg arguments like lua_pcall, with a traceback message handler; while it runs,
 * SIGINT sets the state's interrupt flag and a hook that raises "interrupted" in Lua code (a second SIGINT
 * ends the process). Returns the lua_pcall status (the error message with its traceback on top). */
int icl_lua_docall(lua_State *L, int narg, int nres);

/* If status is not LUA_OK, prints the message on top of the stack to stderr and pops it; returns status. */
int icl_lua_report(lua_State *L, int status);

/* The interactive loop on stdin/stdout (readline with history when stdin is a terminal, plain lines otherwise).
 * Returns the process exit status: 0, or 1 when stdin is not a terminal and some input failed. */
int icl_lua_repl(lua_State *L);

#endif
