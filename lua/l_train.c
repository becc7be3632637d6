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
#include "l_tensor.h"

#define NET_MT "icl.net"

typedef struct net_box {
  icl_trainer *tr;
} net_box;

static icl_trainer *check_net(lua_State *L, int arg) {
  net_box *b = luaL_checkudata(L, arg, NET_MT);
  if (!b->tr) luaL_argerror(L, arg, "closed net");
  return b->tr;
}

/* ---- options ------------------------------------------------------------------------------------ */

static int opt_int(lua_State *L, int t, const char *k, int dflt) {
  lua_getfield(L, t, k);
  int v = lua_isnil(L, -1) ? dflt : (lua_isboolean(L, -1) ? lua_toboolean(L, -1) : (int)luaL_checkinteger(L, -1));
  lua_pop(L, 1);
  return v;
}
static double opt_num(lua_State *L, int t, const char *k, double dflt) {
  lua_getfield(L, t, k);
  double v = lua_isnil(L, -1) ? dflt : luaL_checknumber(L, -1);
  lua_pop(L, 1);
  return v;
}
/* Index of the string field k among names (NULL-terminated), dflt when absent; raises otherwise. */
static int opt_enum(lua_State *L, int t, const char *k, const char *const *names, int dflt) {
  lua_getfield(L, t, k);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return dflt;
  }
  const char *s = luaL_checkstring(L, -1);
  for (int i = 0; names[i]; i++)
    if (!strcmp(s, names[i])) {
      lua_pop(L, 1);
      return i;
    }
  return luaL_error(L, "option %s: unknown value '%s'", k, s);
}

static void push_net(lua_State *L, icl_trainer *tr) {
  net_box *b = lua_newuserdatauv(L, sizeof *b, 0);
  b->tr = tr;
  luaL_setmetatable(L, NET_MT);
}

/* icl.nn.attn_only{layers, heads, d_model, d_head, vocab, ctx, inputs, input_proj, position, norm,
 * eps, scale, w_o, qkv_bias, o_bias, smeared_key, d_ff, output, classes, cls_hidden, out_bias,
 * init_std, seed, threads} -> net */
static int nn_attn_only(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  static const char *const pos[] = {"none", "learned", "rope", NULL}, *const norm[] = {"none", "layer", "rms", NULL};
  static const char *const out[] = {"unembed", "classifier", NULL};
  icl_attn_config c = {.n_layer = opt_int(L, 1, "layers", 2), .n_head = opt_int(L, 1, "heads", 1),
                       .d_model = opt_int(L, 1, "d_model", 64), .d_head = opt_int(L, 1, "d_head", 0),
                       .vocab = opt_int(L, 1, "vocab", 0), .n_ctx = opt_int(L, 1, "ctx", 64),
                       .input_len = opt_int(L, 1, "inputs", 0), .inp_proj = opt_int(L, 1, "input_proj", 1),
                       .position = opt_enum(L, 1, "position", pos, ICL_POS_LEARNED),
                       .rope_base = (float)opt_num(L, 1, "rope_base", 10000.0),
                       .norm = opt_enum(L, 1, "norm", norm, ICL_NORM_LAYER), .norm_eps = (float)opt_num(L, 1, "eps", 1e-5),
                       .no_scale = !opt_int(L, 1, "scale", 1), .w_o = opt_int(L, 1, "w_o", 1),
                       .qkv_bias = opt_int(L, 1, "qkv_bias", 0), .o_bias = opt_int(L, 1, "o_bias", 0),
                       .smeared_key = opt_int(L, 1, "smeared_key", 0), .d_ff = opt_int(L, 1, "d_ff", 0),
                       .output = opt_enum(L, 1, "output", out, ICL_OUT_UNEMBED), .n_classes = opt_int(L, 1, "classes", 0),
                       .cls_hidden = opt_int(L, 1, "cls_hidden", 0), .out_bias = opt_int(L, 1, "out_bias", 0),
                       .init_std = (float)opt_num(L, 1, "init_std", 0.02), .seed = (uint64_t)opt_int(L, 1, "seed", 1)};
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(&c, opt_int(L, 1, "threads", 0), &tr, &err)) return luaL_error(L, "icl.nn.attn_only: %s", err.msg);
  push_net(L, tr);
  return 1;
}

/* icl.nn.load(checkpoint [, threads]) -> net to go on training, or nil, msg. */
static int nn_load(lua_State *L) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_load(luaL_checkstring(L, 1), (int)luaL_optinteger(L, 2, 0), &tr, &err)) {
    luaL_pushfail(L);
    lua_pushstring(L, err.msg);
    return 2;
  }
  push_net(L, tr);
  return 1;
}

