/* icl.tensor: the tensor userdata, constructors, indexing, conversion to and from tables, and printing.
 * Indices and dimensions are 1-based (negative ones count from the end); every operation returns a new tensor. */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "icl_lua.h"
#include "l_seq.h"
#include "l_tensor.h"
#include "tensor_ops.h"

/* ---- the userdata ---------------------------------------------------------------------------------------- */

icl_lua_tbox *icl_lua_new_tbox(lua_State *L) {
  icl_lua_tbox *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->t = NULL;
  luaL_setmetatable(L, ICL_TENSOR_MT);
  return b;
}

/* Lua sees a few bytes of userdata, not the data: without this a loop of all-logit runs kept every result (1.47 GB
 * each on Gemma 3) until something else made the collector run. A step as if the data had been allocated by Lua
 * paces the collector to it, so dead tensors are freed (and their buffers recycled, src/tensor_mem.c). */
void icl_lua_tensor_account(lua_State *L, const icl_tensor *t) {
  size_t kb = t ? (size_t)t->numel * sizeof(float) / 1024 : 0;
  if (kb && lua_gc(L, LUA_GCISRUNNING)) lua_gc(L, LUA_GCSTEP, kb > INT_MAX ? INT_MAX : (int)kb);
}

void icl_lua_push_tensor(lua_State *L, icl_tensor *t) {
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  b->t = t;
  icl_lua_tensor_account(L, t);
}

icl_tensor *icl_lua_test_tensor(lua_State *L, int arg) {
  icl_lua_tbox *b = luaL_testudata(L, arg, ICL_TENSOR_MT);
  return b ? b->t : NULL;
}

icl_tensor *icl_lua_check_tensor(lua_State *L, int arg) {
  icl_lua_tbox *b = luaL_checkudata(L, arg, ICL_TENSOR_MT);
  if (!b->t) luaL_argerror(L, arg, "tensor is closed");
  return b->t;
}

int icl_lua_tensor_done(lua_State *L, int rc, const icl_error *err) {
  if (rc) return luaL_error(L, "%s", err->msg);
  icl_lua_tensor_account(L, icl_lua_test_tensor(L, -1));
  return 1;
}

int icl_lua_opt_dim(lua_State *L, int arg, const icl_tensor *t, int def) {
  if (lua_isnoneornil(L, arg)) return def;
  lua_Integer d = luaL_checkinteger(L, arg);
  if (d < 0) d += t->ndim + 1;
  if (d < 1 || d > t->ndim)
    return luaL_argerror(
        L, arg, lua_pushfstring(L, "dimension %d out of range 1..%d", (int)luaL_checkinteger(L, arg), t->ndim));
  return (int)d - 1;
}

/* 1-based index (negative from the end) at arg into dimension d of size n -> 0-based. */
static int64_t check_index(lua_State *L, int arg, int d, int64_t n) {
  lua_Integer i = luaL_checkinteger(L, arg), j = i < 0 ? i + n + 1 : i;
  if (j < 1 || j > n) luaL_error(L, "index %I out of range 1..%I of dimension %d", i, (lua_Integer)n, d + 1);
  return j - 1;
}

static int t_gc(lua_State *L) {
  icl_lua_tbox *b = luaL_checkudata(L, 1, ICL_TENSOR_MT);
  icl_tensor_free(b->t);
  b->t = NULL;
  return 0;
}

/* ---- constructors ---------------------------------------------------------------------------------------- */

/* A shape given as a table at arg, or as integers from arg to the top; returns ndim. */
static int check_shape(lua_State *L, int arg, int64_t *shape) {
  int table = lua_istable(L, arg);
  int n = table ? (int)icl_lua_seq_len(L, arg, arg, ICL_TENSOR_MAXDIM, "shape (at most 4 dimensions)")
                : lua_gettop(L) - arg + 1;
  if (n > ICL_TENSOR_MAXDIM) luaL_argerror(L, arg, "more than 4 dimensions");
  for (int i = 0; i < n; i++) {
    if (table) lua_geti(L, arg, i + 1);
    int idx = table ? -1 : arg + i, isnum;
    lua_Integer d = lua_tointegerx(L, idx, &isnum);
    if (!isnum || d < 0) luaL_argerror(L, table ? arg : arg + i, "shape: expected non-negative integers");
    shape[i] = d;
    if (table) lua_pop(L, 1);
  }
  return n;
}

