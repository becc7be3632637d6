/* icl.tensor methods that compute (reductions, softmax, elementwise functions, products), change layout (slice,
 * reshape, transpose, gather, cat, stack) or touch files (save, load). Each checks and converts its arguments, calls
 * the C operation (src/tensor.c, src/tensor_io.c) and pushes the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl_lua.h"
#include "l_seq.h"
#include "l_tensor.h"
#include "tensor_ops.h"

/* ---- layout ---------------------------------------------------------------------------------------------- */

/* slice(dim, from [, to]): 1-based inclusive range (negative from the end; to defaults to the end). */
static int m_slice(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  int d = icl_lua_opt_dim(L, 2, t, 0);
  luaL_checkinteger(L, 2);
  int64_t n = t->shape[d];
  lua_Integer from = luaL_checkinteger(L, 3), to = luaL_optinteger(L, 4, n);
  if (from < 0) from += n + 1;
  if (to < 0) to += n + 1;
  if (from < 1 || to > n || to < from - 1)
    return luaL_error(L, "slice %I..%I out of range 1..%I of dimension %d", luaL_checkinteger(L, 3),
                      luaL_optinteger(L, 4, n), (lua_Integer)n, d + 1);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_slice(t, d, from - 1, to, &b->t, &err), &err);
}

/* reshape(shape) or reshape(d1, d2, ...); one size may be -1 (inferred). */
static int m_reshape(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  int table = lua_istable(L, 2), infer = -1;
  int n = table ? (int)icl_lua_seq_len(L, 2, 2, ICL_TENSOR_MAXDIM, "shape (at most 4 dimensions)") : lua_gettop(L) - 1;
  int64_t shape[ICL_TENSOR_MAXDIM], known = 1;
  luaL_argcheck(L, n <= ICL_TENSOR_MAXDIM, 2, "more than 4 dimensions");
  for (int i = 0; i < n; i++) {
    lua_Integer d = table ? (lua_geti(L, 2, i + 1), luaL_checkinteger(L, -1)) : luaL_checkinteger(L, i + 2);
    if (table) lua_pop(L, 1);
    luaL_argcheck(L, d >= 0 || (d == -1 && infer < 0), 2, "sizes must be >= 0 (one may be -1)");
    luaL_argcheck(L, d <= ICL_TENSOR_MAX_NUMEL, 2, "a size exceeds 2^40");
    if (d == -1) infer = i;
    else known = d && known > ICL_TENSOR_MAX_NUMEL / d ? ICL_TENSOR_MAX_NUMEL + 1 : known * d;
    shape[i] = d;
  }
  if (infer >= 0) shape[infer] = known ? t->numel / known : 0;
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_reshape(t, n, shape, &b->t, &err), &err);
}

static int m_transpose(lua_State *L) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  int d1 = icl_lua_opt_dim(L, 2, t, 0), d2 = icl_lua_opt_dim(L, 3, t, 1);
  if (t->ndim < 2) return luaL_error(L, "transpose of a %d-D tensor", t->ndim);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_transpose(t, d1, d2, &b->t, &err), &err);
}

/* Reads the integer indices at arg (a table or a 1-D tensor) into a new array anchored on the stack as userdata;
 * *n is the count. */
static int64_t *check_indices(lua_State *L, int arg, int64_t *n) {
  icl_tensor *it = icl_lua_test_tensor(L, arg);
  if (!it) luaL_checktype(L, arg, LUA_TTABLE);
  *n = it ? it->numel : icl_lua_seq_len(L, arg, arg, ICL_LUA_SEQ_MAX, "indices");
  int64_t *idx = icl_lua_seq_array(L, *n, sizeof *idx, "indices");
  for (int64_t i = 0; i < *n; i++) {
    int isint = 1;
    lua_Integer v = 0;
    if (it) {
      float x = it->data[i];
      isint = x > -1e15f && x < 1e15f && (float)(v = (lua_Integer)x) == x;
    } else {
      lua_geti(L, arg, i + 1);
      v = lua_tointegerx(L, -1, &isint);
      lua_pop(L, 1);
    }
    if (!isint) luaL_argerror(L, arg, lua_pushfstring(L, "index %I is not an integer", (lua_Integer)i + 1));
    idx[i] = v;
  }
  return idx;
}

static int m_index_select(lua_State *L) {
  lua_settop(L, 3);
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  int d = icl_lua_opt_dim(L, 2, t, 0);
  int64_t n, *idx = check_indices(L, 3, &n);
  for (int64_t i = 0; i < n; i++) idx[i] = (idx[i] < 0 ? idx[i] + t->shape[d] + 1 : idx[i]) - 1; /* 0-based */
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_index_select(t, d, idx, n, &b->t, &err), &err);
}

