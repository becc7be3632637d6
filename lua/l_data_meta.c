/* icl.data.meta_learning: the in-context meta-learning sequences (include/icl/data_meta.h) as batches of
 * tensors for icl.train. Thin: options become an icl_meta_config, a call fills the C buffers. */
#include <stdlib.h>
#include <string.h>

#include "icl/data_meta.h"
#include "icl_lua.h"
#include "l_opts.h"
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
  int n = icl_meta_seq_len(box->m), w = c->D + c->P;
  luaL_argcheck(L, B >= 1 && B <= (1 << 20) && B * n * w <= ((int64_t)1 << 30), 2,
                "batch size: expected >= 1 with batch x seq x width <= 2^30");
  uint64_t stream = 0;
  int mode = ICL_META_TRAIN;
  if (!lua_isnoneornil(L, 3)) {
    static const char *const keys[] = {"stream", "random_labels", NULL};
    luaL_checktype(L, 3, LUA_TTABLE);
    lopt_known(L, 3, "meta_learning batch", keys);
    stream = lopt_seed(L, 3, "meta_learning batch", "stream", 0);
    mode = lopt_bool(L, 3, "meta_learning batch", "random_labels", 0) ? ICL_META_RANDOM_LABELS : mode;
  }
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
  static const char *const keys[] = {"K", "T", "N", "L", "D", "P", "eps", "alpha", "alpha_class", "offsets",
                                     "label_pos", "seed", "batch", NULL};
  const char *fn = "icl.data.meta_learning";
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, fn, keys);
  lua_getfield(L, 1, "offsets");
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "%s: option offsets: expected \"task\" or \"random\", got a %s", fn, luaL_typename(L, -1));
  const char *off = luaL_optstring(L, -1, "task");
  if (strcmp(off, "task") && strcmp(off, "random")) luaL_error(L, "%s: option offsets: expected \"task\" or \"random\", got '%s'", fn, off);
  lua_pop(L, 1);
#define I(k, d, hi) (int)lopt_int(L, 1, fn, k, d, 1, hi)
  icl_meta_config c = {.K = I("K", 64, 1 << 16), .T = I("T", 3, 1 << 16), .N = I("N", 4, 1 << 15),
                       .L = I("L", 32, 1 << 24), .D = I("D", 63, 1 << 16), .P = I("P", 65, 1 << 16),
                       .eps = (float)lopt_num(L, 1, fn, "eps", 0.1, 0, 0, 1e6, 0),
                       .alpha = (float)lopt_num(L, 1, fn, "alpha", 0.0, 0, 0, 100, 0),
                       .alpha_class = (float)lopt_num(L, 1, fn, "alpha_class", 0.0, 0, 0, 100, 0),
                       .label_pos = lopt_bool(L, 1, fn, "label_pos", 0),
                       .offsets = strcmp(off, "random") ? ICL_META_OFFSET_TASK : ICL_META_OFFSET_RANDOM,
                       .seed = lopt_seed(L, 1, fn, "seed", 1)};
  int64_t batch = lopt_int(L, 1, fn, "batch", 128, 1, 1 << 20);
#undef I
  meta_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->m = NULL;
  luaL_setmetatable(L, META_MT);
  icl_error err;
  if (icl_meta_new(&c, &box->m, &err)) return luaL_error(L, "%s: %s", fn, err.msg);
  lua_pushinteger(L, batch);
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