/* icl.optim.adamw{...} / icl.optim.sgd{...}: the options table with its kind set. */
static int optim_make(lua_State *L, const char *kind) {
  lua_settop(L, 1);
  if (lua_isnil(L, 1)) lua_newtable(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_pushstring(L, kind);
  lua_setfield(L, 1, "kind");
  return 1;
}
static int optim_adamw(lua_State *L) { return optim_make(L, "adamw"); }
static int optim_sgd(lua_State *L) { return optim_make(L, "sgd"); }

static icl_optim_config read_optim(lua_State *L, int t, int64_t steps) {
  static const char *const kinds[] = {"adamw", "sgd", NULL};
  icl_optim_config o = {.kind = opt_enum(L, t, "kind", kinds, ICL_OPTIM_ADAMW), .lr = (float)opt_num(L, t, "lr", 1e-3),
                        .min_lr = (float)opt_num(L, t, "min_lr", 0.1), .warmup = opt_int(L, t, "warmup", 0),
                        .decay_steps = opt_int(L, t, "decay_steps", (int)steps), .beta1 = (float)opt_num(L, t, "beta1", 0.9),
                        .beta2 = (float)opt_num(L, t, "beta2", 0.999), .eps = (float)opt_num(L, t, "eps", 1e-8),
                        .momentum = (float)opt_num(L, t, "momentum", 0.9),
                        .weight_decay = (float)opt_num(L, t, "weight_decay", 0.0), .clip = (float)opt_num(L, t, "clip", 1.0)};
  if (!opt_int(L, t, "cosine", 1)) o.decay_steps = 0;
  return o;
}

/* ---- batches ---------------------------------------------------------------------------------- */

typedef struct lbatch {
  icl_train_batch b;
  int32_t *tok, *tgt;
  icl_tensor *in, *mask; /* copies */
} lbatch;

static void lbatch_free(lbatch *x) { free(x->tok), free(x->tgt), icl_tensor_free(x->in), icl_tensor_free(x->mask); }

/* Field k of the batch table t as a tensor (copied; NULL when absent); pushes nothing. */
static icl_tensor *batch_field(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return NULL;
  }
  icl_tensor *x = icl_tensor_clone(icl_lua_to_tensor(L, lua_gettop(L)));
  lua_pop(L, 2);
  return x;
}

/* int32 copy of an integral tensor of n elements. */
static int32_t *to_ids(lua_State *L, const icl_tensor *x, int64_t n, const char *k) {
  int32_t *ids = malloc((size_t)n * sizeof *ids);
  for (int64_t i = 0; ids && i < n; i++) {
    float v = x->data[i];
    if (v != floorf(v)) {
      free(ids);
      luaL_error(L, "batch.%s[%d] = %f is not an integer", k, (int)i + 1, (double)v);
      return NULL; /* not reached (luaL_error raises); tells the compiler ids is not used after the free */
    }
    ids[i] = (int32_t)v;
  }
  return ids;
}

/* Reads {tokens [B,T], targets [B,T], inputs [B,T,W], mask [B,T]} at index t. */
static void read_batch(lua_State *L, int t, lbatch *x) {
  if (!lua_istable(L, t)) luaL_error(L, "data(step) must return a batch table, got %s", luaL_typename(L, t));
  icl_tensor *tk = batch_field(L, t, "tokens"), *tg = batch_field(L, t, "targets");
  icl_tensor *in = batch_field(L, t, "inputs"), *mk = batch_field(L, t, "mask");
  memset(x, 0, sizeof *x);
  if (!tg) luaL_error(L, "batch.targets is required");
  x->b.B = tg->ndim == 2 ? tg->shape[0] : 1;
  x->b.T = tg->shape[tg->ndim - 1];
  int64_t n = tg->numel;
  int bad = (tk && tk->numel != n) || (mk && mk->numel != n) || (in && in->numel % (n > 0 ? n : 1));
  x->tgt = to_ids(L, tg, n, "targets");
  if (tk) x->tok = to_ids(L, tk, n, "tokens");
  x->in = in, x->mask = mk;
  icl_tensor_free(tk), icl_tensor_free(tg);
  x->b.tokens = x->tok, x->b.targets = x->tgt, x->b.inputs = in ? in->data : NULL, x->b.mask = mk ? mk->data : NULL;
  if (bad) {
    lbatch_free(x);
    luaL_error(L, "batch: tokens, mask and inputs must match targets' B x T positions");
  }
}