static int push_full(lua_State *L, int ndim, const int64_t *shape, float v) {
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_full(ndim, shape, v, &b->t, &err), &err);
}

/* new(shape [, flat_values]) or new(d1, d2, ...): zeros, or the given values in row-major order. */
static int t_new(lua_State *L) {
  int64_t shape[ICL_TENSOR_MAXDIM];
  int nd = check_shape(L, 1, shape), has_data = lua_istable(L, 1) && lua_istable(L, 2);
  push_full(L, nd, shape, 0.0f);
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  if (!has_data) return 1;
  lua_Integer nv = icl_lua_seq_len(L, 2, 2, ICL_LUA_SEQ_MAX, "values");
  if (nv != t->numel)
    return luaL_argerror(L, 2, lua_pushfstring(L, "%I values for %I elements", nv, (lua_Integer)t->numel));
  for (int64_t i = 0; i < t->numel; i++) {
    lua_geti(L, 2, i + 1);
    int isnum;
    t->data[i] = (float)lua_tonumberx(L, -1, &isnum);
    if (!isnum) return luaL_argerror(L, 2, lua_pushfstring(L, "value %I is not a number", (lua_Integer)i + 1));
    lua_pop(L, 1);
  }
  return 1;
}

static int t_zeros(lua_State *L) {
  int64_t shape[ICL_TENSOR_MAXDIM];
  int nd = check_shape(L, 1, shape);
  return push_full(L, nd, shape, 0.0f);
}

static int t_ones(lua_State *L) {
  int64_t shape[ICL_TENSOR_MAXDIM];
  int nd = check_shape(L, 1, shape);
  return push_full(L, nd, shape, 1.0f);
}

static int t_full(lua_State *L) {
  int64_t shape[ICL_TENSOR_MAXDIM];
  luaL_checktype(L, 1, LUA_TTABLE);
  float v = (float)luaL_checknumber(L, 2);
  return push_full(L, check_shape(L, 1, shape), shape, v);
}

/* arange(stop) or arange(start, stop [, step]): start, start+step, ... below stop (numpy). */
static int t_arange(lua_State *L) {
  int one = lua_isnoneornil(L, 2);
  double start = one ? 0 : luaL_checknumber(L, 1), stop = luaL_checknumber(L, one ? 1 : 2);
  double step = luaL_optnumber(L, 3, 1);
  luaL_argcheck(L, step != 0, 3, "step must not be 0");
  double n = ceil((stop - start) / step);
  int64_t shape[1] = {n > 0 ? (int64_t)n : 0};
  luaL_argcheck(L, n < 1e12, 1, "too many elements");
  push_full(L, 1, shape, 0.0f);
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  for (int64_t i = 0; i < t->numel; i++) t->data[i] = (float)(start + (double)i * step);
  return 1;
}

static int t_eye(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1), m = luaL_optinteger(L, 2, n);
  luaL_argcheck(L, n >= 0 && m >= 0, 1, "sizes must be >= 0");
  int64_t shape[2] = {n, m};
  push_full(L, 2, shape, 0.0f);
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  for (int64_t i = 0; i < n && i < m; i++) t->data[i * m + i] = 1.0f;
  return 1;
}

/* ---- nested tables --------------------------------------------------------------------------------------- */

/* Shape of a nested table: lengths along the first elements. */
static int table_shape(lua_State *L, int idx, int64_t *shape) {
  int nd = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (nd == ICL_TENSOR_MAXDIM) luaL_error(L, "tensor.from: more than 4 levels of nesting");
    shape[nd++] = icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "tensor.from: row");
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return nd;
}

