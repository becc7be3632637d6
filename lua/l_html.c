/* icl.htmlcodec: the C half of icl.html (lua/icl/html.lua): attention patterns packed as 8-bit codes of their
 * causal triangles in base64, the embedded stylesheet and script, and the file write. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "icl_lua.h"
#include "l_embed.h"

#define CODE_NAN 255 /* codes 0..254 span [lo, hi]; 255 is NaN, shown as such */
#define CODE_TOP 254

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 of n bytes into out (4 * ceil(n / 3) characters). */
static void base64(const uint8_t *in, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = B64[v >> 18 & 63];
    out[o++] = B64[v >> 12 & 63];
    out[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
    out[o++] = i + 2 < n ? B64[v & 63] : '=';
  }
}

static uint8_t code_of(float x, double lo, double hi) {
  if (isnan(x)) return CODE_NAN;
  double t = (x - lo) / (hi - lo) * CODE_TOP + 0.5;
  return (uint8_t)(t < 0 ? 0 : t > CODE_TOP ? CODE_TOP : t);
}

/* htmlcodec.triangle(t [heads, T, T] or [T, T], lo, hi) -> base64 of each head's rows q, keys 0..q as 8-bit
 * codes (T(T+1)/2 per head), and the number of NaN entries. */
static int l_triangle(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  double lo = luaL_checknumber(L, 2), hi = luaL_checknumber(L, 3);
  luaL_argcheck(L, isfinite(lo) && isfinite(hi) && hi > lo, 2, "expected finite lo < hi");
  luaL_argcheck(L, t->ndim == 2 || t->ndim == 3, 1, "expected a pattern [heads, q, k] or [q, k]");
  int64_t T = t->shape[t->ndim - 1], H = t->ndim == 3 ? t->shape[0] : 1;
  luaL_argcheck(L, t->shape[t->ndim - 2] == T && T > 0, 1, "the pattern is not square (q and k positions differ)");
  size_t tri = (size_t)(T * (T + 1) / 2), n = (size_t)H * tri;
  uint8_t *codes = lua_newuserdatauv(L, n, 0);
  char *out = lua_newuserdatauv(L, 4 * ((n + 2) / 3) + 1, 0);
  lua_Integer nans = 0;
  size_t o = 0;
  for (int64_t h = 0; h < H; h++)
    for (int64_t q = 0; q < T; q++)
      for (int64_t k = 0; k <= q; k++) {
        codes[o] = code_of(t->data[(h * T + q) * T + k], lo, hi);
        nans += codes[o++] == CODE_NAN;
      }
  base64(codes, n, out);
  lua_pushlstring(L, out, 4 * ((n + 2) / 3));
  lua_pushinteger(L, nans);
  return 2;
}

/* htmlcodec.asset(name) -> the embedded file lua/icl/assets/<name>. */
static int l_asset(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  for (int i = 0; icl_lua_asset_names[i]; i++)
    if (!strcmp(icl_lua_asset_names[i], name)) {
      lua_pushlstring(L, icl_lua_asset_sources[i], icl_lua_asset_sizes[i]);
      return 1;
    }
  return luaL_error(L, "icl.html: no embedded asset '%s'", name);
}

/* htmlcodec.write(path, text) -> true, or nil and a message: atomically, into a folder that must exist. */
static int l_write(lua_State *L) {
  size_t n;
  const char *path = luaL_checkstring(L, 1), *text = luaL_checklstring(L, 2, &n);
  const char *slash = strrchr(path, '/');
  lua_pushlstring(L, slash ? path : ".", slash ? (size_t)(slash - path) + (slash == path) : 1);
  struct stat st;
  if (stat(lua_tostring(L, -1), &st) != 0 || !S_ISDIR(st.st_mode)) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: the folder %s does not exist", path, lua_tostring(L, -2));
    return 2;
  }
  return icl_lua_write_atomic(L, path, text, n);
}

int icl_lua_open_htmlcodec(lua_State *L) {
  static const luaL_Reg fns[] = {{"triangle", l_triangle}, {"asset", l_asset}, {"write", l_write}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
