/* icl.load, the model userdata (fields, tokenize/detokenize, run with captures and interventions) and
 * icl.devices. Layers and heads are 0-based (they are names: blocks.3, head 2); token positions are 1-based and
 * inclusive like Lua indices, negative ones counting from the end. Token ids are the vocabulary's ids. */
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "icl/devices.h"
#include "icl/model.h"
#include "icl_lua.h"
#include "l_model.h"
#include "l_seq.h"
#include "l_tensor.h"
#include "tensor_ops.h"

#define MODEL_MT "icl.model"
#define GUARD_MT "icl.model.run"

typedef struct mbox {
  icl_model *m; /* NULL: closed (or not loaded yet) */
  int busy;     /* inside m:run (callbacks may not close or re-run it) */
  icl_lua_model_get get; /* a view (net:model()): the model and busy flag are looked up at each use; NULL: owns m */
  void *ud;
} mbox;

/* The model of the userdata at arg (a view looks it up: the net's current weights) and its re-entry flag. */
static icl_model *box_model(lua_State *L, int arg, int **busy) {
  mbox *b = luaL_checkudata(L, arg, MODEL_MT);
  int *dummy;
  if (!busy) busy = &dummy;
  if (b->get) return b->get(L, b->ud, busy);
  if (!b->m) luaL_argerror(L, arg, "model is closed");
  *busy = &b->busy;
  return b->m;
}

static icl_model *check_model(lua_State *L, int arg) { return box_model(L, arg, NULL); }

void icl_lua_push_model_view(lua_State *L, int owner, icl_lua_model_get get, void *ud) {
  owner = lua_absindex(L, owner);
  mbox *b = lua_newuserdatauv(L, sizeof *b, 1);
  *b = (mbox){.get = get, .ud = ud};
  luaL_setmetatable(L, MODEL_MT);
  lua_pushvalue(L, owner);
  lua_setiuservalue(L, -2, 1); /* keeps ud's owner alive */
}

/* Raises for an unknown key in the options table at idx (typos must not pass silently). */
static void check_keys(lua_State *L, int arg, int idx, const char *const *allowed, const char *what) {
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++)
      ok = lua_type(L, -2) == LUA_TSTRING && !strcmp(lua_tostring(L, -2), allowed[i]);
    if (!ok) {
      lua_pop(L, 1);
      luaL_argerror(L, arg, lua_pushfstring(L, "%sunknown option '%s'", what, luaL_tolstring(L, -1, NULL)));
    }
  }
}

/* ---- loading --------------------------------------------------------------------------------------------- */

static lua_Integer opt_int(lua_State *L, int idx, const char *key, lua_Integer def, lua_Integer lo, lua_Integer hi) {
  lua_Integer v = def;
  if (lua_getfield(L, idx, key) != LUA_TNIL) {
    int isint;
    v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < lo || v > hi)
      luaL_argerror(L, idx, lua_pushfstring(L, "%s: expected an integer in %I..%I", key, lo, hi));
  }
  lua_pop(L, 1);
  return v;
}

static const char *const LOAD_KEYS[] = {"backend", "device", "threads", "n_ctx", "chunk", "precision", NULL};

/* icl.load(path [, {backend=, device=, threads=, n_ctx=, chunk=, precision=}]) -> model, or nil + message. */
static int l_load(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  icl_load_opts o = {.device = -1};
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    check_keys(L, 2, 2, LOAD_KEYS, "");
    if (lua_getfield(L, 2, "backend") != LUA_TNIL && !lua_isstring(L, -1))
      luaL_argerror(L, 2, "backend: expected 'auto', 'cpu', 'vulkan' or 'ref'");
    o.backend = lua_tostring(L, -1); /* stays on the stack */
    o.device = (int)opt_int(L, 2, "device", -1, -1, INT_MAX);
    o.n_threads = (int)opt_int(L, 2, "threads", 0, 0, 4096);
    o.n_ctx = (int)opt_int(L, 2, "n_ctx", 0, 0, 1 << 24);
    o.chunk = (int)opt_int(L, 2, "chunk", 0, 0, 1 << 16);
    if (lua_getfield(L, 2, "precision") != LUA_TNIL) {
      const char *p = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
      if (strcmp(p, "exact") && strcmp(p, "fast"))
        luaL_argerror(L, 2, lua_pushfstring(L, "precision: expected 'exact' or 'fast', got '%s'",
                                            lua_isstring(L, -1) ? p : luaL_typename(L, -1)));
      o.precision = strcmp(p, "fast") ? ICL_PRECISION_EXACT : ICL_PRECISION_FAST;
    }
    lua_pop(L, 1);
  }
  mbox *b = lua_newuserdatauv(L, sizeof *b, 0);
  *b = (mbox){0};
  luaL_setmetatable(L, MODEL_MT);
  icl_error err;
  int rc = icl_model_load(path, &o, &b->m, &err);
  return rc ? icl_lua_result(L, rc, &err) : 1;
}

/* m:close(); on a view it only detaches the view (its owner keeps the model). */
static int m_close(lua_State *L) {
  mbox *b = luaL_checkudata(L, 1, MODEL_MT);
  if (b->get) {
    b->get = NULL, b->ud = NULL;
    return 0;
  }
  if (b->busy) return luaL_error(L, "cannot close a model while it runs");
  icl_model_free(b->m);
  b->m = NULL;
  return 0;
}

static int m_tostring(lua_State *L) {
  mbox *b = luaL_checkudata(L, 1, MODEL_MT);
  if (!b->m && !b->get) {
    lua_pushliteral(L, "icl.model (closed)");
    return 1;
  }
  icl_model *m = check_model(L, 1);
  const icl_hparams *h = icl_model_hparams(m);
  lua_pushfstring(L, "icl.model: %s (%s, %d layers, %d heads, d_model %d, vocab %d) on %s", h->name, h->arch,
                  h->n_layer, h->n_head, h->n_embd, h->n_vocab, icl_model_backend(m));
  return 1;
}

/* ---- fields ---------------------------------------------------------------------------------------------- */