/* Copies the table at the top of the stack (level d of the shape) into data; *pos counts elements. */
static void table_fill(lua_State *L, const icl_tensor *t, int d, int64_t *pos, char *path, size_t plen) {
  lua_Integer len = icl_lua_seq_len(L, -1, 0, ICL_LUA_SEQ_MAX, "tensor.from: row");
  if (len != t->shape[d])
    luaL_error(L, "tensor.from: row%s has %I entries, expected %I (rows must have equal lengths)", path, len,
               (lua_Integer)t->shape[d]);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    lua_geti(L, -1, i + 1);
    size_t k = strlen(path);
    snprintf(path + k, plen - k, "[%lld]", (long long)i + 1);
    if (d + 1 < t->ndim) {
      if (!lua_istable(L, -1)) luaL_error(L, "tensor.from: entry%s is not a table", path);
      table_fill(L, t, d + 1, pos, path, plen);
    } else {
      int isnum;
      t->data[(*pos)++] = (float)lua_tonumberx(L, -1, &isnum);
      if (!isnum) luaL_error(L, "tensor.from: entry%s is %s, expected a number", path, luaL_typename(L, -1));
    }
    path[k] = '\0';
    lua_pop(L, 1);
  }
}

icl_tensor *icl_lua_to_tensor(lua_State *L, int arg) {
  arg = lua_absindex(L, arg);
  icl_tensor *src = icl_lua_test_tensor(L, arg);
  if (src) {
    icl_tensor *c = icl_tensor_clone(src);
    if (!c) luaL_error(L, "out of memory copying a tensor");
    icl_lua_push_tensor(L, c);
    return c;
  }
  if (!lua_istable(L, arg)) luaL_typeerror(L, arg, "tensor or table of numbers");
  int64_t shape[ICL_TENSOR_MAXDIM], pos = 0;
  int nd = table_shape(L, arg, shape);
  push_full(L, nd, shape, 0.0f);
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  char path[64] = "";
  lua_pushvalue(L, arg);
  table_fill(L, t, 0, &pos, path, sizeof path);
  lua_pop(L, 1);
  return t;
}

static int t_from(lua_State *L) {
  icl_lua_to_tensor(L, 1);
  return 1;
}

/* Pushes the block of t at flat offset off for dims d.. as nested tables (a number at the last level). */
static void push_table(lua_State *L, const icl_tensor *t, int d, int64_t off) {
  if (d == t->ndim) {
    lua_pushnumber(L, t->data[off]);
    return;
  }
  int64_t inner = 1;
  for (int i = d + 1; i < t->ndim; i++) inner *= t->shape[i];
  luaL_checkstack(L, 4, "tensor too deep");
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    push_table(L, t, d + 1, off + i * inner);
    lua_rawseti(L, -2, i + 1);
  }
}

static int t_totable(lua_State *L) {
  push_table(L, icl_lua_check_tensor(L, 1), 0, 0);
  return 1;
}

/* ---- shape and element access ---------------------------------------------------------------------------- */

static int t_shape(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) {
    lua_pushinteger(L, t->shape[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int t_numel(lua_State *L) {
  lua_pushinteger(L, icl_lua_check_tensor(L, 1)->numel);
  return 1;
}

static int t_len(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
  return 1;
}

/* Flat offset of the element at indices args first..first+ndim-1. */
static int64_t element_offset(lua_State *L, const icl_tensor *t, int first) {
  int n = lua_gettop(L) - first + 1;
  if (n != t->ndim) luaL_error(L, "expected %d indices for a %d-D tensor, got %d", t->ndim, t->ndim, n < 0 ? 0 : n);
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) off = off * t->shape[i] + check_index(L, first + i, i, t->shape[i]);
  return off;
}

static int t_get(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  lua_pushnumber(L, t->data[element_offset(L, t, 2)]);
  return 1;
}

static int t_set(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  float v = (float)luaL_checknumber(L, 2);
  t->data[element_offset(L, t, 3)] = v;
  lua_settop(L, 1);
  return 1;
}

static int t_item(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  if (t->numel != 1) return luaL_error(L, "item: tensor has %I elements, expected 1", (lua_Integer)t->numel);
  lua_pushnumber(L, t->data[0]);
  return 1;
}

static int t_fill(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  float v = (float)luaL_checknumber(L, 2);
  for (int64_t i = 0; i < t->numel; i++) t->data[i] = v;
  lua_settop(L, 1);
  return 1;
}

static int t_clone(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  if (!(b->t = icl_tensor_clone(t))) return luaL_error(L, "out of memory cloning a tensor");
  icl_lua_tensor_account(L, b->t);
  return 1;
}

static int t_close(lua_State *L) { return t_gc(L); }

/* t[i]: a number for 1-D tensors, else a copy of row i (one dimension less). */
static int index_row(lua_State *L, const icl_tensor *t) {
  if (t->ndim == 0) return luaL_error(L, "cannot index a 0-D tensor");
  int64_t i = check_index(L, 2, 0, t->shape[0]);
  if (t->ndim == 1) {
    lua_pushnumber(L, t->data[i]);
    return 1;
  }
  int64_t inner = t->numel / (t->shape[0] ? t->shape[0] : 1);
  push_full(L, t->ndim - 1, t->shape + 1, 0.0f);
  memcpy(icl_lua_test_tensor(L, -1)->data, t->data + i * inner, (size_t)inner * sizeof(float));
  return 1;
}

/* t[i], t.ndim, or a method (the methods table is upvalue 1). */
static int t_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TNUMBER) return index_row(L, icl_lua_check_tensor(L, 1));
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (k && !strcmp(k, "ndim")) {
    lua_pushinteger(L, icl_lua_check_tensor(L, 1)->ndim);
    return 1;
  }
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  return 1;
}

