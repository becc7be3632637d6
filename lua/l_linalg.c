/* icl.linalg (and icl.pca, icl.class_means): the Lua binding of the host-analysis C core (src/linalg.c). */
#include "linalg.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl_lua.h"
#include "l_seq.h"

/* ---- Lua binding: argument helpers ------------------------------------------------------------------------ */

/* A matrix argument: a 2-d tensor, or a table of equal-length rows of numbers (copied into a buffer left on the
 * stack). */
static const float *check_matrix(lua_State *L, int arg, int64_t *n, int64_t *d) {
  icl_tensor *t = icl_lua_test_tensor(L, arg);
  if (t) {
    luaL_argcheck(L, t->ndim == 2, arg, "expected a 2-d tensor [rows, cols]");
    *n = t->shape[0], *d = t->shape[1];
    return t->data;
  }
  luaL_argexpected(L, lua_istable(L, arg), arg, "2-d tensor or table of rows");
  *n = icl_lua_seq_len(L, arg, arg, ICL_LUA_SEQ_MAX, "rows");
  luaL_argcheck(L, *n > 0, arg, "table of rows is empty");
  lua_geti(L, arg, 1);
  luaL_argcheck(L, lua_istable(L, -1), arg, "rows must be tables of numbers");
  *d = icl_lua_seq_len(L, -1, arg, ICL_LUA_SEQ_MAX, "row 1");
  lua_pop(L, 1);
  float *buf = icl_lua_seq_array(L, *n * *d, sizeof *buf, "matrix"); /* n, d < 2^31: the product fits */
  for (int64_t i = 0; i < *n; i++) {
    lua_geti(L, arg, i + 1);
    luaL_argcheck(L, lua_istable(L, -1) && luaL_len(L, -1) == *d, arg, "rows must be tables of equal length");
    for (int64_t j = 0; j < *d; j++) {
      lua_geti(L, -1, j + 1);
      int ok;
      buf[i * *d + j] = (float)lua_tonumberx(L, -1, &ok);
      luaL_argcheck(L, ok, arg, "rows must hold numbers only");
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return buf;
}

static int32_t check_int32(lua_State *L, int arg, const char *what) {
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, -1, &ok);
  if (!ok || v < INT32_MIN || v > INT32_MAX) luaL_argerror(L, arg, lua_pushfstring(L, "%s must hold integers", what));
  return (int32_t)v;
}

/* A list of integers (a table, or a 1-d tensor) of the value at index idx, copied into a buffer left on the
 * stack. add is added to every entry (e.g. -1 to turn 1-based ids into 0-based ones). */
static int32_t *to_ints(lua_State *L, int idx, int arg, const char *what, int32_t add, int64_t *n) {
  idx = lua_absindex(L, idx);
  icl_tensor *t = icl_lua_test_tensor(L, idx);
  if (t) {
    *n = t->numel;
    int32_t *buf = icl_lua_seq_array(L, *n, sizeof *buf, what);
    for (int64_t i = 0; i < *n; i++) {
      float v = t->data[i];
      if (!(v >= -2147483648.0f && v < 2147483648.0f) || v != (float)(int32_t)v)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s must hold integers", what));
      buf[i] = (int32_t)v + add;
    }
    return buf;
  }
  if (!lua_istable(L, idx)) luaL_argerror(L, arg, lua_pushfstring(L, "%s must be a list of integers", what));
  *n = icl_lua_seq_len(L, idx, arg, ICL_LUA_SEQ_MAX, what);
  int32_t *buf = icl_lua_seq_array(L, *n, sizeof *buf, what);
  for (int64_t i = 0; i < *n; i++) {
    lua_geti(L, idx, i + 1);
    buf[i] = check_int32(L, arg, what) + add;
    lua_pop(L, 1);
  }
  return buf;
}

/* Raises unless every id of ids lies in [0, limit). */
static void check_range(lua_State *L, int arg, const char *what, const int32_t *ids, int64_t n, int64_t limit) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= limit)
      luaL_argerror(L, arg, lua_pushfstring(L, "%s: id %d is out of range [0, %d)", what, (int)ids[i], (int)limit));
}