static int push_field(lua_State *L, icl_model *m, const char *k) {
  const icl_hparams *h = icl_model_hparams(m);
  const icl_tokenizer *tok = icl_model_tokenizer(m);
  static const char *const INTS[] = {"n_layers", "n_heads", "n_kv_heads", "d_model", "d_head", "d_mlp", "n_vocab",
                                     "n_ctx_train", NULL};
  const int vals[] = {h->n_layer, h->n_head, h->n_head_kv, h->n_embd, h->head_dim, h->n_ff, h->n_vocab, h->n_ctx_train};
  for (int i = 0; INTS[i]; i++)
    if (!strcmp(k, INTS[i])) return lua_pushinteger(L, vals[i]), 1;
  if (!strcmp(k, "arch")) return lua_pushstring(L, h->arch), 1;
  if (!strcmp(k, "name")) return lua_pushstring(L, h->name), 1;
  if (!strcmp(k, "backend")) return lua_pushstring(L, icl_model_backend(m)), 1;
  if (!strcmp(k, "device")) return lua_pushstring(L, icl_model_device(m)), 1;
  if (!strcmp(k, "weight_bytes")) return lua_pushinteger(L, (lua_Integer)icl_model_weight_bytes(m)), 1;
  if (!strcmp(k, "input_length")) return lua_pushinteger(L, h->input_length), 1;
  if (!strcmp(k, "n_tokens")) return lua_pushinteger(L, h->n_tokens), 1;
  if (!strcmp(k, "bos")) return lua_pushinteger(L, icl_tokenizer_bos(tok)), 1;
  if (!strcmp(k, "eos")) return lua_pushinteger(L, icl_tokenizer_eos(tok)), 1;
  return 0;
}

/* Attention geometry fields: layer_kind and layer_rope_base are tables keyed by the 0-based layer numbers of the
 * hook names ("sliding" / "global"; the RoPE base of each layer). */
static int push_geometry(lua_State *L, icl_model *m, const char *k) {
  int per_kind = !strcmp(k, "layer_kind"), per_base = !strcmp(k, "layer_rope_base");
  icl_layer_info li;
  icl_error err;
  if (icl_model_layer_info(m, 0, &li, &err)) return 0;
  if (!strcmp(k, "window")) return lua_pushinteger(L, icl_model_window(m)), 1;
  if (!strcmp(k, "rope_style")) return lua_pushstring(L, li.rope_neox ? "neox" : "interleaved"), 1;
  if (!strcmp(k, "attn_scale")) return lua_pushnumber(L, li.attn_scale), 1;
  if (!strcmp(k, "rope_base")) return lua_pushnumber(L, icl_model_hparams(m)->rope_base), 1;
  if (!strcmp(k, "norm_eps")) return lua_pushnumber(L, icl_model_hparams(m)->eps), 1;
  if (!per_kind && !per_base) return 0;
  int n = icl_model_hparams(m)->n_layer;
  lua_createtable(L, n, 1);
  for (int il = 0; il < n && !icl_model_layer_info(m, il, &li, &err); il++) {
    if (per_kind) lua_pushstring(L, li.window ? "sliding" : "global");
    else lua_pushnumber(L, li.rope_base);
    lua_rawseti(L, -2, il);
  }
  return 1;
}

/* m.<field> or a method (the methods table is upvalue 1). */
static int m_index(lua_State *L) {
  luaL_checkudata(L, 1, MODEL_MT);
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
  if (k && (push_field(L, check_model(L, 1), k) || push_geometry(L, check_model(L, 1), k))) return 1;
  return luaL_error(L, "model has no field '%s'", luaL_tolstring(L, 2, NULL));
}

/* ---- tokens ---------------------------------------------------------------------------------------------- */

/* Reads token ids at arg (a table or a 1-D tensor) into an array anchored on the stack: conversion only (integers
 * that fit 32 bits); their range against the model is the core's to check (icl_session_eval, icl_detokenize). */
static int32_t *check_tokens(lua_State *L, int arg, int64_t *n) {
  icl_tensor *t = icl_lua_test_tensor(L, arg);
  if (!t) luaL_checktype(L, arg, LUA_TTABLE);
  *n = t ? t->numel : icl_lua_seq_len(L, arg, arg, ICL_LUA_SEQ_MAX, "tokens");
  int32_t *ids = icl_lua_seq_array(L, *n, sizeof *ids, "tokens");
  for (int64_t i = 0; i < *n; i++) {
    int isint = 0;
    lua_Integer v = 0;
    if (t) {
      float f = t->data[i];
      if (f > -4e18f && f < 4e18f) v = (lua_Integer)f, isint = (float)v == f; /* 2^31 is an integer, too large */
      if (!isint) lua_pushnumber(L, f); /* the value, named in the error */
    } else {
      lua_geti(L, arg, i + 1);
      v = lua_tointegerx(L, -1, &isint);
    }
    if (!isint) /* inf, NaN, 1e30, 2.5: named as they are, never as a wrapped 32-bit id */
      luaL_argerror(L, arg, lua_pushfstring(L, "tokens[%I]: %s is not an integer token id", (lua_Integer)i + 1,
                                            luaL_tolstring(L, -1, NULL)));
    if (!t) lua_pop(L, 1);
    if (v < INT32_MIN || v > INT32_MAX)
      luaL_argerror(L, arg, lua_pushfstring(L, "tokens[%I]: %I out of range for a 32-bit token id", (lua_Integer)i + 1, v));
    ids[i] = (int32_t)v;
  }
  return ids;
}

static int opt_bool_field(lua_State *L, int idx, const char *key, int def) {
  if (lua_isnoneornil(L, idx)) return def;
  luaL_checktype(L, idx, LUA_TTABLE);
  int t = lua_getfield(L, idx, key), v = t == LUA_TNIL ? def : lua_toboolean(L, -1);
  if (t != LUA_TNIL && t != LUA_TBOOLEAN) luaL_argerror(L, idx, lua_pushfstring(L, "%s: expected a boolean", key));
  lua_pop(L, 1);
  return v;
}

/* The model's tokenizer; raises for a model without one (an icl-attn checkpoint). */
static const icl_tokenizer *need_tokenizer(lua_State *L, icl_model *m) {
  const icl_tokenizer *t = icl_model_tokenizer(m);
  if (!t) luaL_error(L, "model has no tokenizer");
  return t;
}

static const char *const TOKENIZE_KEYS[] = {"bos", "special", NULL};
static const char *const DETOKENIZE_KEYS[] = {"special", NULL};

/* m:tokenize(text [, {bos=, special=}]) -> {ids}. bos: true/false, default the model's own setting. */
static int m_tokenize(lua_State *L) {
  icl_model *m = check_model(L, 1);
  need_tokenizer(L, m);
  size_t len;
  const char *text = luaL_checklstring(L, 2, &len);
  if (lua_istable(L, 3)) check_keys(L, 3, 3, TOKENIZE_KEYS, ""); /* misspelt options raise */
  int bos = opt_bool_field(L, 3, "bos", -1), special = opt_bool_field(L, 3, "special", 0);
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error err;
  if (icl_tokenize(icl_model_tokenizer(m), text, len, bos, special, &ids, &n, &err))
    return luaL_error(L, "%s", err.msg);
  if (!lua_checkstack(L, 2) || n > INT_MAX) {
    free(ids);
    return luaL_error(L, "tokenize: too many tokens");
  }
  lua_createtable(L, (int)n, 0); /* may raise only on memory errors: ids leaks then */
  for (int64_t i = 0; i < n; i++) {
    lua_pushinteger(L, ids[i]);
    lua_rawseti(L, -2, i + 1);
  }
  free(ids);
  return 1;
}

