/* Options tables of the training API: see l_opts.h. Values are never cut to a narrower type: the range is
 * checked on the full Lua value first, then the caller casts. */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "l_opts.h"

void lopt_known(lua_State *L, int t, const char *fn, const char *const *keys) {
  t = lua_absindex(L, t);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int found = 0;
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -1);
      for (int i = 0; keys[i] && !found; i++) found = !strcmp(k, keys[i]);
    }
    if (found) continue;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; keys[i]; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, keys[i]);
    }
    luaL_pushresult(&b);
    if (lua_type(L, -2) == LUA_TSTRING)
      luaL_error(L, "%s: unknown option '%s' (known: %s)", fn, lua_tostring(L, -2), lua_tostring(L, -1));
    luaL_error(L, "%s: options must be named (got a %s key; known: %s)", fn, luaL_typename(L, -2),
               lua_tostring(L, -1));
  }
}

/* Pushes field k; returns 0 (and pops it) when it is nil. */
static int get(lua_State *L, int t, const char *k) {
  if (lua_getfield(L, t, k) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  return 0;
}

int64_t lopt_int(lua_State *L, int t, const char *fn, const char *k, int64_t dflt, int64_t lo, int64_t hi) {
  if (!get(L, t, k)) return dflt;
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (!isint || lua_type(L, -1) != LUA_TNUMBER) {
    if (lua_type(L, -1) == LUA_TNUMBER)
      luaL_error(L, "%s: option %s = %s, expected an integer in %I..%I", fn, k, lua_tostring(L, -1),
                 (lua_Integer)lo, (lua_Integer)hi);
    luaL_error(L, "%s: option %s: expected an integer, got a %s", fn, k, luaL_typename(L, -1));
  }
  if (v < lo || v > hi) luaL_error(L, "%s: option %s = %I, expected %I..%I", fn, k, v, (lua_Integer)lo, (lua_Integer)hi);
  lua_pop(L, 1);
  return (int64_t)v;
}

int lopt_bool(lua_State *L, int t, const char *fn, const char *k, int dflt) {
  if (!get(L, t, k)) return dflt;
  int v = -1, isint = 0;
  if (lua_isboolean(L, -1)) v = lua_toboolean(L, -1);
  else if (lua_type(L, -1) == LUA_TNUMBER) {
    lua_Integer i = lua_tointegerx(L, -1, &isint);
    if (isint && (i == 0 || i == 1)) v = (int)i;
  }
  if (v < 0) luaL_error(L, "%s: option %s: expected a boolean, got %s", fn, k, luaL_tolstring(L, -1, NULL));
  lua_pop(L, 1);
  return v;
}

double lopt_num(lua_State *L, int t, const char *fn, const char *k, double dflt, double lo, int lo_open, double hi,
                int hi_open) {
  if (!get(L, t, k)) return dflt;
  if (lua_type(L, -1) != LUA_TNUMBER) luaL_error(L, "%s: option %s: expected a number, got a %s", fn, k, luaL_typename(L, -1));
  double v = lua_tonumber(L, -1);
  int ok = isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (!ok) {
    char range[96]; /* luaL_error has no %g */
    snprintf(range, sizeof range, "%s%g, %g%s", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
    luaL_error(L, "%s: option %s = %s, expected a finite number in %s", fn, k, lua_tostring(L, -1), range);
  }
  lua_pop(L, 1);
  return v;
}

uint64_t lopt_seed(lua_State *L, int t, const char *fn, const char *k, uint64_t dflt) {
  return (uint64_t)lopt_int(L, t, fn, k, (int64_t)dflt, 0, INT64_MAX);
}
