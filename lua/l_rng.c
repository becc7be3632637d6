/* icl.rng: seeded generators (xoshiro256** via splitmix64) with the same sequence on every platform. */
#include "l_rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl_lua.h"
#include "l_seq.h"

#define RNG_MT "icl.rng"

/* ---- C core ---------------------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void icl_rng_seed(icl_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t icl_rng_next(icl_rng *r) {
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double icl_rng_uniform(icl_rng *r) { return (double)(icl_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t icl_rng_below(icl_rng *r, uint64_t range) {
  if (range == 0) return icl_rng_next(r);
  uint64_t floor = (0 - range) % range; /* 2^64 mod range: outputs below it would favour small values */
  for (;;) {
    uint64_t x = icl_rng_next(r);
    if (x >= floor) return x % range;
  }
}

double icl_rng_normal(icl_rng *r) {
  for (;;) {
    double u = 2.0 * icl_rng_uniform(r) - 1.0;
    double v = 2.0 * icl_rng_uniform(r) - 1.0;
    double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) return u * sqrt(-2.0 * log(s) / s);
  }
}

/* Open-addressing set of uint64 keys for Floyd's sampling; cap is a power of two above 2k. */
typedef struct u64set {
  uint64_t *keys; /* [cap], value+1 so that 0 marks an empty slot */
  size_t cap;
} u64set;

static int u64set_add(u64set *h, uint64_t v) { /* returns 1 if added, 0 if present */
  size_t i = (size_t)((v * 0x9e3779b97f4a7c15ull) >> 7) & (h->cap - 1);
  while (h->keys[i]) {
    if (h->keys[i] == v + 1) return 0;
    i = (i + 1) & (h->cap - 1);
  }
  h->keys[i] = v + 1;
  return 1;
}