/* m:detokenize(ids [, {special=}]) -> string. */
static int m_detokenize(lua_State *L) {
  lua_settop(L, 3);
  icl_model *m = check_model(L, 1);
  need_tokenizer(L, m);
  int64_t n;
  int32_t *ids = check_tokens(L, 2, &n);
  if (lua_istable(L, 3)) check_keys(L, 3, 3, DETOKENIZE_KEYS, "");
  int special = opt_bool_field(L, 3, "special", 0);
  char *s = NULL;
  size_t len = 0;
  icl_error err;
  if (icl_detokenize(icl_model_tokenizer(m), ids, n, special, &s, &len, &err)) return luaL_error(L, "%s", err.msg);
  lua_pushlstring(L, s, len); /* a memory error here would leak s; acceptable at this size */
  free(s);
  return 1;
}

/* m:token_text(id) -> the bytes the token stands for. */
static int m_token_text(lua_State *L) {
  icl_model *m = check_model(L, 1);
  need_tokenizer(L, m);
  lua_Integer id = luaL_checkinteger(L, 2);
  size_t len;
  const char *s = id >= 0 && id <= INT32_MAX ? icl_token_text(icl_model_tokenizer(m), (int32_t)id, &len) : NULL;
  if (!s)
    return luaL_argerror(L, 2,
                         lua_pushfstring(L, "token %I out of range 0..%d", id, icl_model_hparams(m)->n_vocab - 1));
  lua_pushlstring(L, s, len);
  return 1;
}

/* The rows option of m:weight ({ids = {id, ...}}): 0-based row indices into a userdata left on the stack. */
static int64_t weight_ids(lua_State *L, int idx, int64_t **out) {
  *out = NULL;
  if (lua_isnoneornil(L, idx)) return 0;
  luaL_checktype(L, idx, LUA_TTABLE);
  if (lua_getfield(L, idx, "ids") == LUA_TNIL) return luaL_argerror(L, idx, "expected {ids = {row, ...}}");
  if (!lua_istable(L, -1)) return luaL_argerror(L, idx, "ids: expected a list of row indices (token ids)");
  int64_t n = (int64_t)lua_rawlen(L, -1);
  if (n < 1 || n > (1 << 24)) return luaL_argerror(L, idx, "ids: expected 1 to 16777216 row indices");
  int64_t *ids = lua_newuserdatauv(L, (size_t)n * sizeof *ids, 0);
  for (int64_t i = 0; i < n; i++) {
    int isint = 0;
    lua_rawgeti(L, -2, (lua_Integer)i + 1);
    ids[i] = (int64_t)lua_tointegerx(L, -1, &isint);
    if (!isint)
      return luaL_argerror(L, idx, lua_pushfstring(L, "ids[%I]: expected an integer row index", (lua_Integer)i + 1));
    lua_pop(L, 1);
  }
  *out = ids;
  return n;
}

/* m:weight(name [, {ids = rows}]): a weight (or some of its rows) by its GGUF name as an f32 tensor */
static int m_weight(lua_State *L) {
  int *busy;
  icl_model *m = box_model(L, 1, &busy);
  const char *name = luaL_checkstring(L, 2);
  int64_t *ids, n = weight_ids(L, 3, &ids);
  if (*busy) return luaL_error(L, "m:weight: cannot read a weight while the model runs (called from a hook?)");
  icl_error err = {0};
  icl_lua_tbox *box = icl_lua_new_tbox(L);
  int rc = icl_model_weight_rows(m, name, ids, n, &box->t, &err);
  return icl_lua_tensor_done(L, rc, &err);
}

/* ---- run: options ---------------------------------------------------------------------------------------- */

/* What m:run builds from its options. Arrays are userdata and strings are Lua strings, all kept alive in the
 * anchor table at stack index `anchor`, so a raised error leaks nothing. */
typedef struct run_spec {
  lua_State *L;
  const icl_hparams *hp;
  int64_t n;  /* tokens */
  int arg;    /* stack index of the options table (for argument errors) */
  int anchor; /* stack index of the anchor table */
  int nanchor;
  icl_capture *caps;
  int ncaps;
  icl_intervention *ivs;
  int nivs, cap_ivs;
  const char **points;
  int npoints;
} run_spec;

#define RUN_LIST_MAX 65536 /* entries of one list option of m:run (capture, ablate, hook.points...) */

/* Pops the value on top into the anchor table. */
static void anchor(run_spec *s) { lua_rawseti(s->L, s->anchor, ++s->nanchor); }

static void *scratch(run_spec *s, size_t bytes) {
  void *p = lua_newuserdatauv(s->L, bytes ? bytes : 1, 0);
  memset(p, 0, bytes ? bytes : 1);
  anchor(s);
  return p;
}

/* luaL_argerror, but naming fname where Lua knows no name (pcall(m.run, m, ...) would say '?'). */
static int arg_error(lua_State *L, int arg, const char *fname, const char *msg) {
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name == NULL)
    return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, fname, msg);
  return luaL_argerror(L, arg, msg);
}

/* Raises "bad argument #3 to 'run' (<what>.<msg>)". */
static int field_error(run_spec *s, const char *what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *msg = lua_pushvfstring(s->L, fmt, ap);
  va_end(ap);
  return arg_error(s->L, s->arg, "run", lua_pushfstring(s->L, "%s%s", what, msg));
}

/* Integer field of the item at idx; def when absent (required: error instead). */
static lua_Integer int_field(run_spec *s, int idx, const char *what, const char *key, lua_Integer def, int required,
                             lua_Integer lo, lua_Integer hi) {
  lua_Integer v = def;
  int t = lua_getfield(s->L, idx, key), isint = 1;
  if (t == LUA_TNIL && required) field_error(s, what, "%s%s: required", *what ? "." : "", key);
  if (t != LUA_TNIL) v = lua_tointegerx(s->L, -1, &isint);
  if (!isint) field_error(s, what, "%s%s: expected an integer, got %s", *what ? "." : "", key, luaL_typename(s->L, -1));
  if (v < lo || v > hi) field_error(s, what, "%s%s: %I out of range %I..%I", *what ? "." : "", key, v, lo, hi);
  lua_pop(s->L, 1);
  return v;
}

/* String field (kept alive by the item); NULL when absent and not required. */
static const char *str_field(run_spec *s, int idx, const char *what, const char *key, int required) {
  int t = lua_getfield(s->L, idx, key);
  if (t == LUA_TNIL && required) field_error(s, what, "%s%s: required", *what ? "." : "", key);
  if (t != LUA_TNIL && t != LUA_TSTRING)
    field_error(s, what, "%s%s: expected a string, got %s", *what ? "." : "", key, luaL_typename(s->L, -1));
  size_t len = 0;
  const char *v = lua_tolstring(s->L, -1, &len);
  if (v && strlen(v) != len) field_error(s, what, "%s%s: contains a NUL byte", *what ? "." : "", key);
  lua_pop(s->L, 1);
  return v;
}