static icl_tensor *check_tensor_ndim(lua_State *L, int arg, int lo, int hi, const char *shape) {
  icl_tensor *t = icl_lua_check_tensor(L, arg);
  if (t->ndim < lo || t->ndim > hi) luaL_argerror(L, arg, lua_pushfstring(L, "expected a tensor %s", shape));
  return t;
}

static void push_numbers(lua_State *L, const double *v, int64_t n) {
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_seti(L, -2, i + 1);
  }
}

/* ---- Lua binding: pca -------------------------------------------------------------------------------------- */

static void set_tensor_field(lua_State *L, const char *name, icl_tensor **t) {
  icl_lua_push_tensor(L, *t);
  *t = NULL;
  lua_setfield(L, -2, name);
}

static int l_pca(lua_State *L) {
  int64_t n, d;
  lua_Integer k = luaL_optinteger(L, 2, 2);
  lua_settop(L, 2); /* buffers pushed below stay above the arguments */
  const float *x = check_matrix(L, 1, &n, &d);
  luaL_argcheck(L, k >= 1 && k <= (n < d ? n : d), 2, "k must be in [1, min(rows, cols)]");
  icl_pca_result r;
  icl_error err;
  if (icl_pca(x, n, d, (int)k, &r, &err) != ICL_OK) return luaL_error(L, "%s", err.msg);
  lua_createtable(L, 0, 5);
  push_numbers(L, r.variance, k);
  lua_setfield(L, -2, "explained_variance");
  push_numbers(L, r.ratio, k);
  lua_setfield(L, -2, "explained_ratio");
  set_tensor_field(L, "components", &r.components);
  set_tensor_field(L, "projections", &r.projections);
  set_tensor_field(L, "mean", &r.mean);
  icl_pca_result_free(&r);
  return 1;
}

/* ---- Lua binding: class_means ------------------------------------------------------------------------------ */

/* Words [*from, *to] (1-based, inclusive) of a walk of w words selected by the window table at arg (nil: all;
 * {last = L}; {from = a, to = b}). */
static void window_bounds(lua_State *L, int arg, int64_t w, int64_t *from, int64_t *to) {
  *from = 1, *to = w;
  if (lua_isnoneornil(L, arg)) return;
  luaL_checktype(L, arg, LUA_TTABLE);
  if (lua_getfield(L, arg, "last") != LUA_TNIL) {
    lua_Integer last = luaL_checkinteger(L, -1);
    luaL_argcheck(L, last >= 1, arg, "window.last must be >= 1");
    *from = w - last + 1 < 1 ? 1 : w - last + 1;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, arg, "from") != LUA_TNIL) *from = luaL_checkinteger(L, -1);
  if (lua_getfield(L, arg, "to") != LUA_TNIL) *to = luaL_checkinteger(L, -1);
  lua_pop(L, 2);
  luaL_argcheck(L, *from >= 1 && *to <= w && *from <= *to, arg, "window must lie inside the walk");
}

/* Pushes the i-th (acts, walk) pair: single (arg 1 a tensor) or pooled (lists of tensors and of walks). */
static void push_sequence(lua_State *L, int pooled, int64_t i) {
  if (!pooled) {
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    return;
  }
  lua_geti(L, 1, i + 1);
  lua_geti(L, 2, i + 1);
  if (lua_type(L, -1) != LUA_TTABLE && !icl_lua_test_tensor(L, -1))
    luaL_argerror(L, 2, "walks must be a list of walks when acts is a list of tensors");
}

