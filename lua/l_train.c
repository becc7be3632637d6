/* icl.nn, icl.optim, icl.data, icl.train: the Lua face of the trainer (include/icl/train.h).
 * Thin: options tables become icl_attn_config / icl_optim_config, batches of tensors become
 * int32 / f32 arrays, and the training loop calls the C step. Ctrl-C during icl.train sets a flag
 * the loop reads after each step: it then writes a checkpoint and returns. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_tmp.h"
#include "icl/train.h"
#include "icl_lua.h"
#include "l_model.h"
#include "l_opts.h"
#include "l_tensor.h"

#define NET_MT "icl.net"

typedef struct net_box {
  icl_trainer *tr;
  int busy;    /* icl.train runs on it: close must wait (its callbacks may try) */
  int running; /* inside net:run (its hooks may not close it, train it or run it again) */
} net_box;

static icl_trainer *check_net(lua_State *L, int arg) {
  net_box *b = luaL_checkudata(L, arg, NET_MT);
  if (!b->tr) luaL_argerror(L, arg, "closed net");
  return b->tr;
}

/* ---- options ------------------------------------------------------------------------------------ */

#define I32 2147483647
#define STEPS_MAX I32

/* Index of the string field k among names (NULL-terminated), dflt when absent; raises otherwise. */
static int opt_enum(lua_State *L, int t, const char *fn, const char *k, const char *const *names, int dflt) {
  if (lua_getfield(L, t, k) == LUA_TNIL) {
    lua_pop(L, 1);
    return dflt;
  }
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: option %s: expected a string, got a %s", fn, k, luaL_typename(L, -1));
  const char *s = lua_tostring(L, -1);
  for (int i = 0; names[i]; i++)
    if (!strcmp(s, names[i])) {
      lua_pop(L, 1);
      return i;
    }
  return luaL_error(L, "%s: option %s: unknown value '%s'", fn, k, s);
}

static void push_net(lua_State *L, icl_trainer *tr) {
  net_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->tr = tr;
  b->busy = b->running = 0;
  luaL_setmetatable(L, NET_MT);
}

/* icl.nn.attn_only{layers, heads, d_model, d_head, vocab, ctx, inputs, input_proj, position, rope_base, norm,
 * eps, scale, w_o, qkv_bias, o_bias, smeared_key, d_ff, output, classes, cls_hidden, out_bias, init_std, seed,
 * threads} -> net */
static int nn_attn_only(lua_State *L) {
  static const char *const keys[] = {"layers", "heads", "d_model", "d_head", "vocab", "ctx", "inputs", "input_proj",
                                     "position", "rope_base", "norm", "eps", "scale", "w_o", "qkv_bias", "o_bias",
                                     "smeared_key", "d_ff", "output", "classes", "cls_hidden", "out_bias", "init_std",
                                     "seed", "threads", NULL};
  static const char *const pos[] = {"none", "learned", "rope", NULL}, *const norm[] = {"none", "layer", "rms", NULL};
  static const char *const out[] = {"unembed", "classifier", NULL};
  const char *fn = "icl.nn.attn_only";
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, fn, keys);
#define I(k, d, lo, hi) (int)lopt_int(L, 1, fn, k, d, lo, hi)
#define BOOL(k, d) lopt_bool(L, 1, fn, k, d)
  icl_attn_config c = {.n_layer = I("layers", 2, 1, 64), .n_head = I("heads", 1, 1, 1024),
                       .d_model = I("d_model", 64, 1, 1 << 16), .d_head = I("d_head", 0, 0, 4096),
                       .vocab = I("vocab", 0, 0, 1 << 24), .n_ctx = I("ctx", 64, 1, 1 << 24),
                       .input_len = I("inputs", 0, 0, 1 << 20), .inp_proj = BOOL("input_proj", 1),
                       .position = opt_enum(L, 1, fn, "position", pos, ICL_POS_LEARNED),
                       .rope_base = (float)lopt_num(L, 1, fn, "rope_base", 10000.0, 0, 1, 1e12, 0),
                       .norm = opt_enum(L, 1, fn, "norm", norm, ICL_NORM_LAYER),
                       .norm_eps = (float)lopt_num(L, 1, fn, "eps", 1e-5, 0, 1, 1, 0),
                       .no_scale = !BOOL("scale", 1), .w_o = BOOL("w_o", 1), .qkv_bias = BOOL("qkv_bias", 0),
                       .o_bias = BOOL("o_bias", 0), .smeared_key = BOOL("smeared_key", 0),
                       .d_ff = I("d_ff", 0, 0, 1 << 20), .output = opt_enum(L, 1, fn, "output", out, ICL_OUT_UNEMBED),
                       .n_classes = I("classes", 0, 0, 1 << 24), .cls_hidden = I("cls_hidden", 0, 0, 8),
                       .out_bias = BOOL("out_bias", 0),
                       .init_std = (float)lopt_num(L, 1, fn, "init_std", 0.02, 0, 1, 100, 0),
                       .seed = lopt_seed(L, 1, fn, "seed", 1)};
  int threads = I("threads", 0, 0, 4096);
#undef I
#undef BOOL
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(&c, threads, &tr, &err)) return luaL_error(L, "%s: %s", fn, err.msg);
  push_net(L, tr);
  return 1;
}

