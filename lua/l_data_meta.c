/* icl.data.meta_learning: the in-context meta-learning sequences (include/icl/data_meta.h) as batches of
 * tensors for icl.train. Thin: options become an icl_meta_config, a call fills the C buffers. */
#include <stdlib.h>
#include <string.h>

#include "icl/data_meta.h"
#include "icl_lua.h"
#include "l_tensor.h"

#define META_MT "icl.meta_task"

typedef struct meta_box {
  icl_meta_task *m;
} meta_box;

static int meta_gc(lua_State *L) {
  meta_box *b = luaL_checkudata(L, 1, META_MT);
  icl_meta_free(b->m);
  b->m = NULL;
  return 0;
}

static int opt_int(lua_State *L, const char *k, int dflt) {
  lua_getfield(L, 1, k);
  int v = lua_isnil(L, -1) ? dflt : lua_isboolean(L, -1) ? lua_toboolean(L, -1) : (int)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  return v;
}

static float opt_num(lua_State *L, const char *k, double dflt) {
  lua_getfield(L, 1, k);
  double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return (float)v;
}

static icl_tensor *new_t(lua_State *L, int nd, int64_t a, int64_t b, int64_t c) {
  int64_t shape[3] = {a, b, c};
  icl_tensor *t = icl_tensor_new(nd, shape);
  if (!t) luaL_error(L, "meta_learning: out of memory");
  icl_lua_push_tensor(L, t);
  return t;
}

/* Pushes an int32 array of n values into the f32 tensor t. */
static void ids_to(icl_tensor *t, const int32_t *v, int64_t n) {
  for (int64_t i = 0; i < n; i++) t->data[i] = (float)v[i];
}

/* Fills the batch table on top from the C buffers. */
static void push_batch(lua_State *L, const icl_meta_config *c, int64_t B, int n, const icl_meta_batch *x) {
  icl_tensor *t;
  t = new_t(L, 2, B, n, 0), ids_to(t, x->tokens, B * n), lua_setfield(L, -2, "tokens");
  t = new_t(L, 2, B, n, 0), ids_to(t, x->targets, B * n), lua_setfield(L, -2, "targets");
  t = new_t(L, 2, B, c->N + 1, 0), ids_to(t, x->classes, B * (c->N + 1)), lua_setfield(L, -2, "classes");
  t = new_t(L, 1, B, 0, 0), ids_to(t, x->tasks, B), lua_setfield(L, -2, "tasks");
}

/* The closure: (step [, B [, {stream, random_labels}]]) -> {tokens, inputs, targets, classes, tasks} */
static int meta_call(lua_State *L) {
  meta_box *box = luaL_checkudata(L, lua_upvalueindex(1), META_MT);
  const icl_meta_config *c = icl_meta_config_of(box->m);
  int64_t step = luaL_checkinteger(L, 1), B = luaL_optinteger(L, 2, lua_tointeger(L, lua_upvalueindex(2)));
  luaL_argcheck(L, B >= 1, 2, "batch size must be >= 1");
  uint64_t stream = 0;
  int mode = ICL_META_TRAIN;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "stream"), stream = (uint64_t)luaL_optinteger(L, -1, 0), lua_pop(L, 1);
    lua_getfield(L, 3, "random_labels"), mode = lua_toboolean(L, -1) ? ICL_META_RANDOM_LABELS : mode, lua_pop(L, 1);
  }
  int n = icl_meta_seq_len(box->m), w = c->D + c->P;
  lua_createtable(L, 0, 5);
  icl_tensor *in = new_t(L, 3, B, n, w);
  lua_setfield(L, -2, "inputs");
  size_t ni = (size_t)(B * n), nc = (size_t)(B * (c->N + 1));
  int32_t *buf = malloc((2 * ni + nc + (size_t)B) * sizeof *buf);
  if (!buf) return luaL_error(L, "meta_learning: out of memory for a batch of %d", (int)B);
  icl_meta_batch x = {.tokens = buf, .targets = buf + ni, .classes = buf + 2 * ni, .tasks = buf + 2 * ni + nc,
                      .inputs = in->data};
  icl_error err;
  int rc = icl_meta_sample(box->m, B, stream, step, mode, &x, &err);
  if (!rc) push_batch(L, c, B, n, &x);
  free(buf);
  if (rc) return luaL_error(L, "%s", err.msg);
  return 1;
}

/* The info table: the configuration, the sequence length, input width and the label table [T, K]. */
static void push_info(lua_State *L, const icl_meta_task *m) {
  const icl_meta_config *c = icl_meta_config_of(m);
  lua_createtable(L, 0, 12);
  const struct { const char *k; int v; } f[] = {{"K", c->K}, {"T", c->T}, {"N", c->N}, {"L", c->L}, {"D", c->D},
                                               {"P", c->P}, {"seq", icl_meta_seq_len(m)}, {"width", c->D + c->P}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) lua_pushinteger(L, f[i].v), lua_setfield(L, -2, f[i].k);
  lua_pushnumber(L, c->eps), lua_setfield(L, -2, "eps");
  icl_tensor *t = new_t(L, 2, c->T, c->K, 0);
  for (int a = 0; a < c->T; a++)
    for (int k = 0; k < c->K; k++) t->data[a * c->K + k] = (float)icl_meta_label(m, a, k);
  lua_setfield(L, -2, "labels");
}

/* icl.data.meta_learning{K, T, N, L, D, P, eps, alpha, alpha_class, offsets, label_pos, seed, batch}
 * -> function(step [, B [, opts]]) -> batch, and an info table */
static int data_meta_learning(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "offsets");
  const char *off = luaL_optstring(L, -1, "task");
  luaL_argcheck(L, !strcmp(off, "task") || !strcmp(off, "random"), 1, "offsets must be \"task\" or \"random\"");
  lua_pop(L, 1);
  icl_meta_config c = {.K = opt_int(L, "K", 64), .T = opt_int(L, "T", 3), .N = opt_int(L, "N", 4),
                       .L = opt_int(L, "L", 32), .D = opt_int(L, "D", 63), .P = opt_int(L, "P", 65),
                       .eps = opt_num(L, "eps", 0.1), .alpha = opt_num(L, "alpha", 0.0),
                       .alpha_class = opt_num(L, "alpha_class", 0.0), .label_pos = opt_int(L, "label_pos", 0),
                       .offsets = strcmp(off, "random") ? ICL_META_OFFSET_TASK : ICL_META_OFFSET_RANDOM,
                       .seed = (uint64_t)opt_int(L, "seed", 1)};
  luaL_argcheck(L, c.K > 0 && c.T > 0 && c.N > 0 && c.L > 0 && c.D > 0 && c.P > 0, 1, "K, T, N, L, D, P must be >= 1");
  meta_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->m = NULL;
  luaL_setmetatable(L, META_MT);
  icl_error err;
  if (icl_meta_new(&c, &box->m, &err)) return luaL_error(L, "icl.data.meta_learning: %s", err.msg);
  lua_pushinteger(L, opt_int(L, "batch", 128));
  lua_pushcclosure(L, meta_call, 2);
  push_info(L, box->m);
  return 2;
}

/* Sets icl.data.meta_learning (creating icl.data if absent); the icl table is on top. */
void icl_lua_add_data_meta(lua_State *L) {
  if (luaL_newmetatable(L, META_MT)) lua_pushcfunction(L, meta_gc), lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  if (lua_getfield(L, -1, "data") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "data");
  }
  lua_pushcfunction(L, data_meta_learning);
  lua_setfield(L, -2, "meta_learning");
  lua_pop(L, 1);
}