/* Accumulates one sequence (acts at idx, walk at idx + 1). */
static void class_sequence(lua_State *L, int idx, int win_arg, int n_classes, double *sums, int64_t *counts) {
  icl_tensor *x = icl_lua_test_tensor(L, idx);
  if (!x || x->ndim != 2) luaL_argerror(L, 1, "acts must be 2-d tensors [pos, d]");
  int64_t w, from, to;
  int32_t *cls = to_ints(L, idx + 1, 2, "walk", -1, &w);
  if (x->shape[0] < w) luaL_argerror(L, 1, "acts has fewer rows than the walk has words");
  window_bounds(L, win_arg, w, &from, &to);
  for (int64_t t = from - 1; t < to; t++)
    if (cls[t] < 0 || cls[t] >= n_classes)
      luaL_argerror(L, 2, lua_pushfstring(L, "walk holds node %d, outside 1..n_classes (%d)", (int)cls[t] + 1,
                                          n_classes));
  int64_t offset = x->shape[0] - w; /* row of word t (1-based) is offset + t - 1: 1 with a BOS row */
  icl_class_accumulate(x, offset + from - 1, cls + from - 1, to - from + 1, n_classes, sums, counts);
  lua_pop(L, 1);
}

/* The largest node id in the walks (the default number of classes). */
static lua_Integer max_node(lua_State *L, int pooled, int64_t n_seq) {
  lua_Integer mx = 0;
  for (int64_t s = 0; s < n_seq; s++) {
    push_sequence(L, pooled, s);
    int64_t w;
    int32_t *ids = to_ints(L, -1, 2, "walk", 0, &w);
    for (int64_t t = 0; t < w; t++) mx = ids[t] > mx ? ids[t] : mx;
    lua_pop(L, 3);
  }
  return mx;
}

/* Pushes the means tensor [nc, d] (NaN rows for empty classes) and the list of counts. */
static int push_means(lua_State *L, const double *sums, const int64_t *counts, int64_t nc, int64_t d) {
  int64_t shape[2] = {nc, d};
  icl_tensor *m = icl_tensor_new(2, shape);
  if (!m) return luaL_error(L, "class_means: out of memory");
  for (int64_t c = 0; c < nc; c++)
    for (int64_t j = 0; j < d; j++) m->data[c * d + j] = counts[c] ? (float)(sums[c * d + j] / counts[c]) : NAN;
  icl_lua_push_tensor(L, m);
  lua_createtable(L, (int)nc, 0);
  for (int64_t c = 0; c < nc; c++) lua_pushinteger(L, counts[c]), lua_seti(L, -2, c + 1);
  return 2;
}

/* class_means(acts | {acts...}, walk | {walks...}, window, n_classes = largest node id). */
static int l_class_means(lua_State *L) {
  lua_settop(L, 4);
  int pooled = !icl_lua_test_tensor(L, 1);
  luaL_argexpected(L, !pooled || lua_istable(L, 1), 1, "tensor or list of tensors");
  luaL_checktype(L, 2, LUA_TTABLE);
  int64_t n_seq = pooled ? icl_lua_seq_len(L, 1, 1, ICL_LUA_SEQ_MAX, "acts") : 1;
  luaL_argcheck(L, n_seq >= 1 && (!pooled || icl_lua_seq_len(L, 2, 2, ICL_LUA_SEQ_MAX, "walks") == n_seq), 2,
                "need one walk per acts tensor");
  lua_Integer nc = lua_isnil(L, 4) ? max_node(L, pooled, n_seq) : luaL_checkinteger(L, 4);
  luaL_argcheck(L, nc >= 1 && nc <= 1 << 20, 4, "n_classes must be in [1, 2^20]");
  push_sequence(L, pooled, 0);
  icl_tensor *x0 = icl_lua_test_tensor(L, -2);
  if (!x0 || x0->ndim != 2) luaL_argerror(L, 1, "acts must be 2-d tensors [pos, d]");
  int64_t d = x0->shape[1];
  lua_pop(L, 2);
  double *sums = lua_newuserdatauv(L, (size_t)(nc * d + 1) * sizeof *sums, 0);
  int64_t *counts = lua_newuserdatauv(L, (size_t)nc * sizeof *counts, 0);
  memset(sums, 0, (size_t)(nc * d) * sizeof *sums), memset(counts, 0, (size_t)nc * sizeof *counts);
  for (int64_t s = 0; s < n_seq; s++) {
    push_sequence(L, pooled, s);
    icl_tensor *x = icl_lua_test_tensor(L, -2);
    luaL_argcheck(L, x && x->ndim == 2 && x->shape[1] == d, 1, "acts tensors must all be [pos, d] with one d");
    class_sequence(L, lua_gettop(L) - 1, 3, (int)nc, sums, counts);
    lua_pop(L, 2);
  }
  return push_means(L, sums, counts, nc, d);
}