/* gather(dim, idx): idx with t's number of dims works as torch.gather; a flat list with one index per position of
 * the other dims picks one entry each (logits[pos, vocab]:gather(2, targets) -> [pos]). */
static int m_gather(lua_State *L) {
  lua_settop(L, 3);
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  int d = icl_lua_opt_dim(L, 2, t, 0);
  luaL_checkinteger(L, 2);
  icl_tensor *it = icl_lua_to_tensor(L, 3);
  int64_t n = it->numel, shape[ICL_TENSOR_MAXDIM], rows = t->shape[d] ? t->numel / t->shape[d] : 0;
  int picks = it->ndim != t->ndim;
  if (picks && (it->ndim != 1 || n != rows))
    return luaL_argerror(
        L, 3, lua_pushfstring(L, "expected %d-D indices or a list of %I (one per row)", t->ndim, (lua_Integer)rows));
  for (int i = 0; i < t->ndim; i++) shape[i] = picks ? (i == d ? 1 : t->shape[i]) : it->shape[i];
  int64_t *idx = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *idx, 0);
  for (int64_t i = 0; i < n; i++) {
    float x = it->data[i];
    if (!(x > -1e15f && x < 1e15f) || (float)(int64_t)x != x) return luaL_argerror(L, 3, "indices must be integers");
    idx[i] = (int64_t)x - 1;
  }
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  int rc = icl_tensor_gather(t, d, t->ndim, shape, idx, &b->t, &err);
  if (rc == ICL_OK && picks) { /* drop the size-1 dimension */
    for (int i = d; i + 1 < b->t->ndim; i++) b->t->shape[i] = b->t->shape[i + 1];
    b->t->ndim--;
  }
  return icl_lua_tensor_done(L, rc, &err);
}

/* Reads a list of tensors at arg into an array anchored on the stack; returns its count. */
static const icl_tensor **check_list(lua_State *L, int arg, int *n) {
  luaL_checktype(L, arg, LUA_TTABLE);
  lua_Integer len = icl_lua_seq_len(L, arg, arg, (1 << 24) - 1, "list of tensors");
  luaL_argcheck(L, len >= 1, arg, "expected a non-empty list of tensors");
  const icl_tensor **ts = icl_lua_seq_array(L, len, sizeof *ts, "list of tensors");
  lua_createtable(L, (int)len, 0); /* keeps the entries alive: an __index may make each one afresh */
  for (lua_Integer i = 0; i < len; i++) {
    lua_geti(L, arg, i + 1);
    ts[i] = icl_lua_test_tensor(L, -1);
    if (!ts[i]) luaL_argerror(L, arg, lua_pushfstring(L, "entry %I is not an open tensor", i + 1));
    lua_rawseti(L, -2, i + 1);
  }
  *n = (int)len;
  return ts;
}

static int f_cat(lua_State *L) {
  lua_settop(L, 2); /* temporaries go above the arguments */
  int n;
  const icl_tensor **ts = check_list(L, 1, &n);
  int d = icl_lua_opt_dim(L, 2, ts[0], 0);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_cat(ts, n, d, &b->t, &err), &err);
}

static int f_stack(lua_State *L) {
  lua_settop(L, 2);
  int n;
  const icl_tensor **ts = check_list(L, 1, &n);
  lua_Integer d = luaL_optinteger(L, 2, 1);
  if (d < 0) d += ts[0]->ndim + 2;
  luaL_argcheck(L, d >= 1 && d <= ts[0]->ndim + 1, 2, "dimension out of range");
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_stack(ts, n, (int)d - 1, &b->t, &err), &err);
}

/* ---- math ------------------------------------------------------------------------------------------------ */

static int unop(lua_State *L, icl_unop op) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_unop(t, op, &b->t, &err), &err);
}

static int m_exp(lua_State *L) { return unop(L, ICL_UN_EXP); }
static int m_log(lua_State *L) { return unop(L, ICL_UN_LOG); }
static int m_sqrt(lua_State *L) { return unop(L, ICL_UN_SQRT); }
static int m_abs(lua_State *L) { return unop(L, ICL_UN_ABS); }
static int m_neg(lua_State *L) { return unop(L, ICL_UN_NEG); }

/* Pushes 1-based indices for every dimension of flat offset off. */
static int push_multi_index(lua_State *L, const icl_tensor *t, int64_t off) {
  int64_t c[ICL_TENSOR_MAXDIM];
  for (int i = t->ndim - 1; i >= 0; i--) c[i] = off % t->shape[i], off /= t->shape[i];
  for (int i = 0; i < t->ndim; i++) lua_pushinteger(L, c[i] + 1);
  return t->ndim ? t->ndim : (lua_pushinteger(L, 1), 1);
}