/* icl.nn.load(checkpoint [, threads]) -> net to go on training, or nil, msg. */
static int nn_load(lua_State *L) {
  icl_trainer *tr;
  icl_error err;
  lua_Integer threads = luaL_optinteger(L, 2, 0);
  luaL_argcheck(L, threads >= 0 && threads <= 4096, 2, "threads: expected 0..4096");
  if (icl_trainer_load(luaL_checkstring(L, 1), (int)threads, &tr, &err)) {
    luaL_pushfail(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  push_net(L, tr);
  return 1;
}

static const char *const OPTIM_COMMON[] = {"lr", "min_lr", "warmup", "decay_steps", "weight_decay", "clip", "cosine",
                                            "kind", "beta1", "beta2", "eps", "momentum", NULL};
/* The options of each kind: the common ones (up to "kind"), then AdamW's three or SGD's one. */
static void optim_keys(int kind, const char **keys) {
  int n = 0;
  for (; strcmp(OPTIM_COMMON[n], "kind"); n++) keys[n] = OPTIM_COMMON[n];
  keys[n++] = "kind";
  if (kind == ICL_OPTIM_ADAMW) keys[n++] = "beta1", keys[n++] = "beta2", keys[n++] = "eps";
  else keys[n++] = "momentum";
  keys[n] = NULL;
}

/* The options table at t (kind "adamw" or "sgd") as a checked icl_optim_config; decay_steps defaults to steps. */
static icl_optim_config read_optim(lua_State *L, int t, const char *fn, int64_t steps) {
  static const char *const kinds[] = {"adamw", "sgd", NULL};
  const char *keys[16];
  int kind = opt_enum(L, t, fn, "kind", kinds, ICL_OPTIM_ADAMW);
  optim_keys(kind, keys);
  lopt_known(L, t, fn, keys);
  icl_optim_config o = {.kind = kind, .lr = (float)lopt_num(L, t, fn, "lr", 1e-3, 0, 1, 1e3, 0),
                        .min_lr = (float)lopt_num(L, t, fn, "min_lr", 0.1, 0, 0, 1, 0),
                        .warmup = lopt_int(L, t, fn, "warmup", 0, 0, STEPS_MAX),
                        .decay_steps = lopt_int(L, t, fn, "decay_steps", steps, 0, INT64_MAX / 2),
                        .beta1 = (float)lopt_num(L, t, fn, "beta1", 0.9, 0, 1, 1, 1),
                        .beta2 = (float)lopt_num(L, t, fn, "beta2", 0.999, 0, 1, 1, 1),
                        .eps = (float)lopt_num(L, t, fn, "eps", 1e-8, 0, 1, 1, 0),
                        .momentum = (float)lopt_num(L, t, fn, "momentum", 0.9, 0, 0, 1, 1),
                        .weight_decay = (float)lopt_num(L, t, fn, "weight_decay", 0.0, 0, 0, 1e3, 0),
                        .clip = (float)lopt_num(L, t, fn, "clip", 1.0, 0, 0, 1e30, 0)};
  if (!lopt_bool(L, t, fn, "cosine", 1)) o.decay_steps = 0;
  icl_error err;
  if (icl_optim_check(&o, &err)) luaL_error(L, "%s: %s", fn, err.msg);
  return o;
}

/* icl.optim.adamw{...} / icl.optim.sgd{...}: the options table, checked, with its kind set. */
static int optim_make(lua_State *L, const char *kind) {
  lua_settop(L, 1);
  if (lua_isnil(L, 1)) lua_newtable(L), lua_replace(L, 1);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_pushstring(L, kind);
  lua_setfield(L, 1, "kind");
  read_optim(L, 1, lua_pushfstring(L, "icl.optim.%s", kind), 1);
  lua_settop(L, 1);
  return 1;
}
static int optim_adamw(lua_State *L) { return optim_make(L, "adamw"); }
static int optim_sgd(lua_State *L) { return optim_make(L, "sgd"); }

/* ---- batches ---------------------------------------------------------------------------------- */

typedef struct lbatch {
  icl_train_batch b;
  int32_t *tok, *tgt; /* owned; the float tensors belong to the four values read_batch leaves on the stack */
} lbatch;

static void lbatch_free(lbatch *x) { free(x->tok), free(x->tgt), x->tok = x->tgt = NULL; }

/* Pushes field k of the batch table t as a fresh tensor copy (only the stack holds it), or nil; returns it. */
static icl_tensor *batch_field(lua_State *L, int t, const char *k) {
  if (lua_getfield(L, t, k) == LUA_TNIL) return NULL;
  icl_tensor *x = icl_lua_to_tensor(L, lua_gettop(L));
  lua_remove(L, -2);
  return x;
}

/* "[a, b, c]" of a tensor's shape into buf. */
static const char *shape_str(const icl_tensor *x, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < x->ndim && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)x->shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* int32 copy of n ids: integers in -1..2^24 (a float32 holds larger ones only rounded); NULL with msg set. */
static int32_t *to_ids(const icl_tensor *x, int64_t n, const char *k, char *msg, size_t cap) {
  int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
  if (!ids) return snprintf(msg, cap, "batch.%s: out of memory", k), NULL;
  for (int64_t i = 0; i < n; i++) {
    float v = x->data[i];
    if (!(v >= -1.0f && v <= 16777216.0f) || v != floorf(v)) {
      snprintf(msg, cap, "batch.%s[%lld] = %.9g, expected an integer id in -1..16777216", k, (long long)i + 1, (double)v);
      return free(ids), NULL;
    }
    ids[i] = (int32_t)v;
  }
  return ids;
}

/* Whether x has the shape of targets (B x T) followed by the extra dimensions. */
static int same_shape(const icl_tensor *x, const icl_tensor *tg, int64_t extra) {
  if (x->ndim != tg->ndim + (extra > 0)) return 0;
  for (int i = 0; i < tg->ndim; i++)
    if (x->shape[i] != tg->shape[i]) return 0;
  return extra == 0 || x->shape[x->ndim - 1] == extra;
}

/* The shape checks of read_batch; a message in msg, or "" when the batch fits the model. */
static void check_shapes(const icl_attn_config *c, icl_tensor *tk, icl_tensor *tg, icl_tensor *in, icl_tensor *mk,
                         char *msg, size_t cap) {
  char a[96], b[96];
  msg[0] = 0;
  if (tg->ndim < 1 || tg->ndim > 2)
    snprintf(msg, cap, "batch.targets has shape %s, expected [B, T] or [T]", shape_str(tg, a, sizeof a));
  else if (tk && !same_shape(tk, tg, 0))
    snprintf(msg, cap, "batch.tokens has shape %s, targets %s", shape_str(tk, a, sizeof a), shape_str(tg, b, sizeof b));
  else if (mk && !same_shape(mk, tg, 0))
    snprintf(msg, cap, "batch.mask has shape %s, targets %s", shape_str(mk, a, sizeof a), shape_str(tg, b, sizeof b));
  else if (in && c->input_len == 0)
    snprintf(msg, cap, "batch.inputs given, but the net takes no continuous inputs (inputs = 0)");
  else if (in && !same_shape(in, tg, c->input_len))
    snprintf(msg, cap, "batch.inputs has shape %s, expected targets' %s and a last dimension of %d (the net's inputs)",
             shape_str(in, a, sizeof a), shape_str(tg, b, sizeof b), c->input_len);
  for (int64_t i = 0; !msg[0] && mk && i < mk->numel; i++)
    if (!(mk->data[i] >= 0) || !isfinite(mk->data[i]))
      snprintf(msg, cap, "batch.mask[%lld] = %g, expected a finite weight >= 0", (long long)i + 1, (double)mk->data[i]);
}

/* Reads {tokens [B,T], targets [B,T], inputs [B,T,W], mask [B,T]} (or each without B) at index t for net c;
 * leaves the four tensor copies (or nils) on the stack, which the caller pops after using x. */
static void read_batch(lua_State *L, int t, const icl_attn_config *c, lbatch *x) {
  if (!lua_istable(L, t)) luaL_error(L, "data(step) must return a batch table, got %s", luaL_typename(L, t));
  t = lua_absindex(L, t);
  memset(x, 0, sizeof *x);
  icl_tensor *tg = batch_field(L, t, "targets"), *tk = batch_field(L, t, "tokens");
  icl_tensor *in = batch_field(L, t, "inputs"), *mk = batch_field(L, t, "mask");
  if (!tg) luaL_error(L, "batch.targets is required");
  char msg[512];
  check_shapes(c, tk, tg, in, mk, msg, sizeof msg);
  int64_t n = tg->numel;
  if (!msg[0]) x->tgt = to_ids(tg, n, "targets", msg, sizeof msg);
  if (!msg[0] && tk) x->tok = to_ids(tk, n, "tokens", msg, sizeof msg);
  if (msg[0]) {
    lbatch_free(x);
    luaL_error(L, "%s", msg);
  }
  x->b.B = tg->ndim == 2 ? tg->shape[0] : 1;
  x->b.T = tg->shape[tg->ndim - 1];
  x->b.tokens = x->tok, x->b.targets = x->tgt, x->b.inputs = in ? in->data : NULL, x->b.mask = mk ? mk->data : NULL;
}

/* ---- net methods -------------------------------------------------------------------------------- */

/* net:forward(batch) -> loss, logits tensor [B, T, n_out] */
static int net_forward(lua_State *L) {
  icl_trainer *tr = check_net(L, 1);
  lbatch x;
  read_batch(L, 2, icl_trainer_config(tr), &x);
  double loss;
  icl_error err;
  int rc = icl_trainer_forward(tr, &x.b, &loss, &err);
  int64_t nout, shape[3] = {x.b.B, x.b.T, 0};
  lbatch_free(&x);
  if (rc) return luaL_error(L, "net:forward: %s", err.msg);
  const float *lg = icl_trainer_logits(tr, &nout);
  shape[2] = nout;
  icl_tensor *t = icl_tensor_new(3, shape);
  if (!t) return luaL_error(L, "net:forward: out of memory");
  memcpy(t->data, lg, (size_t)t->numel * sizeof(float));
  lua_pushnumber(L, loss);
  icl_lua_push_tensor(L, t);
  return 2;
}

/* net:save(path) -> true, or nil, msg */
static int net_save(lua_State *L) {
  icl_error err;
  if (icl_trainer_save(check_net(L, 1), luaL_checkstring(L, 2), &err)) {
    luaL_pushfail(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* net:params() -> {name = tensor copy} */
static int net_params(lua_State *L) {
  icl_trainer *tr = check_net(L, 1);
  lua_newtable(L);
  for (int i = 0; i < icl_trainer_n_params(tr); i++) {
    int64_t n;
    const char *name = icl_trainer_param(tr, i, NULL, NULL, &n);
    const float *w = icl_trainer_param_data(tr, i);
    icl_tensor *t = icl_tensor_new(1, &n);
    if (!t) return luaL_error(L, "net:params: out of memory");
    memcpy(t->data, w, (size_t)n * sizeof(float));
    icl_lua_push_tensor(L, t);
    lua_setfield(L, -2, name);
  }
  return 1;
}

/* net:pattern(layer, seq) -> tensor [head, q, k] of the last forward (layer 0-based, seq 1-based) */
static int net_pattern(lua_State *L) {
  icl_trainer *tr = check_net(L, 1);
  int64_t T;
  const float *P = icl_trainer_pattern(tr, (int)luaL_checkinteger(L, 2), luaL_optinteger(L, 3, 1) - 1, &T);
  if (!P) return luaL_argerror(L, 2, "no such layer or sequence in the last forward");
  int64_t shape[3] = {icl_trainer_config(tr)->n_head, T, T};
  icl_tensor *t = icl_tensor_new(3, shape);
  if (!t) return luaL_error(L, "net:pattern: out of memory");
  memcpy(t->data, P, (size_t)t->numel * sizeof(float));
  icl_lua_push_tensor(L, t);
  return 1;
}

/* The model of the net's current weights (icl_trainer_model: the model icl.load would make of net:save's
 * checkpoint, on the CPU backend) and the net's run flag; raises for a closed net. */
static icl_model *net_model_get(lua_State *L, void *ud, int **busy) {
  net_box *b = ud;
  if (!b->tr) luaL_error(L, "the net of this model is closed");
  icl_model *m;
  icl_error err;
  if (icl_trainer_model(b->tr, &m, &err)) luaL_error(L, "%s", err.msg);
  *busy = &b->running;
  return m;
}

/* net:run(ids or inputs [, opts]): m:run on the net's current weights, with every option of m:run. */
static int net_run(lua_State *L) {
  net_box *b = luaL_checkudata(L, 1, NET_MT);
  if (!b->tr) return luaL_argerror(L, 1, "closed net");
  if (b->running) return luaL_error(L, "net:run: the net is already running (net:run called from a hook or on_chunk?)");
  icl_model *m;
  icl_error err;
  int rc = icl_trainer_model(b->tr, &m, &err);
  if (rc) return icl_lua_result(L, rc, &err); /* out of memory: nil + message, as m:run */
  return icl_lua_model_run(L, m, &b->running);
}

/* net:model() -> a model (icl.model) that is a view of the net: its fields, methods and runs are those of the
 * net's current weights at each use, so the analysis code written for loaded models takes a live net. */
static int net_model(lua_State *L) {
  net_box *b = luaL_checkudata(L, 1, NET_MT);
  if (!b->tr) return luaL_argerror(L, 1, "closed net");
  icl_lua_push_model_view(L, 1, net_model_get, b);
  return 1;
}

static int net_step(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)icl_trainer_steps(check_net(L, 1)));
  return 1;
}

/* net:close() and __close: a net a running icl.train uses cannot be closed (its callbacks would free it under the
 * loop); __gc frees in any case (nothing can be running on an unreachable net). */
static int net_close(lua_State *L) {
  net_box *b = luaL_checkudata(L, 1, NET_MT);
  if (b->running) return luaL_error(L, "net:close: the net is running (close it after net:run returns)");
  if (b->busy) return luaL_error(L, "net:close: the net is in use by a running icl.train (close it after it returns)");
  icl_trainer_free(b->tr);
  b->tr = NULL;
  return 0;
}

static int net_gc(lua_State *L) {
  net_box *b = luaL_checkudata(L, 1, NET_MT);
  icl_trainer_free(b->tr);
  b->tr = NULL;
  return 0;
}

static int net_tostring(lua_State *L) {
  net_box *b = luaL_checkudata(L, 1, NET_MT);
  if (!b->tr) return lua_pushliteral(L, "icl.net (closed)"), 1;
  const icl_attn_config *c = icl_trainer_config(b->tr);
  lua_pushfstring(L, "icl.net (icl-attn: %d layers, %d heads, d_model %d, step %d)", c->n_layer, c->n_head, c->d_model,
                  (int)icl_trainer_steps(b->tr));
  return 1;
}

/* ---- data ------------------------------------------------------------------------------------------ */

/* Fills B sequences of T token ids and targets for `step` from the generator closure's upvalues. */
typedef void (*gen_fn)(lua_State *L, int64_t B, int64_t T, int64_t step, int32_t *tokens, int32_t *targets);

/* The body of a generator closure (step [, B]) -> {tokens = [B, T], targets = [B, T]}; upvalue 1 is the
 * default batch, upvalue 2 the sequence length. */
static int push_generated(lua_State *L, const char *what, gen_fn gen) {
  int ok_step, ok_b = 1;
  int64_t step = lua_tointegerx(L, 1, &ok_step), B = lua_tointeger(L, lua_upvalueindex(1));
  if (!lua_isnoneornil(L, 2)) B = lua_tointegerx(L, 2, &ok_b);
  if (!ok_step || lua_type(L, 1) != LUA_TNUMBER || !ok_b || (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TNUMBER))
    return luaL_error(L, "icl.data.%s(step [, B]): expected integers, got a %s and a %s", what, luaL_typename(L, 1),
                      luaL_typename(L, 2));
  int64_t T = lua_tointeger(L, lua_upvalueindex(2));
  if (B < 1 || B > (1 << 20) || B * T > ((int64_t)1 << 30))
    return luaL_error(L, "icl.data.%s(step, B): B = %I, expected 1..1048576 with B x seq <= 2^30", what, (lua_Integer)B);
  int64_t shape[2] = {B, T};
  icl_tensor *tk = icl_tensor_new(2, shape), *tg = icl_tensor_new(2, shape);
  int32_t *a = malloc((size_t)(B * T) * sizeof *a), *b = malloc((size_t)(B * T) * sizeof *b);
  if (!tk || !tg || !a || !b) {
    icl_tensor_free(tk), icl_tensor_free(tg), free(a), free(b);
    return luaL_error(L, "%s: out of memory", what);
  }
  gen(L, B, T, step, a, b);
  for (int64_t i = 0; i < B * T; i++) tk->data[i] = (float)a[i], tg->data[i] = (float)b[i];
  free(a), free(b);
  lua_createtable(L, 0, 2);
  icl_lua_push_tensor(L, tk);
  lua_setfield(L, -2, "tokens");
  icl_lua_push_tensor(L, tg);
  lua_setfield(L, -2, "targets");
  return 1;
}

static void gen_repeated(lua_State *L, int64_t B, int64_t T, int64_t step, int32_t *tokens, int32_t *targets) {
  int vocab = (int)lua_tointeger(L, lua_upvalueindex(3)), seg = (int)lua_tointeger(L, lua_upvalueindex(4));
  int rep = lua_toboolean(L, lua_upvalueindex(5)), seg_max = (int)lua_tointeger(L, lua_upvalueindex(7));
  uint64_t seed = (uint64_t)lua_tointeger(L, lua_upvalueindex(6));
  int gap_max = (int)lua_tointeger(L, lua_upvalueindex(8));
  if (gap_max > 0) /* no fixed period: random offset and gaps of fresh tokens */
    icl_data_spaced_repeats(B, T, vocab, seg, seg_max, gap_max, seed, step, tokens, targets);
  else
    icl_data_repeated_segments(B, T, vocab, seg, seg_max, rep, seed, step, tokens, targets);
}

/* The closure of icl.data.repeated_segments: (step [, B]) -> batch. */
static int data_rs_call(lua_State *L) { return push_generated(L, "repeated_segments", gen_repeated); }

static void gen_text(lua_State *L, int64_t B, int64_t T, int64_t step, int32_t *tokens, int32_t *targets) {
  size_t n;
  const char *text = lua_tolstring(L, lua_upvalueindex(3), &n);
  uint64_t seed = (uint64_t)lua_tointeger(L, lua_upvalueindex(4));
  icl_data_text_windows((const uint8_t *)text, (int64_t)n, B, T, seed, step, tokens, targets);
}

/* The closure of icl.data.text: (step [, B]) -> batch. */
static int data_text_call(lua_State *L) { return push_generated(L, "text", gen_text); }

/* icl.data.text{file =, seq =, batch = 1, seed = 1} -> function(step [, B]): byte-level windows of a text file
 * (vocabulary 256), or nil, msg when the file cannot be read. */
static int data_text(lua_State *L) {
  static const char *const keys[] = {"file", "seq", "batch", "seed", NULL};
  const char *fn = "icl.data.text";
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, fn, keys);
  lua_getfield(L, 1, "file");
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: option file: expected the path of a text file, got a %s", fn, luaL_typename(L, -1));
  const char *path = lua_tostring(L, -1);
  int64_t T = lopt_int(L, 1, fn, "seq", -1, 1, 1 << 24), B = lopt_int(L, 1, fn, "batch", 1, 1, 1 << 20);
  if (T < 0) luaL_error(L, "%s: option seq is required (1..16777216)", fn);
  uint64_t seed = lopt_seed(L, 1, fn, "seed", 1);
  icl_error err;
  if (icl_lua_read_file(L, path, &err)) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", fn, err.msg);
    return 2;
  }
  size_t n = lua_rawlen(L, -1);
  if (n <= (size_t)T) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s: %I bytes, a window needs seq + 1 = %I", fn, path, (lua_Integer)n, (lua_Integer)T + 1);
    return 2;
  }
  lua_pushinteger(L, B);
  lua_pushinteger(L, T);
  lua_rotate(L, -3, 2); /* upvalues: 1 batch, 2 seq, 3 the text, 4 seed */
  lua_pushinteger(L, (lua_Integer)seed); /* upvalue 4 */
  lua_pushcclosure(L, data_text_call, 4);
  return 1;
}