/* t[i] = v: a number fills row i, a tensor of the row's shape (or element count) replaces it. */
static int t_newindex(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  if (lua_type(L, 2) != LUA_TNUMBER)
    return luaL_error(L, "tensor fields are read-only ('%s')", luaL_tolstring(L, 2, NULL));
  if (t->ndim == 0) return luaL_error(L, "cannot index a 0-D tensor");
  int64_t i = check_index(L, 2, 0, t->shape[0]), inner = t->numel / (t->shape[0] ? t->shape[0] : 1);
  float *row = t->data + i * inner;
  icl_tensor *v = icl_lua_test_tensor(L, 3);
  if (v) {
    if (v->numel != inner)
      return luaL_error(L, "row %I has %I elements, value %I", i + 1, (lua_Integer)inner, (lua_Integer)v->numel);
    memmove(row, v->data, (size_t)inner * sizeof(float));
    return 0;
  }
  float x = (float)luaL_checknumber(L, 3);
  for (int64_t j = 0; j < inner; j++) row[j] = x;
  return 0;
}

/* ---- printing -------------------------------------------------------------------------------------------- */

#define PREVIEW 3 /* elements shown at each end of a long dimension */

static void add_number(luaL_Buffer *B, float v) {
  char s[32];
  snprintf(s, sizeof s, "%.4g", (double)v);
  luaL_addstring(B, s);
}

static void add_block(luaL_Buffer *B, const icl_tensor *t, int d, int64_t off, int indent) {
  if (d == t->ndim) {
    add_number(B, t->data[off]);
    return;
  }
  int64_t n = t->shape[d], inner = 1;
  for (int i = d + 1; i < t->ndim; i++) inner *= t->shape[i];
  luaL_addchar(B, '[');
  for (int64_t i = 0; i < n; i++) {
    if (n > 2 * PREVIEW && i == PREVIEW) {
      luaL_addstring(B, d + 1 < t->ndim ? "...,\n" : "..., ");
      if (d + 1 < t->ndim)
        for (int s = 0; s <= indent; s++) luaL_addchar(B, ' ');
      i = n - PREVIEW;
    }
    add_block(B, t, d + 1, off + i * inner, indent + 1);
    if (i + 1 < n) {
      luaL_addstring(B, d + 1 < t->ndim ? ",\n" : ", ");
      if (d + 1 < t->ndim)
        for (int s = 0; s <= indent; s++) luaL_addchar(B, ' ');
    }
  }
  luaL_addchar(B, ']');
}

static int t_tostring(lua_State *L) {
  icl_lua_tbox *b = luaL_checkudata(L, 1, ICL_TENSOR_MT);
  if (!b->t) {
    lua_pushliteral(L, "tensor (closed)");
    return 1;
  }
  char s[96];
  luaL_Buffer B;
  luaL_buffinit(L, &B);
  luaL_addstring(&B, "tensor");
  luaL_addstring(&B, icl_tensor_shape_str(b->t->ndim, b->t->shape, s, sizeof s));
  luaL_addchar(&B, '\n');
  if (b->t->numel == 0 && b->t->ndim) luaL_addstring(&B, "[]");
  else add_block(&B, b->t, 0, 0, 0);
  luaL_pushresult(&B);
  return 1;
}

