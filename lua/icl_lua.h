/* Internal interface between the Lua binding's parts (the C files under lua/). */
#ifndef ICL_LUA_H
#define ICL_LUA_H

#include <lauxlib.h>
#include <lua.h>

#include "icl/tensor.h"

/* Creates a Lua state with the standard libraries and the global `icl` table (all modules registered). */
lua_State *icl_lua_new_state(void);

/* Runs a script file with `arg` set as the stock interpreter does; prints errors with a traceback; returns the
 * process exit status. */
int icl_lua_run_file(lua_State *L, const char *path, int argc, char **argv);

/* Tensor userdata: push takes ownership of t; check raises a Lua argument error if arg is not a tensor. */
void icl_lua_push_tensor(lua_State *L, icl_tensor *t);

/* Pushes the whole content of the regular file at path as a string; nonzero with err set (nothing pushed) when it
 * cannot be opened or read. */
int icl_lua_read_file(lua_State *L, const char *path, icl_error *err);

/* Writes n bytes to path through a temporary file in its folder renamed over it (l_json.c); pushes true, or
 * nil and a message naming the path. */
int icl_lua_write_atomic(lua_State *L, const char *path, const char *data, size_t n);
icl_tensor *icl_lua_check_tensor(lua_State *L, int arg);
icl_tensor *icl_lua_test_tensor(lua_State *L, int arg); /* NULL if not a tensor */

/* Module openers: each pushes its module table (registered as icl.<name>). */
int icl_lua_open_tensor(lua_State *L);   /* icl.tensor */
int icl_lua_open_model(lua_State *L);    /* icl.load, model methods, icl.devices */
int icl_lua_open_rng(lua_State *L);      /* icl.rng */
int icl_lua_open_linalg(lua_State *L);   /* icl.pca and friends (LAPACKE) */
int icl_lua_ncm_probe(lua_State *L);     /* icl.linalg.ncm_probe (l_probe.c) */
int icl_lua_ncm_fit(lua_State *L);       /* icl.linalg.ncm_fit (l_probe.c) */
int icl_lua_open_plot(lua_State *L);     /* icl.plot (cairo) */
int icl_lua_open_json(lua_State *L);     /* icl.json (cJSON) */
int icl_lua_open_progress(lua_State *L); /* icl.progress */
int icl_lua_open_fs(lua_State *L);       /* icl.fs: folders without a shell (l_fs.c) */
int icl_lua_open_htmlcodec(lua_State *L); /* icl.htmlcodec: packing and writing for icl.html (l_html.c) */
int icl_lua_clock(lua_State *L);         /* icl.clock: monotonic seconds */
int icl_lua_open_train(lua_State *L);    /* icl.train, icl.nn, icl.optim, icl.data (merged into icl) */
void icl_lua_add_data_meta(lua_State *L); /* sets icl.data.meta_learning (icl table on top) */

/* The one rule for a C API result at the Lua boundary (docs/lua-api.md, "Errors"): ICL_OK returns 0 and pushes
 * nothing; ICL_EINVAL (a wrong call) and ICL_EINTR (Ctrl-C) raise err's message; every other code (a file, format,
 * memory, device or unsupported feature failing: an expected failure) pushes nil and the message and returns 2. */
int icl_lua_result(lua_State *L, int rc, const icl_error *err);

/* Interrupt flag set by SIGINT in the REPL; checked between chunks of long runs. */
volatile int *icl_lua_interrupt_flag(lua_State *L);

#endif