static void gen_tokens(lua_State *L, int64_t B, int64_t T, int64_t step, int32_t *tokens, int32_t *targets) {
  size_t n;
  const char *ids = lua_tolstring(L, lua_upvalueindex(3), &n);
  uint64_t seed = (uint64_t)lua_tointeger(L, lua_upvalueindex(4));
  icl_data_token_windows((const int32_t *)(const void *)ids, (int64_t)(n / sizeof(int32_t)), B, T, seed, step, tokens,
                         targets);
}

/* The closure of icl.data.tokens: (step [, B]) -> batch. */
static int data_tokens_call(lua_State *L) { return push_generated(L, "tokens", gen_tokens); }

/* icl.data.tokens{ids =, vocab =, seq =, batch = 1, seed = 1} -> function(step [, B]): windows of a token-id
 * stream (a list or 1-d tensor of integers in 0..vocab-1, more than seq of them), drawn as icl.data.text draws. */
static int data_tokens(lua_State *L) {
  static const char *const keys[] = {"ids", "vocab", "seq", "batch", "seed", NULL};
  const char *fn = "icl.data.tokens";
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, fn, keys);
  int64_t T = lopt_int(L, 1, fn, "seq", -1, 1, 1 << 24), B = lopt_int(L, 1, fn, "batch", 1, 1, 1 << 20);
  int64_t V = lopt_int(L, 1, fn, "vocab", -1, 1, 1 << 24); /* ids pass through f32 tensors: exact to 2^24 */
  if (T < 0) luaL_error(L, "%s: option seq is required (1..16777216)", fn);
  if (V < 0) luaL_error(L, "%s: option vocab is required (the ids' range 0..vocab-1)", fn);
  uint64_t seed = lopt_seed(L, 1, fn, "seed", 1);
  lua_getfield(L, 1, "ids");
  if (!lua_istable(L, -1) && !luaL_testudata(L, -1, ICL_TENSOR_MT))
    luaL_error(L, "%s: option ids: expected a list or 1-d tensor of token ids, got a %s", fn, luaL_typename(L, -1));
  icl_tensor *t = icl_lua_to_tensor(L, lua_gettop(L));
  int64_t n = t->numel;
  if (t->ndim != 1) luaL_error(L, "%s: option ids: expected a list or 1-d tensor, got %d dimensions", fn, t->ndim);
  if (n <= T) luaL_error(L, "%s: option ids: %I ids, a window needs seq + 1 = %I", fn, (lua_Integer)n, (lua_Integer)T + 1);
  luaL_Buffer buf;
  int32_t *ids = (int32_t *)(void *)luaL_buffinitsize(L, &buf, (size_t)n * sizeof(int32_t));
  for (int64_t i = 0; i < n; i++) {
    float v = t->data[i];
    if (!(v >= 0 && v < (float)V) || v != (float)(int64_t)v)
      luaL_error(L, "%s: option ids: entry %I is %f, expected an integer id in 0..%I", fn, (lua_Integer)i + 1,
                 (double)v, (lua_Integer)V - 1);
    ids[i] = (int32_t)v;
  }
  luaL_pushresultsize(&buf, (size_t)n * sizeof(int32_t));
  lua_pushinteger(L, B);
  lua_pushinteger(L, T);
  lua_rotate(L, -3, 2); /* upvalues: 1 batch, 2 seq, 3 the ids (int32 bytes), 4 seed */
  lua_pushinteger(L, (lua_Integer)seed);
  lua_pushcclosure(L, data_tokens_call, 4);
  return 1;
}

