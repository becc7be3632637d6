/* Safe reading of Lua sequences (see l_seq.h). */
#include "l_seq.h"

#include <stdint.h>

lua_Integer icl_lua_seq_len(lua_State *L, int idx, int arg, lua_Integer max, const char *what) {
  lua_Integer n = luaL_len(L, idx); /* one call: a __len that changes its answer is read once */
  if (n >= 0 && n <= max) return n;
  const char *msg = lua_pushfstring(L, "%s: length %I out of range 0..%I", what, n, max);
  if (arg > 0) luaL_argerror(L, arg, msg);
  return luaL_error(L, "%s", msg);
}

void *icl_lua_seq_array(lua_State *L, lua_Integer n, size_t size, const char *what) {
  if (n < 0 || (n > 0 && (uint64_t)n > (SIZE_MAX / 2) / size))
    luaL_error(L, "%s: %I entries of %d bytes do not fit in memory", what, n, (int)size);
  return lua_newuserdatauv(L, n ? (size_t)n * size : 1, 0);
}
