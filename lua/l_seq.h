/* Reading Lua sequences safely: every place the binding reads a list goes through these, so that a table whose
 * __len lies (huge, negative, or different on a second call) cannot size an array wrongly or overflow it. */
#ifndef ICL_L_SEQ_H
#define ICL_L_SEQ_H

#include <lauxlib.h>
#include <lua.h>
#include <stddef.h>

/* The default bound on a list's length (2^31 - 1 entries). */
#define ICL_LUA_SEQ_MAX ((lua_Integer)0x7fffffff)

/* Length of the table at idx, read once (__len honoured), checked to lie in 0..max. On failure raises an argument
 * error for arg (arg > 0) or a plain error, naming what: "what: length N out of range 0..max". Callers size their
 * arrays with this value and loop to it only. */
lua_Integer icl_lua_seq_len(lua_State *L, int idx, int arg, lua_Integer max, const char *what);

/* A userdata array of n elements of size bytes pushed on the stack (it anchors the memory); raises on overflow
 * of n * size. n = 0 gives a valid one-byte block. */
void *icl_lua_seq_array(lua_State *L, lua_Integer n, size_t size, const char *what);

#endif