/* icl.data.repeated_segments{vocab, seq, segment, segment_max, batch, repeated_only, seed, gap_max}
 * -> function(step [, B]) */
static int data_repeated_segments(lua_State *L) {
  static const char *const keys[] = {"vocab", "seq", "segment", "segment_max", "batch", "repeated_only", "seed",
                                     "gap_max", NULL};
  const char *fn = "icl.data.repeated_segments";
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, fn, keys);
  int64_t vocab = lopt_int(L, 1, fn, "vocab", -1, 1, 1 << 24), T = lopt_int(L, 1, fn, "seq", -1, 1, 1 << 24);
  int64_t seg = lopt_int(L, 1, fn, "segment", -1, 1, 1 << 24);
  if (vocab < 0 || T < 0 || seg < 0) luaL_error(L, "%s: options vocab, seq and segment are required", fn);
  lua_pushinteger(L, lopt_int(L, 1, fn, "batch", 1, 1, 1 << 20));
  lua_pushinteger(L, T);
  lua_pushinteger(L, vocab);
  lua_pushinteger(L, seg);
  int rep = lopt_bool(L, 1, fn, "repeated_only", 0);
  lua_pushboolean(L, rep);
  lua_pushinteger(L, (lua_Integer)lopt_seed(L, 1, fn, "seed", 1));
  lua_pushinteger(L, lopt_int(L, 1, fn, "segment_max", seg, seg, 1 << 24));
  int64_t gap_max = lopt_int(L, 1, fn, "gap_max", 0, 0, 1 << 24);
  if (gap_max > 0 && rep) luaL_error(L, "%s: option repeated_only needs gap_max = 0", fn);
  lua_pushinteger(L, gap_max);
  lua_pushcclosure(L, data_rs_call, 8);
  return 1;
}
/* ---- the training loop ---------------------------------------------------------------------------- */