/* A 1-based Lua position (negative: from the end) in the C API's convention (0-based, negative from the end); the
 * core checks it against the run. 0 is no position in Lua's numbering: a conversion error. */
static int64_t c_position(run_spec *s, const char *what, lua_Integer p) {
  if (p == 0) field_error(s, what, ": position 0 (positions are 1-based; -1 is the last)");
  return p > 0 ? p - 1 : p;
}

/* pos = p (one position) or {a, b} (inclusive) -> [*b, *e) in the C convention (end 0: through the last position);
 * absent: every position (0, 0). */
static void pos_field(run_spec *s, int idx, const char *what, int64_t *b, int64_t *e) {
  lua_State *L = s->L;
  char w[96];
  snprintf(w, sizeof w, "%s.pos", what);
  int t = lua_getfield(L, idx, "pos");
  *b = *e = 0;
  if (t == LUA_TNUMBER) {
    *b = c_position(s, w, int_field(s, idx, what, "pos", 0, 1, LUA_MININTEGER, LUA_MAXINTEGER));
    *e = *b + 1;
  } else if (t == LUA_TTABLE) {
    lua_Integer ab[2];
    for (int i = 0; i < 2; i++) {
      int isint;
      lua_geti(L, -1, i + 1);
      ab[i] = lua_tointegerx(L, -1, &isint);
      if (!isint) field_error(s, w, ": expected {first, last} positions");
      lua_pop(L, 1);
    }
    *b = c_position(s, w, ab[0]);
    *e = c_position(s, w, ab[1]) + 1;
  } else if (t != LUA_TNIL) {
    field_error(s, w, ": expected a position or {first, last}");
  }
  lua_pop(L, 1);
}

/* head = h or heads = {h, ...} as integers; absent: NULL (all heads). Their range is the core's to check (it knows
 * each point's heads). */
static void heads_field(run_spec *s, int idx, const char *what, const int **heads, int *n) {
  lua_State *L = s->L;
  *heads = NULL, *n = 0;
  if (lua_getfield(L, idx, "head") != LUA_TNIL) {
    lua_pop(L, 1);
    int *h = scratch(s, sizeof *h);
    h[0] = (int)int_field(s, idx, what, "head", 0, 1, INT_MIN, INT_MAX);
    *heads = h, *n = 1;
    return;
  }
  lua_pop(L, 1);
  int t = lua_getfield(L, idx, "heads");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (t != LUA_TTABLE) field_error(s, what, ".heads: expected a list of head indices");
  char w[96];
  snprintf(w, sizeof w, "%s.heads", what);
  int k = (int)icl_lua_seq_len(L, -1, s->arg, RUN_LIST_MAX, w);
  int *h = scratch(s, (size_t)k * sizeof *h);
  for (int i = 0; i < k; i++) {
    int isint;
    lua_geti(L, -1, i + 1);
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < INT_MIN || v > INT_MAX)
      field_error(s, what, ".heads[%d]: %s is not a head index", i + 1, luaL_tolstring(L, -1, NULL));
    h[i] = (int)v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  *heads = h, *n = k;
}

/* value = tensor or nested table, copied (so the run cannot see it change); NULL when absent. */
static const icl_tensor *value_field(run_spec *s, int idx, const char *what, int required) {
  lua_State *L = s->L;
  int t = lua_getfield(L, idx, "value");
  if (t == LUA_TNIL) {
    if (required) field_error(s, what, ".value: required (a tensor)");
    lua_pop(L, 1);
    return NULL;
  }
  if (t != LUA_TTABLE && !icl_lua_test_tensor(L, -1)) field_error(s, what, ".value: expected a tensor");
  icl_tensor *v = icl_lua_to_tensor(L, -1);
  anchor(s);
  lua_pop(L, 1);
  return v;
}