/* ---- net methods -------------------------------------------------------------------------------- */

/* net:forward(batch) -> loss, logits tensor [B, T, n_out] */
static int net_forward(lua_State *L) {
  icl_trainer *tr = check_net(L, 1);
  lbatch x;
  read_batch(L, 2, &x);
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
    float *w;
    int64_t n;
    const char *name = icl_trainer_param(tr, i, &w, NULL, &n);
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

static int net_step(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)icl_trainer_steps(check_net(L, 1)));
  return 1;
}

static int net_close(lua_State *L) {
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
  int64_t step = luaL_checkinteger(L, 1);
  int64_t B = luaL_optinteger(L, 2, lua_tointeger(L, lua_upvalueindex(1)));
  int64_t T = lua_tointeger(L, lua_upvalueindex(2));
  luaL_argcheck(L, B > 0 && B <= (1 << 20) && B * T <= ((int64_t)1 << 30), 2, "batch size out of range");
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
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "file");
  const char *path = lua_tostring(L, -1);
  luaL_argcheck(L, path != NULL, 1, "file: expected the path of a text file");
  int T = opt_int(L, 1, "seq", 0), B = opt_int(L, 1, "batch", 1);
  luaL_argcheck(L, T > 0, 1, "seq must be a positive integer");
  luaL_argcheck(L, B > 0, 1, "batch must be a positive integer");
  icl_error err;
  if (icl_lua_read_file(L, path, &err)) {
    lua_pushnil(L);
    lua_pushfstring(L, "icl.data.text: %s", err.msg);
    return 2;
  }
  size_t n = lua_rawlen(L, -1);
  if (n <= (size_t)T) {
    lua_pushnil(L);
    lua_pushfstring(L, "icl.data.text: %s: %I bytes, a window needs seq + 1 = %d", path, (lua_Integer)n, T + 1);
    return 2;
  }
  lua_pushinteger(L, B);
  lua_pushinteger(L, T);
  lua_rotate(L, -3, 2); /* upvalues: 1 batch, 2 seq, 3 the text, 4 seed */
  lua_pushinteger(L, opt_int(L, 1, "seed", 1)); /* upvalue 4 */
  lua_pushcclosure(L, data_text_call, 4);
  return 1;
}

/* icl.data.repeated_segments{vocab, seq, segment, segment_max, batch, repeated_only, seed, gap_max}
 * -> function(step [, B]) */
static int data_repeated_segments(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int vocab = opt_int(L, 1, "vocab", 0), T = opt_int(L, 1, "seq", 0), seg = opt_int(L, 1, "segment", 0);
  luaL_argcheck(L, vocab > 0 && T > 0 && seg > 0, 1, "vocab, seq and segment must be positive integers");
  lua_pushinteger(L, opt_int(L, 1, "batch", 1));
  lua_pushinteger(L, T);
  lua_pushinteger(L, vocab);
  lua_pushinteger(L, seg);
  lua_pushboolean(L, opt_int(L, 1, "repeated_only", 0));
  lua_pushinteger(L, opt_int(L, 1, "seed", 1));
  int seg_max = opt_int(L, 1, "segment_max", seg);
  luaL_argcheck(L, seg_max >= seg, 1, "segment_max must be >= segment");
  lua_pushinteger(L, seg_max);
  int gap_max = opt_int(L, 1, "gap_max", 0);
  luaL_argcheck(L, gap_max >= 0, 1, "gap_max must be >= 0");
  luaL_argcheck(L, gap_max == 0 || !opt_int(L, 1, "repeated_only", 0), 1, "repeated_only needs gap_max = 0");
  lua_pushinteger(L, gap_max);
  lua_pushcclosure(L, data_rs_call, 8);
  return 1;
}

/* ---- the training loop ---------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;
static void on_train_sigint(int sig) {
  (void)sig;
  stop_requested = 1;
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
  snprintf(lp->last, sizeof lp->last, "%s/step-%07lld.gguf", lp->dir, (long long)icl_trainer_steps(lp->tr));
  icl_error err;
  if (icl_trainer_save(lp->tr, lp->last, &err)) return luaL_error(L, "icl.train: checkpoint: %s", err.msg);
  return 0;
}

/* The progress line, redrawn at most 10 times a second and at the last step. */
static void show_progress(loop *lp, double loss) {
  int64_t s = icl_trainer_steps(lp->tr);
  double t = now_s();
  if (t - lp->drawn < 0.1 && s < lp->steps) return;
  lp->drawn = t;
  double dt = t - lp->t0, rate = dt > 0 ? (double)(s - lp->first) / dt : 0.0;
  double eta = rate > 0 ? (double)(lp->steps - s) / rate : 0.0;
  fprintf(stderr, "\r\033[Ktrain: step %lld/%lld  %.1f steps/s  loss %.4f  ETA %dm%02ds", (long long)s,
          (long long)lp->steps, rate, loss, (int)eta / 60, (int)eta % 60);
}