/* Ctrl-C during icl.train: the first one asks for a stop after the current step (the loop checks stop_requested);
 * while a callback's Lua code runs it also sets a hook that raises "interrupted" there, and the flag model runs
 * poll, so an endless callback stops too (the loop then ends cleanly). A second Ctrl-C has the default action. */
static volatile sig_atomic_t stop_requested, in_callback;
static lua_State *volatile train_L;
static volatile int *volatile train_iflag;

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "interrupted");
}

static void on_train_sigint(int sig) {
  signal(sig, SIG_DFL);
  stop_requested = 1;
  if (!in_callback || !train_L) return;
  *train_iflag = 1;
  lua_sethook(train_L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct loop {
  icl_trainer *tr;
  icl_optim_config opt;
  int64_t steps, every, B;
  const char *dir;
  int progress;
  double t0, drawn; /* start, last progress line */
  int64_t first;
  char last[4096];
} loop;

/* Writes dir/step-NNNNNNN.gguf (and its sidecar); remembers the path. */
static int save_checkpoint(lua_State *L, loop *lp) {
  if (!lp->dir) return 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/step-%07lld.gguf", lp->dir, (long long)icl_trainer_steps(lp->tr));
  icl_error err;
  if (icl_trainer_save(lp->tr, path, &err)) return luaL_error(L, "icl.train: checkpoint: %s", err.msg);
  memcpy(lp->last, path, sizeof path);
  return 0;
}

/* The progress line, redrawn at most 10 times a second and at the last step. */
static void show_progress(loop *lp, double loss) {
  int64_t s = icl_trainer_steps(lp->tr);
  double t = now_s();
  if (t - lp->drawn < 0.1 && s < lp->steps) return;
  lp->drawn = t;
  double dt = t - lp->t0, rate = dt > 0 ? (double)(s - lp->first) / dt : 0.0;
  double eta = rate > 0 && s < lp->steps ? (double)(lp->steps - s) / rate : 0.0;
  fprintf(stderr, "\r\033[Ktrain: step %lld/%lld  %.1f steps/s  loss %.4f  ETA %dm%02ds", (long long)s,
          (long long)lp->steps, rate, loss, (int)eta / 60, (int)eta % 60);
}

/* Calls the function under nargs arguments with nres results as a callback (Ctrl-C interrupts its Lua code). */
static void callback(lua_State *L, int nargs, int nres) {
  in_callback = 1;
  if (stop_requested) luaL_error(L, "interrupted");
  lua_call(L, nargs, nres);
  in_callback = 0;
}

/* One step: data(step, B) -> batch -> icl_trainer_step; returns the loss. */
static double one_step(lua_State *L, loop *lp, int data_idx) {
  lua_pushvalue(L, data_idx);
  lua_pushinteger(L, (lua_Integer)icl_trainer_steps(lp->tr));
  lua_pushinteger(L, (lua_Integer)lp->B);
  callback(L, 2, 1);
  lbatch x;
  read_batch(L, -1, icl_trainer_config(lp->tr), &x);
  double loss;
  icl_error err;
  int rc = icl_trainer_step(lp->tr, &x.b, &lp->opt, &loss, &err);
  lbatch_free(&x);
  lua_pop(L, 5); /* the batch table and read_batch's four tensors */
  if (rc)
    return luaL_error(L, "icl.train: step %I: %s; %s%s", (lua_Integer)icl_trainer_steps(lp->tr), err.msg,
                      lp->last[0] ? "the last checkpoint is " : "no checkpoint was written", lp->last);
  return loss;
}

/* on_eval(step, net, checkpoint_path_or_nil, loss) every `every` steps. */
static void maybe_eval(lua_State *L, loop *lp, int on_eval, double loss) {
  int64_t s = icl_trainer_steps(lp->tr);
  if (lp->every <= 0 || s % lp->every != 0) return;
  save_checkpoint(L, lp);
  if (lua_isnil(L, on_eval)) return;
  lua_pushvalue(L, on_eval);
  lua_pushinteger(L, (lua_Integer)s);
  lua_getfield(L, 1, "model");
  if (lp->dir) lua_pushstring(L, lp->last);
  else lua_pushnil(L);
  lua_pushnumber(L, loss);
  callback(L, 4, 0);
}

/* The loop body, run with the SIGINT handler installed; losses table at index res. */
static int train_loop(lua_State *L, loop *lp, int data_idx, int on_eval, int res) {
  lua_Integer k = 0;
  double loss = 0.0;
  while (icl_trainer_steps(lp->tr) < lp->steps && !stop_requested) {
    loss = one_step(L, lp, data_idx);
    lua_pushnumber(L, loss);
    lua_rawseti(L, res, ++k);
    if (lp->progress) show_progress(lp, loss);
    maybe_eval(L, lp, on_eval, loss);
  }
  return stop_requested;
}

/* train_loop under lua_pcall, so the SIGINT handler is restored after errors too; arguments:
 * options table (index 1, as maybe_eval expects), loop*, data, on_eval, losses table. */
static int train_protected(lua_State *L) {
  loop *lp = lua_touserdata(L, 2);
  lua_pushboolean(L, train_loop(L, lp, 3, 4, 5));
  return 1;
}

/* Fails unless a file can be made in dir: a read-only folder must not cost a run its first `every` steps. */
static void probe_dir(lua_State *L, const char *dir) {
  char probe[4200], tmp[4300];
  snprintf(probe, sizeof probe, "%s/.icl-train-probe", dir);
  icl_error err;
  int fd = icl_tmp_create(probe, tmp, sizeof tmp, &err);
  if (fd < 0) luaL_error(L, "icl.train: checkpoints = %s: the folder is not writable (%s)", dir, err.msg);
  close(fd);
  unlink(tmp);
}

/* Scalar options of icl.train (the table at 1) into lp; pushes the optim table and the dir string. */
static void read_loop(lua_State *L, loop *lp) {
  const char *fn = "icl.train";
  if (lua_getfield(L, 1, "steps") == LUA_TNIL) luaL_error(L, "icl.train: option steps is required (1..2147483647)");
  lua_pop(L, 1);
  lp->steps = lopt_int(L, 1, fn, "steps", 0, 1, STEPS_MAX), lp->every = lopt_int(L, 1, fn, "every", 0, 0, STEPS_MAX);
  lp->B = lopt_int(L, 1, fn, "batch", 1, 1, 1 << 20);
  lua_getfield(L, 1, "optim");
  int ot = lua_gettop(L);
  if (lua_isnil(L, ot)) lua_newtable(L), lua_replace(L, ot);
  if (!lua_istable(L, ot)) luaL_error(L, "icl.train: option optim: expected a table (icl.optim.adamw{...}), got a %s", luaL_typename(L, ot));
  lp->opt = read_optim(L, ot, "icl.train: optim", lp->steps);
  lua_getfield(L, 1, "checkpoints");
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "icl.train: option checkpoints: expected a folder name, got a %s", luaL_typename(L, -1));
  lp->dir = lua_tostring(L, -1); /* stays on the stack while the loop runs */
  icl_error err;
  if (lp->dir && icl_make_dirs(lp->dir, &err)) /* before any step: a bad folder costs no training */
    luaL_error(L, "icl.train: checkpoints = %s", err.msg);
  if (lp->dir) probe_dir(L, lp->dir);
  lp->progress = lopt_bool(L, 1, fn, "progress", isatty(STDERR_FILENO));
  lp->first = icl_trainer_steps(lp->tr);
}

/* {loss = losses table at res, step, interrupted, checkpoint, seconds} */
static int push_result(lua_State *L, const loop *lp, int res, int stopped) {
  lua_createtable(L, 0, 5);
  lua_pushvalue(L, res);
  lua_setfield(L, -2, "loss");
  lua_pushinteger(L, (lua_Integer)icl_trainer_steps(lp->tr));
  lua_setfield(L, -2, "step");
  lua_pushboolean(L, stopped);
  lua_setfield(L, -2, "interrupted");
  if (lp->dir) lua_pushstring(L, lp->last), lua_setfield(L, -2, "checkpoint");
  lua_pushnumber(L, now_s() - lp->t0);
  lua_setfield(L, -2, "seconds");
  return 1;
}

/* The model option: an open net, marked busy while the loop runs. */
static net_box *train_net(lua_State *L) {
  lua_getfield(L, 1, "model");
  net_box *b = luaL_testudata(L, -1, NET_MT);
  if (!b) luaL_error(L, "icl.train: option model: expected an icl.net (icl.nn.attn_only or icl.nn.load), got a %s",
                     luaL_typename(L, -1));
  if (!b->tr) luaL_error(L, "icl.train: option model: the net is closed");
  if (b->busy) luaL_error(L, "icl.train: option model: the net is already being trained by a running icl.train");
  if (b->running) luaL_error(L, "icl.train: option model: the net is running (icl.train called from a net:run hook?)");
  return b;
}

/* Runs the loop with icl.train's SIGINT handler; returns whether it stopped early (an error is re-raised). */
static int run_loop(lua_State *L, loop *lp, net_box *box, int data_idx, int on_eval, int res) {
  struct sigaction sa = {.sa_handler = on_train_sigint}, old;
  sigemptyset(&sa.sa_mask);
  stop_requested = in_callback = 0;
  lua_State *prev_L = train_L;
  volatile int *prev_flag = train_iflag;
  train_iflag = icl_lua_interrupt_flag(L);
  train_L = L;
  sigaction(SIGINT, &sa, &old);
  box->busy = 1;
  lua_pushcfunction(L, train_protected);
  lua_pushvalue(L, 1);
  lua_pushlightuserdata(L, lp);
  lua_pushvalue(L, data_idx);
  lua_pushvalue(L, on_eval);
  lua_pushvalue(L, res);
  int status = lua_pcall(L, 5, 1, 0);
  box->busy = 0;
  sigaction(SIGINT, &old, NULL); /* restored on errors too */
  int stopped = stop_requested;
  in_callback = 0, train_L = prev_L, train_iflag = prev_flag;
  if (stopped) { /* an error raised by the interruption of a callback is the clean stop asked for */
    lua_sethook(L, NULL, 0, 0);
    *icl_lua_interrupt_flag(L) = 0;
  }
  if (lp->progress) fputc('\n', stderr);
  if (status != LUA_OK && !stopped) lua_error(L);
  lua_pop(L, 1);
  return stopped;
}

/* icl.train{model, data, steps, batch, optim, every, on_eval, checkpoints, progress}
 * -> {loss = {...}, step, interrupted, checkpoint, seconds} */
static int l_train(lua_State *L) {
  static const char *const keys[] = {"model", "data", "steps", "batch", "optim", "every", "on_eval", "checkpoints",
                                     "progress", NULL};
  luaL_checktype(L, 1, LUA_TTABLE);
  lopt_known(L, 1, "icl.train", keys);
  net_box *box = train_net(L);
  loop lp = {.tr = box->tr, .t0 = now_s()};
  lua_getfield(L, 1, "data");
  if (!lua_isfunction(L, -1) && !luaL_getmetafield(L, -1, "__call"))
    luaL_error(L, "icl.train: option data: expected a function(step, batch) returning a batch, got a %s",
               luaL_typename(L, -1));
  lua_settop(L, 3);
  int data_idx = lua_gettop(L);
  lua_getfield(L, 1, "on_eval");
  if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
    luaL_error(L, "icl.train: option on_eval: expected a function(step, net, checkpoint, loss), got a %s",
               luaL_typename(L, -1));
  int on_eval = lua_gettop(L);
  read_loop(L, &lp);
  lua_newtable(L);
  int res = lua_gettop(L);
  int stopped = run_loop(L, &lp, box, data_idx, on_eval, res);
  int64_t s = icl_trainer_steps(lp.tr);
  if (lp.dir && (lp.every <= 0 || s % lp.every != 0 || !lp.last[0])) save_checkpoint(L, &lp);
  return push_result(L, &lp, res, stopped);
}

/* ---- registration ------------------------------------------------------------------------------------ */

static void new_lib(lua_State *L, const luaL_Reg *fns, const char *name) {
  lua_newtable(L);
  luaL_setfuncs(L, fns, 0);
  lua_setfield(L, -2, name);
}

int icl_lua_open_train(lua_State *L) {
  static const luaL_Reg methods[] = {{"forward", net_forward}, {"save", net_save}, {"params", net_params},
                                     {"step", net_step}, {"pattern", net_pattern}, {"run", net_run},
                                     {"model", net_model}, {"close", net_close}, {NULL, NULL}};
  if (luaL_newmetatable(L, NET_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, net_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, net_close);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, net_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_newtable(L); /* merged into icl: train, nn, optim, data */
  lua_pushcfunction(L, l_train);
  lua_setfield(L, -2, "train");
  new_lib(L, (const luaL_Reg[]){{"attn_only", nn_attn_only}, {"load", nn_load}, {NULL, NULL}}, "nn");
  new_lib(L, (const luaL_Reg[]){{"adamw", optim_adamw}, {"sgd", optim_sgd}, {NULL, NULL}}, "optim");
  new_lib(L, (const luaL_Reg[]){{"repeated_segments", data_repeated_segments}, {"text", data_text}, {"tokens", data_tokens},
                       {NULL, NULL}}, "data");
  return 1;
}