/* ---- Lua binding: dirichlet_energy ------------------------------------------------------------------------- */

/* Edges from a list of {i, j} pairs (1-based) or a table with an `edges` field (a graph): 0-based pairs. */
static int64_t *check_edges(lua_State *L, int arg, int64_t n_nodes, int64_t *n_edges) {
  luaL_checktype(L, arg, LUA_TTABLE);
  if (lua_getfield(L, arg, "edges") == LUA_TTABLE) lua_replace(L, arg);
  else lua_pop(L, 1);
  *n_edges = icl_lua_seq_len(L, arg, arg, ICL_LUA_SEQ_MAX, "edges");
  int64_t *e = icl_lua_seq_array(L, 2 * *n_edges, sizeof *e, "edges");
  for (int64_t k = 0; k < *n_edges; k++) {
    luaL_argcheck(L, lua_geti(L, arg, k + 1) == LUA_TTABLE, arg, "edges must be {i, j} pairs");
    for (int s = 0; s < 2; s++) {
      lua_geti(L, -1, s + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      luaL_argcheck(L, ok && v >= 1 && v <= n_nodes, arg, "edge node ids must be integers in [1, rows of X]");
      e[2 * k + s] = v - 1;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return e;
}

static int l_dirichlet_energy(lua_State *L) {
  lua_settop(L, 3);
  icl_tensor *x = check_tensor_ndim(L, 1, 2, 2, "[nodes, d]");
  int64_t n_edges;
  int64_t *e = check_edges(L, 2, x->shape[0], &n_edges);
  int normalized = 0;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "normalized");
    normalized = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_pushnumber(L, icl_dirichlet_energy(x, e, n_edges, normalized));
  return 1;
}

/* ---- Lua binding: softmax_mass, token_nll ------------------------------------------------------------------ */

static int64_t check_row(lua_State *L, int arg, const icl_tensor *t, int64_t i) {
  lua_geti(L, arg, i + 1);
  int ok;
  lua_Integer r = lua_tointegerx(L, -1, &ok);
  lua_pop(L, 1);
  if (!ok || r < 1 || r > t->shape[0]) luaL_argerror(L, arg, "rows must be integers in [1, rows of logits]");
  return r - 1;
}

/* softmax_mass(logits [pos, vocab], rows, targets, support): for each i, the softmax of logits row rows[i]
 * (1-based) over support (nil: the whole vocabulary) summed over the token ids of targets[i]. */
static int l_softmax_mass(lua_State *L) {
  lua_settop(L, 4);
  icl_tensor *t = check_tensor_ndim(L, 1, 2, 2, "[pos, vocab]");
  luaL_checktype(L, 2, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TTABLE);
  int64_t n = icl_lua_seq_len(L, 2, 2, ICL_LUA_SEQ_MAX, "rows"), vocab = t->shape[1], n_sup = 0;
  luaL_argcheck(L, icl_lua_seq_len(L, 3, 3, ICL_LUA_SEQ_MAX, "targets") == n, 3, "need one target list per row");
  int32_t *sup = lua_isnoneornil(L, 4) ? NULL : to_ints(L, 4, 4, "support", 0, &n_sup);
  if (sup) check_range(L, 4, "support", sup, n_sup, vocab);
  lua_createtable(L, (int)n, 0);
  int out = lua_gettop(L);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = check_row(L, 2, t, i), nt;
    lua_geti(L, 3, i + 1);
    int32_t *tg = to_ints(L, -1, 3, "targets", 0, &nt);
    check_range(L, 3, "targets", tg, nt, vocab);
    lua_pushnumber(L, icl_softmax_mass(t->data + r * vocab, vocab, sup, n_sup, tg, nt));
    lua_seti(L, out, i + 1);
    lua_pop(L, 2);
  }
  return 1;
}

/* token_nll(logits [pos, vocab], rows, targets): -log softmax(logits[rows[i]])[targets[i]] for each i. */
static int l_token_nll(lua_State *L) {
  lua_settop(L, 3);
  icl_tensor *t = check_tensor_ndim(L, 1, 2, 2, "[pos, vocab]");
  luaL_checktype(L, 2, LUA_TTABLE);
  int64_t n = icl_lua_seq_len(L, 2, 2, ICL_LUA_SEQ_MAX, "rows"), nt, vocab = t->shape[1];
  int32_t *tg = to_ints(L, 3, 3, "targets", 0, &nt);
  luaL_argcheck(L, nt == n, 3, "need one target per row");
  check_range(L, 3, "targets", tg, nt, vocab);
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    int64_t r = check_row(L, 2, t, i);
    lua_pushnumber(L, icl_token_nll(t->data + r * vocab, vocab, tg[i]));
    lua_seti(L, -2, i + 1);
  }
  return 1;
}