/* reduction() -> number (argmax/argmin: one 1-based index per dim); reduction(dim [, keepdim]) -> tensor. */
static int reduce(lua_State *L, icl_redop op) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  icl_error err;
  if (lua_isnoneornil(L, 2)) {
    double v;
    if (icl_tensor_reduce_all(t, op, &v, &err)) return luaL_error(L, "%s", err.msg);
    if (op == ICL_RED_ARGMAX || op == ICL_RED_ARGMIN) return push_multi_index(L, t, (int64_t)v);
    lua_pushnumber(L, v);
    return 1;
  }
  int d = icl_lua_opt_dim(L, 2, t, 0), keep = lua_toboolean(L, 3);
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  icl_lua_tensor_done(L, icl_tensor_reduce(t, d, keep, op, &b->t, &err), &err);
  if (op == ICL_RED_ARGMAX || op == ICL_RED_ARGMIN)
    for (int64_t i = 0; i < b->t->numel; i++) b->t->data[i] += 1.0f; /* 1-based */
  return 1;
}

static int m_sum(lua_State *L) { return reduce(L, ICL_RED_SUM); }
static int m_mean(lua_State *L) { return reduce(L, ICL_RED_MEAN); }
static int m_argmax(lua_State *L) { return reduce(L, ICL_RED_ARGMAX); }
static int m_argmin(lua_State *L) { return reduce(L, ICL_RED_ARGMIN); }
static int m_var(lua_State *L) { return reduce(L, ICL_RED_VAR); }
static int m_std(lua_State *L) { return reduce(L, ICL_RED_STD); }
static int m_norm(lua_State *L) { return reduce(L, ICL_RED_NORM); }

/* max/min: like the reductions, and along a dim also return the 1-based indices as a second tensor. */
static int extreme(lua_State *L, icl_redop op, icl_redop argop) {
  int with_dim = !lua_isnoneornil(L, 2);
  lua_settop(L, 3);
  reduce(L, op);
  if (!with_dim) return 1;
  lua_pushcfunction(L, argop == ICL_RED_ARGMAX ? m_argmax : m_argmin);
  lua_pushvalue(L, 1), lua_pushvalue(L, 2), lua_pushvalue(L, 3);
  lua_call(L, 3, 1);
  return 2;
}

static int m_max(lua_State *L) { return extreme(L, ICL_RED_MAX, ICL_RED_ARGMAX); }
static int m_min(lua_State *L) { return extreme(L, ICL_RED_MIN, ICL_RED_ARGMIN); }

static int softmax(lua_State *L, int logsm) {
  icl_tensor *t = icl_lua_check_tensor(L, 1);
  if (t->ndim == 0) return luaL_error(L, "softmax of a 0-D tensor");
  int d = icl_lua_opt_dim(L, 2, t, t->ndim - 1);
  icl_error err;
  icl_lua_tbox *b = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_softmax(t, d, logsm, &b->t, &err), &err);
}

static int m_softmax(lua_State *L) { return softmax(L, 0); }
static int m_log_softmax(lua_State *L) { return softmax(L, 1); }

static int m_matmul(lua_State *L) {
  icl_tensor *a = icl_lua_check_tensor(L, 1), *b = icl_lua_check_tensor(L, 2);
  icl_error err;
  icl_lua_tbox *box = icl_lua_new_tbox(L);
  return icl_lua_tensor_done(L, icl_tensor_matmul(a, b, &box->t, &err), &err);
}

static int m_dot(lua_State *L) {
  icl_tensor *a = icl_lua_check_tensor(L, 1), *b = icl_lua_check_tensor(L, 2);
  icl_error err;
  double v;
  if (icl_tensor_dot(a, b, &v, &err)) return luaL_error(L, "%s", err.msg);
  lua_pushnumber(L, v);
  return 1;
}

/* ---- files ----------------------------------------------------------------------------------------------- */

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && !strcmp(s + n - k, suffix);
}

/* true, or what icl_lua_result makes of the error (nil + message for an expected failure). */
static int push_status(lua_State *L, int rc, const icl_error *err) {
  if (rc) return icl_lua_result(L, rc, err);
  lua_pushboolean(L, 1);
  return 1;
}

/* t:save(path): .npy, or .safetensors with the single tensor named "tensor". */
static int m_save(lua_State *L) {
  const icl_tensor *t = icl_lua_check_tensor(L, 1);
  const char *path = luaL_checkstring(L, 2), *name = "tensor";
  icl_error err;
  if (ends_with(path, ".npy")) return push_status(L, icl_tensor_save_npy(t, path, &err), &err);
  if (ends_with(path, ".safetensors"))
    return push_status(L, icl_tensor_save_safetensors(path, 1, &name, &t, &err), &err);
  return luaL_argerror(L, 2, "path must end in .npy or .safetensors");
}