/* ---- arithmetic metamethods ------------------------------------------------------------------------------ */

static int arith(lua_State *L, icl_binop op) {
  icl_tensor *a = icl_lua_test_tensor(L, 1), *b = icl_lua_test_tensor(L, 2);
  icl_error err;
  int rc;
  if (!a && !lua_isnumber(L, 1))
    return luaL_error(L, "attempt to perform arithmetic on a %s and a tensor", luaL_typename(L, 1));
  if (!b && !lua_isnumber(L, 2))
    return luaL_error(L, "attempt to perform arithmetic on a tensor and a %s", luaL_typename(L, 2));
  if (luaL_testudata(L, 1, ICL_TENSOR_MT) && !a) icl_lua_check_tensor(L, 1); /* closed: raise */
  if (luaL_testudata(L, 2, ICL_TENSOR_MT) && !b) icl_lua_check_tensor(L, 2);
  icl_lua_tbox *box = icl_lua_new_tbox(L);
  if (a && b) rc = icl_tensor_binop(a, b, op, &box->t, &err);
  else if (a) rc = icl_tensor_binop_scalar(a, (float)lua_tonumber(L, 2), 0, op, &box->t, &err);
  else rc = icl_tensor_binop_scalar(b, (float)lua_tonumber(L, 1), 1, op, &box->t, &err);
  return icl_lua_tensor_done(L, rc, &err);
}

static int t_add(lua_State *L) { return arith(L, ICL_BIN_ADD); }
static int t_sub(lua_State *L) { return arith(L, ICL_BIN_SUB); }
static int t_mul(lua_State *L) { return arith(L, ICL_BIN_MUL); }
static int t_div(lua_State *L) { return arith(L, ICL_BIN_DIV); }
static int t_pow(lua_State *L) { return arith(L, ICL_BIN_POW); }

static int t_unm(lua_State *L) {
  icl_tensor *a = icl_lua_check_tensor(L, 1);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_unop(a, ICL_UN_NEG, &b->t, &err), &err);
}

/* ---- registration ---------------------------------------------------------------------------------------- */

static const luaL_Reg METHODS[] = {
    {"shape", t_shape}, {"numel", t_numel}, {"get", t_get},       {"set", t_set},     {"item", t_item},
    {"fill", t_fill},   {"clone", t_clone}, {"totable", t_totable}, {"close", t_close}, {NULL, NULL}};

static const luaL_Reg META[] = {
    {"__index", t_index}, {"__newindex", t_newindex}, {"__len", t_len}, {"__tostring", t_tostring},
    {"__gc", t_gc},       {"__close", t_gc},          {"__add", t_add}, {"__sub", t_sub},
    {"__mul", t_mul},     {"__div", t_div},           {"__pow", t_pow}, {"__unm", t_unm},
    {NULL, NULL}};

static const luaL_Reg FUNCS[] = {
    {"new", t_new},     {"zeros", t_zeros}, {"ones", t_ones}, {"full", t_full},
    {"arange", t_arange}, {"eye", t_eye},   {"from", t_from}, {NULL, NULL}};

static int t_is(lua_State *L) {
  lua_pushboolean(L, luaL_testudata(L, 1, ICL_TENSOR_MT) != NULL);
  return 1;
}

int icl_lua_open_tensor(lua_State *L) {
  luaL_newmetatable(L, ICL_TENSOR_MT);
  luaL_newlib(L, METHODS);
  luaL_setfuncs(L, icl_lua_tensor_op_methods, 0);
  luaL_setfuncs(L, META, 1); /* every metamethod gets the methods table as upvalue 1 */
  lua_pop(L, 1);
  luaL_newlib(L, FUNCS);
  luaL_setfuncs(L, icl_lua_tensor_op_funcs, 0);
  lua_pushcfunction(L, t_is);
  lua_setfield(L, -2, "is");
  return 1;
}