int icl_rng_sample(icl_rng *r, uint64_t n, uint64_t k, uint64_t *out) {
  if (k > n) return -1;
  if (k == 0) return 0;
  u64set h = {NULL, 4};
  while (h.cap < 2 * k) h.cap *= 2;
  h.keys = calloc(h.cap, sizeof *h.keys);
  if (!h.keys) return -1;
  uint64_t m = 0;
  for (uint64_t j = n - k; j < n; j++) { /* Floyd: a uniform k-subset of [0, n) */
    uint64_t t = icl_rng_below(r, j + 1);
    out[m++] = u64set_add(&h, t) ? t : (u64set_add(&h, j), j);
  }
  free(h.keys);
  for (uint64_t i = k - 1; i > 0; i--) { /* Fisher-Yates: a uniform order */
    uint64_t j = icl_rng_below(r, i + 1), t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
  return 0;
}

/* ---- Lua binding ----------------------------------------------------------------------------------------- */

static icl_rng *check_rng(lua_State *L) { return luaL_checkudata(L, 1, RNG_MT); }

static uint64_t check_seed(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return 0;
  int ok = 0;
  lua_Integer s = lua_tointegerx(L, arg, &ok);
  if (!ok) luaL_argerror(L, arg, "seed must be an integer");
  return (uint64_t)s;
}

static int rng_new(lua_State *L) {
  uint64_t seed = check_seed(L, 1);
  icl_rng *r = lua_newuserdatauv(L, sizeof *r, 0);
  icl_rng_seed(r, seed);
  luaL_setmetatable(L, RNG_MT);
  return 1;
}

static int rng_uniform(lua_State *L) {
  icl_rng *r = check_rng(L);
  double u = icl_rng_uniform(r);
  if (lua_isnoneornil(L, 2)) {
    lua_pushnumber(L, u);
  } else {
    double lo = luaL_checknumber(L, 2), hi = luaL_checknumber(L, 3);
    lua_pushnumber(L, lo + (hi - lo) * u);
  }
  return 1;
}

/* A uniform integer of [lo, hi] (both inclusive); lo > hi raises an error naming argument `hi`. */
static lua_Integer rng_range(lua_State *L, icl_rng *r, lua_Integer lo, lua_Integer hi, int hi_arg) {
  if (hi < lo) luaL_argerror(L, hi_arg, "hi must be >= lo");
  uint64_t range = (uint64_t)hi - (uint64_t)lo + 1;
  return (lua_Integer)((uint64_t)lo + icl_rng_below(r, range));
}

static int rng_int(lua_State *L) {
  icl_rng *r = check_rng(L);
  lua_Integer lo = 1, hi = luaL_checkinteger(L, 2);
  if (!lua_isnoneornil(L, 3)) {
    lo = hi;
    hi = luaL_checkinteger(L, 3);
  }
  lua_pushinteger(L, rng_range(L, r, lo, hi, lua_isnoneornil(L, 3) ? 2 : 3));
  return 1;
}

static int rng_normal(lua_State *L) {
  icl_rng *r = check_rng(L);
  double mu = luaL_optnumber(L, 2, 0.0), sigma = luaL_optnumber(L, 3, 1.0);
  lua_pushnumber(L, mu + sigma * icl_rng_normal(r));
  return 1;
}

static int rng_choice(lua_State *L) {
  icl_rng *r = check_rng(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 2);
  if (n < 1) luaL_argerror(L, 2, "list is empty");
  lua_geti(L, 2, rng_range(L, r, 1, n, 2));
  return 1;
}

static int rng_shuffle(lua_State *L) {
  icl_rng *r = check_rng(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  for (lua_Integer i = luaL_len(L, 2); i > 1; i--) {
    lua_Integer j = rng_range(L, r, 1, i, 2);
    lua_geti(L, 2, i);
    lua_geti(L, 2, j);
    lua_seti(L, 2, i);
    lua_seti(L, 2, j);
  }
  lua_settop(L, 2);
  return 1;
}

static int rng_sample(lua_State *L) {
  icl_rng *r = check_rng(L);
  lua_Integer n = luaL_checkinteger(L, 2), k = luaL_checkinteger(L, 3);
  luaL_argcheck(L, n >= 0, 2, "n must be >= 0");
  luaL_argcheck(L, k >= 0 && k <= n, 3, "k must be in [0, n]");
  luaL_argcheck(L, k <= (1 << 28), 3, "k must be at most 2^28 (the result is a Lua list)");
  uint64_t *out = lua_newuserdatauv(L, (size_t)(k ? k : 1) * sizeof *out, 0); /* freed by the GC */
  if (icl_rng_sample(r, (uint64_t)n, (uint64_t)k, out) != 0) return luaL_error(L, "rng:sample: out of memory");
  lua_createtable(L, (int)k, 0);
  for (lua_Integer i = 0; i < k; i++) {
    lua_pushinteger(L, (lua_Integer)out[i] + 1);
    lua_seti(L, -2, i + 1);
  }
  return 1;
}

/* Reads a shape given as a table {d1, ...} or as integers from argument `arg` on. */
static int check_shape(lua_State *L, int arg, int64_t *shape) {
  int table = lua_istable(L, arg), ndim = table ? (int)icl_lua_seq_len(L, arg, arg, ICL_TENSOR_MAXDIM, "shape must have 1 to 4 dimensions")
                                          : lua_gettop(L) - arg + 1;
  luaL_argcheck(L, ndim >= 1 && ndim <= ICL_TENSOR_MAXDIM, arg, "shape must have 1 to 4 dimensions");
  for (int i = 0; i < ndim; i++) {
    int ok = 0;
    if (table) lua_geti(L, arg, i + 1);
    lua_Integer d = lua_tointegerx(L, table ? -1 : arg + i, &ok);
    if (table) lua_pop(L, 1);
    luaL_argcheck(L, ok && d >= 0, arg, "shape entries must be non-negative integers");
    shape[i] = d;
  }
  return ndim;
}

static int rng_fill_tensor(lua_State *L, int normal) {
  icl_rng *r = check_rng(L);
  int64_t shape[ICL_TENSOR_MAXDIM];
  int ndim = check_shape(L, 2, shape);
  icl_tensor *t = icl_tensor_new(ndim, shape);
  if (!t) return luaL_error(L, "rng: cannot allocate a tensor of that shape");
  for (int64_t i = 0; i < t->numel; i++) t->data[i] = (float)(normal ? icl_rng_normal(r) : icl_rng_uniform(r));
  icl_lua_push_tensor(L, t);
  return 1;
}

static int rng_normal_tensor(lua_State *L) { return rng_fill_tensor(L, 1); }
static int rng_uniform_tensor(lua_State *L) { return rng_fill_tensor(L, 0); }

static int rng_tostring(lua_State *L) {
  lua_pushfstring(L, "icl.rng (%p)", (void *)check_rng(L));
  return 1;
}

static const luaL_Reg rng_methods[] = {
    {"uniform", rng_uniform}, {"int", rng_int},         {"normal", rng_normal},
    {"choice", rng_choice},   {"shuffle", rng_shuffle}, {"sample", rng_sample},
    {"normal_tensor", rng_normal_tensor}, {"uniform_tensor", rng_uniform_tensor}, {NULL, NULL}};

int icl_lua_open_rng(lua_State *L) {
  if (luaL_newmetatable(L, RNG_MT)) {
    luaL_newlib(L, rng_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, rng_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, rng_new);
  lua_setfield(L, -2, "new");
  return 1;
}