/* Calls fn(s, idx of item, "<name>[i]", i) for each item of the list opts[name] (a table of tables). */
static void each_item(run_spec *s, const char *name, lua_Integer n, void (*fn)(run_spec *, int, const char *)) {
  lua_State *L = s->L;
  int t = lua_getfield(L, s->arg, name);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (t != LUA_TTABLE) field_error(s, name, ": expected a list of tables");
  int list = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    char what[64];
    snprintf(what, sizeof what, "%s[%d]", name, (int)i);
    int ti = lua_geti(L, list, i);
    if (ti != LUA_TTABLE && !(ti == LUA_TSTRING && !strcmp(name, "capture")))
      field_error(s, what, ": expected a table, got %s", luaL_typename(L, -1));
    fn(s, lua_gettop(L), what);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static icl_intervention *new_iv(run_spec *s, icl_iv_kind kind, const char *what) {
  luaL_argcheck(s->L, s->nivs < s->cap_ivs, s->arg, "too many interventions");
  icl_intervention *v = &s->ivs[s->nivs++];
  memset(v, 0, sizeof *v);
  v->kind = kind;
  v->label = lua_pushstring(s->L, what); /* "patch[1]": the core's messages name the entry */
  anchor(s);
  v->coef = 1.0f;
  return v;
}

static const char *const CAPTURE_KEYS[] = {"name", "pos", "heads", "head", NULL};

/* capture entry: "pattern" or {name = pattern, pos =, heads =}. */
static void parse_capture(run_spec *s, int idx, const char *what) {
  icl_capture *c = &s->caps[s->ncaps++];
  if (lua_type(s->L, idx) == LUA_TSTRING) {
    size_t len;
    c->pattern = lua_tolstring(s->L, idx, &len);
    if (strlen(c->pattern) != len) field_error(s, what, ": contains a NUL byte");
    return;
  }
  check_keys(s->L, s->arg, idx, CAPTURE_KEYS, lua_pushfstring(s->L, "%s: ", what));
  lua_pop(s->L, 1);
  c->pattern = str_field(s, idx, what, "name", 1);
  c->label = lua_pushstring(s->L, what); /* "capture[1]": the core's messages name the entry */
  anchor(s);
  pos_field(s, idx, what, &c->pos_begin, &c->pos_end);
  heads_field(s, idx, what, &c->heads, &c->n_heads);
}

/* hook = a full name, or short ("z", "result", "q", "k", "v") with layer =: both passed as they are, the core
 * resolves and checks them (layer -1: not given). */
static void hook_fields(run_spec *s, int idx, const char *what, icl_intervention *v) {
  v->hook = str_field(s, idx, what, "hook", 0);
  v->layer = (int)int_field(s, idx, what, "layer", -1, 0, INT_MIN, INT_MAX);
}

static const char *const ABLATE_KEYS[] = {"layer", "head", "heads", "mode", "value", "hook", "pos", NULL};

/* ablate entry: {layer =, head = | heads =, mode = "zero" | "mean", value =, hook =, pos =}. */
static void parse_ablate(run_spec *s, int idx, const char *what) {
  check_keys(s->L, s->arg, idx, ABLATE_KEYS, lua_pushfstring(s->L, "%s: ", what));
  lua_pop(s->L, 1);
  const char *mode = str_field(s, idx, what, "mode", 0);
  if (mode && strcmp(mode, "zero") && strcmp(mode, "mean"))
    field_error(s, what, ".mode: '%s' is not zero or mean", mode);
  int mean = mode && !strcmp(mode, "mean");
  icl_intervention *v = new_iv(s, mean ? ICL_IV_MEAN : ICL_IV_ZERO, what);
  hook_fields(s, idx, what, v);
  heads_field(s, idx, what, &v->heads, &v->n_heads);
  pos_field(s, idx, what, &v->pos_begin, &v->pos_end);
  v->value = value_field(s, idx, what, mean);
}

static const char *const PATCH_KEYS[] = {"hook", "value", "pos", "heads", "head", "layer", NULL};

/* patch entry: {hook =, value =, pos =, heads =}; with layer =, hook may be short as in ablate (default "z"). */
static void parse_patch(run_spec *s, int idx, const char *what) {
  check_keys(s->L, s->arg, idx, PATCH_KEYS, lua_pushfstring(s->L, "%s: ", what));
  lua_pop(s->L, 1);
  icl_intervention *v = new_iv(s, ICL_IV_PATCH, what);
  hook_fields(s, idx, what, v);
  heads_field(s, idx, what, &v->heads, &v->n_heads);
  pos_field(s, idx, what, &v->pos_begin, &v->pos_end);
  v->value = value_field(s, idx, what, 1);
}

static const char *const ADD_KEYS[] = {"hook", "value", "coef", "pos", NULL};

/* add entry: {hook =, value =, coef = 1, pos =}. */
static void parse_add(run_spec *s, int idx, const char *what) {
  check_keys(s->L, s->arg, idx, ADD_KEYS, lua_pushfstring(s->L, "%s: ", what));
  lua_pop(s->L, 1);
  icl_intervention *v = new_iv(s, ICL_IV_ADD, what);
  v->hook = str_field(s, idx, what, "hook", 1);
  pos_field(s, idx, what, &v->pos_begin, &v->pos_end);
  v->value = value_field(s, idx, what, 1);
  if (lua_getfield(s->L, idx, "coef") != LUA_TNIL) {
    if (!lua_isnumber(s->L, -1)) field_error(s, what, ".coef: expected a number");
    v->coef = (float)lua_tonumber(s->L, -1);
  }
  lua_pop(s->L, 1);
}

static const char *const KNOCKOUT_KEYS[] = {"layer", "heads", "head", "edges", NULL};
static const char *const MASK_KEYS[] = {"layer", "heads", "head", "allow", NULL};

/* The list of {q, k} pairs at field key of the item at idx into v, each position converted by c_position (the core
 * checks their range and k <= q). */
static void edges_field(run_spec *s, int idx, const char *what, const char *key, icl_intervention *v) {
  lua_State *L = s->L;
  if (lua_getfield(L, idx, key) != LUA_TTABLE) field_error(s, what, ".%s: expected a list of {q, k} pairs", key);
  char we[96];
  snprintf(we, sizeof we, "%s.%s", what, key);
  int64_t n = icl_lua_seq_len(L, -1, s->arg, ICL_LUA_SEQ_MAX, we);
  int64_t *e = scratch(s, (size_t)(2 * n) * sizeof *e);
  for (int64_t i = 0; i < n; i++) {
    char w[96];
    snprintf(w, sizeof w, "%s.%s[%lld]", what, key, (long long)i + 1);
    if (lua_geti(L, -1, i + 1) != LUA_TTABLE) field_error(s, w, ": expected {q, k}");
    for (int j = 0; j < 2; j++) {
      int isint;
      lua_geti(L, -1, j + 1);
      lua_Integer p = lua_tointegerx(L, -1, &isint);
      if (!isint) field_error(s, w, ": expected {q, k} positions");
      e[2 * i + j] = c_position(s, w, p);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  v->edges = e, v->n_edges = n;
}

/* An edge-set entry: {layer =, heads =, <field> = {{q, k}, ...}} with 1-based positions k <= q. */
static void parse_edge_set(run_spec *s, int idx, const char *what, icl_iv_kind kind, const char *const *keys,
                           const char *field) {
  check_keys(s->L, s->arg, idx, keys, lua_pushfstring(s->L, "%s: ", what));
  lua_pop(s->L, 1);
  icl_intervention *v = new_iv(s, kind, what);
  v->layer = (int)int_field(s, idx, what, "layer", 0, 1, INT_MIN, INT_MAX);
  heads_field(s, idx, what, &v->heads, &v->n_heads);
  edges_field(s, idx, what, field, v);
}

/* knockout entry: {layer =, heads =, edges = {{q, k}, ...}}: those edges are masked. */
static void parse_knockout(run_spec *s, int idx, const char *what) {
  parse_edge_set(s, idx, what, ICL_IV_KNOCKOUT, KNOCKOUT_KEYS, "edges");
}

/* masks entry: {layer =, heads =, allow = {{q, k}, ...}}: the heads' queries attend to the listed keys only. */
static void parse_mask(run_spec *s, int idx, const char *what) {
  parse_edge_set(s, idx, what, ICL_IV_MASK, MASK_KEYS, "allow");
}

/* Length of the list opts[name] (0 when absent), read once: the parsers loop to this count. */
static int list_len(run_spec *s, const char *name) {
  int t = lua_getfield(s->L, s->arg, name);
  int n = t == LUA_TTABLE ? (int)icl_lua_seq_len(s->L, -1, s->arg, RUN_LIST_MAX, name) : t == LUA_TSTRING ? 1 : 0;
  lua_pop(s->L, 1);
  return n;
}

static void parse_lists(run_spec *s) {
  lua_State *L = s->L;
  int ncap = list_len(s, "capture"), nab = list_len(s, "ablate"), npa = list_len(s, "patch");
  int nadd = list_len(s, "add"), nko = list_len(s, "knockout"), nmask = list_len(s, "masks");
  s->cap_ivs = nab + npa + nadd + nko + nmask;
  s->caps = scratch(s, (size_t)ncap * sizeof *s->caps);
  s->ivs = scratch(s, (size_t)s->cap_ivs * sizeof *s->ivs);
  /* capture = "pattern" (ncap is 1 then; checked again in case an __index answers differently) */
  if (lua_getfield(L, s->arg, "capture") == LUA_TSTRING && ncap == 1) {
    parse_capture(s, lua_gettop(L), "capture");
    lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
    each_item(s, "capture", ncap, parse_capture);
  }
  each_item(s, "ablate", nab, parse_ablate);
  each_item(s, "patch", npa, parse_patch);
  each_item(s, "add", nadd, parse_add);
  each_item(s, "knockout", nko, parse_knockout);
  each_item(s, "masks", nmask, parse_mask);
}

/* ---- run: callbacks -------------------------------------------------------------------------------------- */

typedef struct run_ctx {
  lua_State *L;
  int hook_fn, chunk_fn; /* stack indices of the Lua functions (0: none) */
  int stream, logits_all, reuse;
  icl_run_result res; /* freed by the guard's __gc */
} run_ctx;

typedef struct call_args {
  run_ctx *c;
  const char *name;
  icl_tensor *value;
  int64_t pos0, n;
  icl_run_result *res;
} call_args;

/* hook.fn(name, copy of the value, first position): a returned tensor, or the copy as modified, replaces it. */
static int hook_protected(lua_State *L) {
  call_args *a = lua_touserdata(L, 1);
  icl_lua_tbox *b = icl_lua_new_tbox(L); /* index 3: the copy the function sees */
  if (!(b->t = icl_tensor_clone(a->value))) return luaL_error(L, "out of memory");
  icl_lua_tensor_account(L, b->t);
  lua_pushvalue(L, 2); /* hook.fn */
  lua_pushstring(L, a->name);
  lua_pushvalue(L, 3);
  lua_pushinteger(L, a->pos0 + 1);
  lua_call(L, 3, 1);
  icl_tensor *ret = icl_lua_test_tensor(L, -1), *src = ret ? ret : icl_lua_test_tensor(L, 3);
  if (!ret && !lua_isnil(L, -1))
    return luaL_error(L, "hook.fn returned a %s (expected nil or a tensor)", luaL_typename(L, -1));
  if (!src) return 0; /* the copy was closed: no change */
  if (src->numel != a->value->numel)
    return luaL_error(L, "hook.fn returned %I elements for %s, expected %I", (lua_Integer)src->numel, a->name,
                      (lua_Integer)a->value->numel);
  memcpy(a->value->data, src->data, (size_t)src->numel * sizeof(float));
  return 0;
}

/* on_chunk(first position, count, {name = tensor, logits = rows of this chunk}): captures when streaming. */
static int chunk_protected(lua_State *L) {
  call_args *a = lua_touserdata(L, 1);
  lua_pushvalue(L, 2); /* on_chunk */
  lua_pushinteger(L, a->pos0 + 1);
  lua_pushinteger(L, a->n);
  lua_newtable(L);
  for (int i = 0; a->c->stream && i < a->res->n_captures; i++) {
    if (!a->res->captures[i]) continue;
    icl_lua_tbox *b = icl_lua_new_tbox(L);
    if (!(b->t = icl_tensor_clone(a->res->captures[i]))) return luaL_error(L, "out of memory");
    icl_lua_tensor_account(L, b->t);
    lua_setfield(L, -2, a->res->names[i]);
  }
  const icl_tensor *lg = a->res->logits;
  if (lg && a->c->logits_all) {
    icl_error err;
    icl_lua_tbox *b = icl_lua_new_tbox(L);
    int64_t r0 = a->c->stream && a->c->chunk_fn ? 0 : a->pos0; /* streaming: lg holds this chunk's rows only */
    if (icl_tensor_slice(lg, 0, r0, r0 + a->n, &b->t, &err)) return luaL_error(L, "%s", err.msg);
    icl_lua_tensor_account(L, b->t);
    lua_setfield(L, -2, "logits");
  }
  if (a->res->lse) {
    icl_error err;
    icl_lua_tbox *b = icl_lua_new_tbox(L);
    if (icl_tensor_slice(a->res->lse, 0, a->pos0, a->pos0 + a->n, &b->t, &err)) return luaL_error(L, "%s", err.msg);
    icl_lua_tensor_account(L, b->t);
    lua_setfield(L, -2, "lse");
  }
  lua_call(L, 3, 0);
  return 0;
}

/* Runs fn(a, the Lua function at stack index lua_fn of m:run's frame) protected; an error becomes err (the model
 * run then stops and frees its resources). */
static int call_lua(lua_State *L, lua_CFunction fn, call_args *a, int lua_fn, const char *what, icl_error *err) {
  if (!lua_checkstack(L, 8)) return icl_error_set(err, ICL_ENOMEM, "%s: Lua stack overflow", what);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, a);
  lua_pushvalue(L, lua_fn);
  if (lua_pcall(L, 2, 0, 0) == LUA_OK) return ICL_OK;
  icl_error_set(err, ICL_EINVAL, "%s: %s", what, lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
  lua_pop(L, 1);
  return ICL_EINVAL;
}

static int hook_cb(void *ud, const char *hook, icl_tensor *value, int64_t pos0, icl_error *err) {
  run_ctx *c = ud;
  call_args a = {.c = c, .name = hook, .value = value, .pos0 = pos0};
  return call_lua(c->L, hook_protected, &a, c->hook_fn, "hook.fn", err);
}

static int chunk_cb(void *ud, int64_t pos0, int64_t n, icl_run_result *res, icl_error *err) {
  run_ctx *c = ud;
  call_args a = {.c = c, .pos0 = pos0, .n = n, .res = res};
  return call_lua(c->L, chunk_protected, &a, c->chunk_fn, "on_chunk", err);
}

/* ---- run ------------------------------------------------------------------------------------------------- */

static int guard_gc(lua_State *L) {
  run_ctx *c = luaL_checkudata(L, 1, GUARD_MT);
  icl_run_result_free(&c->res);
  return 0;
}

static const char *const RUN_KEYS[] = {"logits", "capture", "ablate", "patch", "add", "knockout", "masks", "hook",
                                       "on_chunk", "stream", "inputs", "reuse", NULL};

/* inputs = tensor [n, input_length]: continuous per-position inputs (icl-attn); kept alive by the anchor. */
static void inputs_opt(run_spec *s, icl_run_opts *o) {
  lua_State *L = s->L;
  if (lua_getfield(L, s->arg, "inputs") == LUA_TNIL) return (void)lua_pop(L, 1);
  icl_tensor *t = icl_lua_test_tensor(L, -1);
  if (s->hp->input_length == 0) field_error(s, "inputs", ": this model takes no inputs (input_length 0)");
  if (!t || t->ndim != 2 || t->shape[0] != s->n || t->shape[1] != s->hp->input_length)
    field_error(s, "inputs", ": expected a tensor [%I, %d] (tokens, input_length)", (lua_Integer)s->n,
                s->hp->input_length);
  anchor(s);
  o->inputs = t->data, o->inputs_width = t->shape[1];
}

static const char *const SELECT_KEYS[] = {"select", "lse", NULL};

/* logits = {select = {id, ...}, lse = true}: per position only those ids' logits and the log-sum-exp. */
static icl_logits_mode select_opt(run_spec *s, icl_run_opts *o) {
  lua_State *L = s->L;
  int idx = lua_gettop(L);
  check_keys(L, s->arg, idx, SELECT_KEYS, "logits: ");
  int t = lua_getfield(L, idx, "select");
  if (t != LUA_TNIL && t != LUA_TTABLE) field_error(s, "logits", ".select: expected a list of token ids");
  lua_Unsigned n = t == LUA_TTABLE ? lua_rawlen(L, -1) : 0; /* raw length, read once */
  if (n > (lua_Unsigned)s->hp->n_vocab)
    field_error(s, "logits", ".select: %I ids, more than the vocabulary", (lua_Integer)n);
  int32_t *ids = scratch(s, (size_t)n * sizeof *ids);
  for (lua_Unsigned i = 0; i < n; i++) {
    int isint;
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || v < INT32_MIN || v > INT32_MAX) /* conversion; the range is the core's (logits_select.c) */
      field_error(s, "logits", ".select[%I]: %s is not a token id", (lua_Integer)i + 1, luaL_tolstring(L, -1, NULL));
    ids[i] = (int32_t)v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  o->logit_ids = ids, o->n_logit_ids = (int)n;
  t = lua_getfield(L, idx, "lse");
  if (t != LUA_TNIL && t != LUA_TBOOLEAN) field_error(s, "logits", ".lse: expected a boolean");
  o->logit_lse = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_pop(L, 1);
  return ICL_LOGITS_SELECT;
}

/* logits = "all" | "last" (default) | "none" | {select = ids, lse = true}. */
static icl_logits_mode logits_opt(run_spec *s, icl_run_opts *o) {
  if (lua_getfield(s->L, s->arg, "logits") == LUA_TTABLE) return select_opt(s, o);
  lua_pop(s->L, 1);
  const char *v = str_field(s, s->arg, "", "logits", 0);
  if (!v || !strcmp(v, "last")) return ICL_LOGITS_LAST;
  if (!strcmp(v, "all")) return ICL_LOGITS_ALL;
  if (!strcmp(v, "none")) return ICL_LOGITS_NONE;
  return (icl_logits_mode)field_error(s, "logits", ": '%s' is not all, last or none (or {select =, lse =})", v);
}

/* hook = {points = {...} | point = "...", fn = function}: leaves fn on the stack and returns its index. */
static int hook_opt(run_spec *s) {
  lua_State *L = s->L;
  int t = lua_getfield(L, s->arg, "hook");
  if (t == LUA_TNIL) return lua_pop(L, 1), 0;
  if (t != LUA_TTABLE) field_error(s, "hook", ": expected {points = {...}, fn = function}");
  int h = lua_gettop(L);
  if (lua_getfield(L, h, "fn") != LUA_TFUNCTION) field_error(s, "hook", ".fn: expected a function");
  int fn = lua_gettop(L);
  t = lua_getfield(L, h, "points");
  if (t == LUA_TSTRING) {
    s->points = scratch(s, sizeof *s->points);
    s->points[s->npoints++] = lua_tostring(L, -1);
  } else if (t == LUA_TTABLE) {
    int n = (int)icl_lua_seq_len(L, -1, s->arg, RUN_LIST_MAX, "hook.points");
    s->points = scratch(s, (size_t)n * sizeof *s->points);
    for (int i = 1; i <= n; i++) {
      if (lua_geti(L, -1, i) != LUA_TSTRING) field_error(s, "hook", ".points[%d]: expected a hook name", i);
      s->points[s->npoints++] = lua_tostring(L, -1);
      lua_pop(L, 1); /* the list keeps it */
    }
  } else {
    field_error(s, "hook", ".points: expected a list of hook names");
  }
  lua_pop(L, 1);
  lua_remove(L, h);
  return fn - 1;
}

/* Moves the result's tensors into a new table {logits = ..., [name] = ...}. */
static void push_results(lua_State *L, run_ctx *c) {
  icl_run_result *r = &c->res;
  lua_createtable(L, 0, r->n_captures + 1);
  if (r->logits) {
    icl_lua_push_tensor(L, r->logits);
    r->logits = NULL;
    lua_setfield(L, -2, "logits");
  }
  if (r->lse) {
    icl_lua_push_tensor(L, r->lse);
    r->lse = NULL;
    lua_setfield(L, -2, "lse");
  }
  if (c->reuse) {
    lua_pushinteger(L, (lua_Integer)r->reused);
    lua_setfield(L, -2, "reused");
  }
  for (int i = 0; !c->stream && i < r->n_captures; i++) {
    if (!r->captures[i]) continue;
    icl_lua_push_tensor(L, r->captures[i]);
    r->captures[i] = NULL;
    lua_setfield(L, -2, r->names[i]);
  }
}

/* Parses the options into s and o and pushes the guard that owns the result (and frees it if anything raises). */
static run_ctx *prepare_run(lua_State *L, run_spec *s, icl_run_opts *o) {
  o->logits = logits_opt(s, o);
  o->interrupt = icl_lua_interrupt_flag(L);
  inputs_opt(s, o);
  parse_lists(s);
  run_ctx *c = lua_newuserdatauv(L, sizeof *c, 0);
  memset(c, 0, sizeof *c);
  luaL_setmetatable(L, GUARD_MT);
  c->L = L;
  c->logits_all = o->logits == ICL_LOGITS_ALL || o->logits == ICL_LOGITS_SELECT;
  c->hook_fn = hook_opt(s);
  if (lua_getfield(L, s->arg, "on_chunk") != LUA_TNIL && !lua_isfunction(L, -1))
    field_error(s, "on_chunk", ": expected a function");
  c->chunk_fn = lua_isnil(L, -1) ? 0 : lua_gettop(L);
  c->stream = opt_bool_field(L, s->arg, "stream", c->chunk_fn != 0);
  o->reuse = c->reuse = opt_bool_field(L, s->arg, "reuse", 0);
  o->captures = s->caps, o->n_captures = s->ncaps;
  o->interventions = s->ivs, o->n_interventions = s->nivs;
  o->hook_points = s->points, o->n_hook_points = s->npoints;
  o->hook = c->hook_fn ? hook_cb : NULL, o->hook_ud = c;
  o->on_chunk = c->chunk_fn ? chunk_cb : NULL, o->chunk_ud = c, o->stream = c->stream;
  return c;
}

/* After a run: Ctrl-C and bad requests raise, failures of memory or device return nil + message (icl_lua_result). */
static int finish_run(lua_State *L, int rc, const icl_error *err, run_ctx *c) {
  volatile int *flag = icl_lua_interrupt_flag(L);
  if (rc && *flag) { /* Ctrl-C between chunks: consumed here, so the hook does not raise a second time */
    *flag = 0;
    lua_sethook(L, NULL, 0, 0);
    return luaL_error(L, "interrupted");
  }
  if (rc) return icl_lua_result(L, rc, err);
  push_results(L, c);
  return 1;
}

/* Arg 2 as inputs [n, input_length] (a 2-D tensor, icl-attn with continuous inputs): n "no token" ids (-1), the
 * tensor as opts.inputs (kept on the stack at arg 2). NULL when arg 2 is token ids. */
static int32_t *inputs_form(lua_State *L, const icl_hparams *hp, int64_t *n, const float **inputs) {
  icl_tensor *t = icl_lua_test_tensor(L, 2);
  if (!t || t->ndim != 2 || hp->input_length == 0) return NULL;
  if (t->shape[1] != hp->input_length || !hp->allow_no_token)
    luaL_argerror(L, 2, lua_pushfstring(L, "inputs: expected a tensor [n, %d] (positions, input_length)",
                                        hp->input_length));
  lua_getfield(L, 3, "inputs");
  if (!lua_isnil(L, -1)) luaL_argerror(L, 3, "inputs: given twice (as argument 2 and as an option)");
  lua_pop(L, 1);
  *n = t->shape[0];
  int32_t *ids = icl_lua_seq_array(L, *n, sizeof *ids, "inputs");
  for (int64_t i = 0; i < *n; i++) ids[i] = -1;
  *inputs = t->data;
  return ids;
}

int icl_lua_model_run(lua_State *L, icl_model *m, int *busy) {
  if (*busy) return luaL_error(L, "model is already running (run called from a hook or on_chunk?)");
  const icl_hparams *hp = icl_model_hparams(m);
  if (lua_isnoneornil(L, 3)) lua_settop(L, 2), lua_newtable(L);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);
  int64_t n;
  const float *inputs = NULL;
  int32_t *tokens = inputs_form(L, hp, &n, &inputs);
  if (!tokens) tokens = check_tokens(L, 2, &n); /* -1 is "no token" where the model allows it (icl-attn) */
  luaL_argcheck(L, n > 0, 2, "no tokens");
  check_keys(L, 3, 3, RUN_KEYS, "");
  lua_newtable(L); /* the anchor */
  run_spec s = {.L = L, .hp = hp, .n = n, .arg = 3, .anchor = lua_gettop(L)};
  icl_run_opts o;
  memset(&o, 0, sizeof o);
  run_ctx *c = prepare_run(L, &s, &o);
  if (inputs) o.inputs = inputs, o.inputs_width = hp->input_length;
  icl_error err;
  *busy = 1;
  int rc = icl_model_run(m, tokens, n, &o, &c->res, &err);
  *busy = 0;
  return finish_run(L, rc, &err, c);
}

/* m:run(tokens or inputs [, opts]) -> {logits = tensor, [hook name] = tensor, ...}, or nil + message when memory
 * runs out. */
static int m_run(lua_State *L) {
  int *busy;
  icl_model *m = box_model(L, 1, &busy);
  return icl_lua_model_run(L, m, busy);
}

/* ---- devices --------------------------------------------------------------------------------------------- */

static void set_int(lua_State *L, const char *k, lua_Integer v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

static void set_bool(lua_State *L, const char *k, int v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, k);
}

static void push_device(lua_State *L, const icl_device_info *d, int chosen) {
  lua_createtable(L, 0, 16);
  set_int(L, "index", d->index);
  lua_pushstring(L, d->name);
  lua_setfield(L, -2, "name");
  lua_pushstring(L, d->type ? d->type : "other");
  lua_setfield(L, -2, "type");
  lua_pushstring(L, d->driver);
  lua_setfield(L, -2, "driver");
  lua_pushfstring(L, "%d.%d.%d", (int)(d->api_version >> 22) & 0x7f, (int)(d->api_version >> 12) & 0x3ff,
                  (int)d->api_version & 0xfff);
  lua_setfield(L, -2, "api_version");
  set_int(L, "subgroup_size", d->subgroup_size);
  set_bool(L, "fp16", d->fp16);
  set_bool(L, "int8", d->int8);
  set_int(L, "max_storage_range", (lua_Integer)d->max_storage_range);
  set_int(L, "max_alloc", (lua_Integer)d->max_alloc);
  set_int(L, "max_shared", d->max_shared);
  uint64_t local = 0;
  for (int i = 0; i < d->n_heaps; i++) local += d->heaps[i].device_local ? d->heaps[i].size : 0;
  set_int(L, "device_memory", (lua_Integer)local);
  set_bool(L, "uma", d->uma);
  set_bool(L, "usable", d->usable);
  set_bool(L, "chosen", d->index == chosen);
}

/* icl.devices() -> list of device descriptions, or nil + message when there is no Vulkan loader or device. */
static int l_devices(lua_State *L) {
  enum { CAP = 16 };
  icl_device_info *d = lua_newuserdatauv(L, CAP * sizeof *d, 0);
  int n = 0, chosen = -1;
  icl_error err;
  int rc = icl_vk_list_devices(d, CAP, &n, &chosen, &err);
  if (rc) return icl_lua_result(L, rc == ICL_EINVAL ? ICL_EDEVICE : rc, &err); /* no device is not a wrong call */
  lua_createtable(L, n < CAP ? n : CAP, 0);
  for (int i = 0; i < n && i < CAP; i++) {
    push_device(L, &d[i], chosen);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---- registration ---------------------------------------------------------------------------------------- */

static const luaL_Reg METHODS[] = {{"tokenize", m_tokenize}, {"detokenize", m_detokenize}, {"token_text", m_token_text},
                                   {"run", m_run},           {"close", m_close},           {"weight", m_weight},
                                   {NULL, NULL}};

static const luaL_Reg META[] = {
    {"__index", m_index}, {"__gc", m_close}, {"__close", m_close}, {"__tostring", m_tostring}, {NULL, NULL}};

int icl_lua_open_model(lua_State *L) {
  luaL_newmetatable(L, MODEL_MT);
  luaL_newlib(L, METHODS);
  luaL_setfuncs(L, META, 1); /* the methods table is upvalue 1 of each */
  lua_pop(L, 1);
  luaL_newmetatable(L, GUARD_MT);
  lua_pushcfunction(L, guard_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, l_load);
  lua_setfield(L, -2, "load");
  lua_pushcfunction(L, l_devices);
  lua_setfield(L, -2, "devices");
  return 1;
}