/* One step: data(step, B) -> batch -> icl_trainer_step; returns the loss. */
static double one_step(lua_State *L, loop *lp, int data_idx) {
  lua_pushvalue(L, data_idx);
  lua_pushinteger(L, (lua_Integer)icl_trainer_steps(lp->tr));
  lua_pushinteger(L, (lua_Integer)lp->B);
  lua_call(L, 2, 1);
  lbatch x;
  read_batch(L, lua_gettop(L), &x);
  lua_pop(L, 1);
  double loss;
  icl_error err;
  int rc = icl_trainer_step(lp->tr, &x.b, &lp->opt, &loss, &err);
  lbatch_free(&x);
  if (rc) return luaL_error(L, "icl.train: step %d: %s", (int)icl_trainer_steps(lp->tr), err.msg);
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
  lua_call(L, 4, 0);
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
  if (lp->progress) fputc('\n', stderr);
  return stop_requested;
}

/* train_loop under lua_pcall, so the SIGINT handler is restored after errors too; arguments:
 * options table (index 1, as maybe_eval expects), loop*, data, on_eval, losses table. */
static int train_protected(lua_State *L) {
  loop *lp = lua_touserdata(L, 2);
  lua_pushboolean(L, train_loop(L, lp, 3, 4, 5));
  return 1;
}

/* Scalar options of icl.train (the table at 1) into lp; pushes the optim table and the dir string. */
static void read_loop(lua_State *L, loop *lp) {
  lp->steps = opt_int(L, 1, "steps", 0), lp->every = opt_int(L, 1, "every", 0), lp->B = opt_int(L, 1, "batch", 1);
  lua_getfield(L, 1, "optim");
  int ot = lua_gettop(L);
  if (lua_isnil(L, ot)) lua_newtable(L), lua_replace(L, ot);
  lp->opt = read_optim(L, ot, lp->steps);
  lua_getfield(L, 1, "checkpoints");
  lp->dir = lua_tostring(L, -1); /* stays on the stack while the loop runs */
  icl_error err;
  if (lp->dir && icl_make_dirs(lp->dir, &err)) /* before any step: a bad folder costs no training */
    luaL_error(L, "icl.train: checkpoints = %s", err.msg);
  lp->progress = opt_int(L, 1, "progress", isatty(STDERR_FILENO));
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

/* icl.train{model, data, steps, batch, optim, every, on_eval, checkpoints, progress}
 * -> {loss = {...}, step, interrupted, checkpoint, seconds} */
static int l_train(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "model");
  loop lp = {.tr = check_net(L, -1), .t0 = now_s()};
  lua_getfield(L, 1, "data");
  luaL_argcheck(L, lua_isfunction(L, -1), 1, "data must be a function(step, batch) returning a batch");
  int data_idx = lua_gettop(L);
  lua_getfield(L, 1, "on_eval");
  int on_eval = lua_gettop(L);
  read_loop(L, &lp);
  lua_newtable(L);
  int res = lua_gettop(L);
  struct sigaction sa = {.sa_handler = on_train_sigint}, old;
  sigemptyset(&sa.sa_mask);
  stop_requested = 0;
  sigaction(SIGINT, &sa, &old);
  lua_pushcfunction(L, train_protected);
  lua_pushvalue(L, 1);
  lua_pushlightuserdata(L, &lp);
  lua_pushvalue(L, data_idx);
  lua_pushvalue(L, on_eval);
  lua_pushvalue(L, res);
  int status = lua_pcall(L, 5, 1, 0);
  sigaction(SIGINT, &old, NULL); /* restored on errors too */
  if (status != LUA_OK) return lua_error(L);
  int stopped = lua_toboolean(L, -1);
  lua_pop(L, 1);
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
                                     {"step", net_step}, {"pattern", net_pattern}, {"close", net_close}, {NULL, NULL}};
  if (luaL_newmetatable(L, NET_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, net_close);
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
  new_lib(L, (const luaL_Reg[]){{"repeated_segments", data_repeated_segments}, {"text", data_text}, {NULL, NULL}}, "data");
  return 1;
}