/* ---- Lua binding: attention-pattern scores ----------------------------------------------------------------- */

static int64_t pattern_heads(const icl_tensor *p) { return p->ndim == 3 ? p->shape[0] : 1; }

/* pattern_diag_mean(p [head, q, k], lag, q_from = 1): per head, mean of p[h, q, q - lag] over queries q >= q_from
 * (1-based). */
static int l_pattern_diag_mean(lua_State *L) {
  lua_settop(L, 3);
  icl_tensor *p = check_tensor_ndim(L, 1, 2, 3, "[head, q, k]");
  lua_Integer lag = luaL_checkinteger(L, 2), q_from = luaL_optinteger(L, 3, 1);
  double *out = lua_newuserdatauv(L, (size_t)pattern_heads(p) * sizeof *out, 0);
  icl_pattern_diag_mean(p, lag, q_from - 1, out);
  push_numbers(L, out, pattern_heads(p));
  return 1;
}

/* pattern_match_mass(p, tokens, shift, q_from = 1): see icl_pattern_match_mass; tokens has one id per query. */
static int l_pattern_match_mass(lua_State *L) {
  lua_settop(L, 4);
  icl_tensor *p = check_tensor_ndim(L, 1, 2, 3, "[head, q, k]");
  int64_t nt;
  int32_t *tok = to_ints(L, 2, 2, "tokens", 0, &nt);
  luaL_argcheck(L, nt == p->shape[p->ndim - 2], 2, "need one token per query row of the pattern");
  lua_Integer shift = luaL_checkinteger(L, 3), q_from = luaL_optinteger(L, 4, 1);
  luaL_argcheck(L, shift == 0 || shift == 1, 3, "shift must be 0 or 1");
  double *out = lua_newuserdatauv(L, (size_t)pattern_heads(p) * sizeof *out, 0);
  icl_pattern_match_mass(p, tok, (int)shift, q_from - 1, out);
  push_numbers(L, out, pattern_heads(p));
  return 1;
}

/* ---- registration ---------------------------------------------------------------------------------------- */

static const luaL_Reg linalg_funcs[] = {{"pca", l_pca},
                                        {"class_means", l_class_means},
                                        {"dirichlet_energy", l_dirichlet_energy},
                                        {"softmax_mass", l_softmax_mass},
                                        {"token_nll", l_token_nll},
                                        {"pattern_diag_mean", l_pattern_diag_mean},
                                        {"pattern_match_mass", l_pattern_match_mass},
                                        {"ncm_probe", icl_lua_ncm_probe},
                                        {"ncm_fit", icl_lua_ncm_fit},
                                        {NULL, NULL}};

/* Pushes icl.linalg; icl.pca and icl.class_means are also set when the global `icl` table exists already. */
int icl_lua_open_linalg(lua_State *L) {
  luaL_newlib(L, linalg_funcs);
  if (lua_getglobal(L, "icl") == LUA_TTABLE) {
    lua_getfield(L, -2, "pca");
    lua_setfield(L, -2, "pca");
    lua_getfield(L, -2, "class_means");
    lua_setfield(L, -2, "class_means");
  }
  lua_pop(L, 1);
  return 1;
}