/* The name -> tensor lists of load_safetensors, freed by __gc if a push raises. */
typedef struct st_lists {
  int n;
  char **names;
  icl_tensor **ts;
} st_lists;

static int st_lists_gc(lua_State *L) {
  st_lists *s = lua_touserdata(L, 1);
  for (int i = 0; i < s->n; i++) free(s->names[i]), icl_tensor_free(s->ts[i]);
  free(s->names), free(s->ts);
  s->n = 0, s->names = NULL, s->ts = NULL;
  return 0;
}

static st_lists *new_st_lists(lua_State *L) {
  st_lists *s = lua_newuserdatauv(L, sizeof *s, 0);
  memset(s, 0, sizeof *s);
  if (luaL_newmetatable(L, "icl.tensor.lists")) {
    lua_pushcfunction(L, st_lists_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return s;
}

/* Moves the loaded tensors into a new table on the stack. */
static void push_st_table(lua_State *L, st_lists *s) {
  lua_createtable(L, 0, s->n);
  for (int i = 0; i < s->n; i++) {
    icl_lua_push_tensor(L, s->ts[i]);
    s->ts[i] = NULL;
    lua_setfield(L, -2, s->names[i]);
  }
}

static int f_load_safetensors(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  st_lists *s = new_st_lists(L);
  icl_error err;
  int rc = icl_tensor_load_safetensors(path, &s->n, &s->names, &s->ts, &err);
  if (rc) return push_status(L, rc, &err);
  push_st_table(L, s);
  return 1;
}

/* load(path): a .npy file, or a .safetensors file holding exactly one tensor. */
static int f_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  icl_error err;
  if (ends_with(path, ".npy")) {
    icl_lua_tbox *b = icl_lua_new_tbox(L);
    int rc = icl_tensor_load_npy(path, &b->t, &err);
    if (rc) return push_status(L, rc, &err);
    icl_lua_tensor_account(L, b->t);
    return 1;
  }
  if (!ends_with(path, ".safetensors")) return luaL_argerror(L, 1, "path must end in .npy or .safetensors");
  st_lists *s = new_st_lists(L);
  int rc = icl_tensor_load_safetensors(path, &s->n, &s->names, &s->ts, &err);
  if (rc) return push_status(L, rc, &err);
  if (s->n != 1) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: holds %d tensors; use icl.tensor.load_safetensors", path, s->n);
    return 2;
  }
  icl_lua_push_tensor(L, s->ts[0]);
  s->ts[0] = NULL;
  return 1;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* save_safetensors(path, {name = tensor, ...}): tensors written in name order. */
static int f_save_safetensors(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  int n = 0;
  for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) n++;
  const char **names = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *names, 0);
  const icl_tensor **ts = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *ts, 0);
  int k = 0;
  for (lua_pushnil(L); lua_next(L, 2); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING) return luaL_argerror(L, 2, "keys must be tensor names (strings)");
    if (!icl_lua_test_tensor(L, -1))
      return luaL_argerror(L, 2, lua_pushfstring(L, "value of '%s' is not an open tensor", lua_tostring(L, -2)));
    names[k++] = lua_tostring(L, -2); /* the key stays referenced by the table */
  }
  qsort(names, (size_t)n, sizeof *names, cmp_names);
  for (int i = 0; i < n; i++) {
    lua_getfield(L, 2, names[i]);
    ts[i] = icl_lua_test_tensor(L, -1);
    lua_pop(L, 1);
  }
  icl_error err;
  return push_status(L, icl_tensor_save_safetensors(path, n, names, ts, &err), &err);
}

/* ---- tables for l_tensor.c ------------------------------------------------------------------------------- */

const luaL_Reg icl_lua_tensor_op_methods[] = {
    {"slice", m_slice},     {"reshape", m_reshape}, {"transpose", m_transpose}, {"index_select", m_index_select},
    {"gather", m_gather},   {"sum", m_sum},         {"mean", m_mean},           {"max", m_max},
    {"min", m_min},         {"argmax", m_argmax},   {"argmin", m_argmin},       {"var", m_var},
    {"std", m_std},         {"norm", m_norm},       {"softmax", m_softmax},     {"log_softmax", m_log_softmax},
    {"exp", m_exp},         {"log", m_log},         {"sqrt", m_sqrt},           {"abs", m_abs},
    {"neg", m_neg},         {"matmul", m_matmul},   {"dot", m_dot},             {"save", m_save},
    {NULL, NULL}};

const luaL_Reg icl_lua_tensor_op_funcs[] = {{"cat", f_cat},
                                            {"stack", f_stack},
                                            {"load", f_load},
                                            {"save_safetensors", f_save_safetensors},
                                            {"load_safetensors", f_load_safetensors},
                                            {NULL, NULL}};
