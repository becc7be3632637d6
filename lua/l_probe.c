/* icl.linalg.ncm_probe and ncm_fit: the Lua bindings of the nearest-class-mean classifier (src/host/linalg_probe.c). */
#include <stdlib.h>
#include <string.h>

#include "icl_lua.h"
#include "linalg.h"

static int32_t *check_labels(lua_State *L, int arg, int64_t n, int *nc) {
  luaL_checktype(L, arg, LUA_TTABLE);
  luaL_argcheck(L, luaL_len(L, arg) == n, arg, "need one label per row of X");
  int32_t *lab = lua_newuserdatauv(L, (size_t)n * sizeof *lab, 0);
  *nc = 0;
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, arg, i + 1);
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    luaL_argcheck(L, ok && v >= 1 && v <= 1 << 16, arg, "labels must be integers in [1, 65536]");
    lua_pop(L, 1);
    lab[i] = (int32_t)(v - 1);
    if (v > *nc) *nc = (int)v;
  }
  return lab;
}

/* ncm_probe(X [n, d], labels, {folds = 5}) -> accuracy, predictions (1-based labels). */
int icl_lua_ncm_probe(lua_State *L) {
  icl_tensor *x = icl_lua_check_tensor(L, 1);
  luaL_argcheck(L, x->ndim == 2, 1, "expected a 2-d tensor [rows, cols]");
  int64_t n = x->shape[0], d = x->shape[1];
  lua_Integer folds = 5;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_getfield(L, 3, "folds");
    folds = lua_isnil(L, -1) ? 5 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, 3);
  luaL_argcheck(L, folds >= 2 && folds <= n, 3, "folds must be in [2, rows]");
  int nc;
  int32_t *lab = check_labels(L, 2, n, &nc);
  int32_t *pred = lua_newuserdatauv(L, (size_t)n * sizeof *pred, 0);
  double acc;
  icl_error err;
  if (icl_ncm_probe(x->data, n, d, lab, nc, (int)folds, pred, &acc, &err) != ICL_OK) return luaL_error(L, "%s", err.msg);
  lua_pushnumber(L, acc);
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) lua_pushinteger(L, pred[i] + 1), lua_seti(L, -2, i + 1);
  return 2;
}

/* ncm_fit(X [n, d], labels, Xt [nt, d]) -> predictions for the rows of Xt (1-based labels). */
int icl_lua_ncm_fit(lua_State *L) {
  icl_tensor *x = icl_lua_check_tensor(L, 1), *xt = icl_lua_check_tensor(L, 3);
  luaL_argcheck(L, x->ndim == 2 && x->shape[0] >= 1, 1, "expected a 2-d tensor [rows, cols] with rows >= 1");
  luaL_argcheck(L, xt->ndim == 2 && xt->shape[1] == x->shape[1], 3,
                lua_pushfstring(L, "expected a 2-d tensor [rows, %I] (the columns of X)", (lua_Integer)x->shape[1]));
  lua_settop(L, 3);
  int64_t n = x->shape[0], nt = xt->shape[0], d = x->shape[1];
  int nc;
  int32_t *lab = check_labels(L, 2, n, &nc);
  int32_t *pred = lua_newuserdatauv(L, (size_t)(nt ? nt : 1) * sizeof *pred, 0);
  icl_error err;
  if (icl_ncm_fit_predict(x->data, n, d, lab, nc, xt->data, nt, pred, &err) != ICL_OK)
    return luaL_error(L, "%s", err.msg);
  lua_createtable(L, (int)nt, 0);
  for (int64_t i = 0; i < nt; i++) lua_pushinteger(L, pred[i] + 1), lua_seti(L, -2, i + 1);
  return 1;
}
