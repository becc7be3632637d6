/* libFuzzer target: runs the input as a Lua chunk against the icl binding (tensors, a tiny random model, graph,
 * metrics, json, npy and safetensors files) in a fresh state per input, so that any binding path a script can
 * reach is checked by ASan and UBSan. Lua errors are expected results; only crashes and sanitizer reports count.
 * Limits keep every input short and harmless: an instruction-count hook, a memory cap on the Lua allocator, a
 * small tensor bound, text chunks only, and no os/io/file loaders (files are written under a scratch directory
 * only, by plain names). Globals for the snippet: TINY (model path), NPY and ST (small tensor files). */
#include <errno.h>
#include <ftw.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "icl/tensor.h"
#include "icl_lua.h"
#include "tensor_ops.h"
#include "testmodel.h"

#define MAX_INSTRUCTIONS 2000000 /* per input, counted in steps of 1000 */
#define MAX_LUA_BYTES (256u << 20)
#define MAX_TENSOR_NUMEL (1 << 20) /* 4 MiB of floats per tensor: a matmul of two stays under a second */

static char dir[4096], tiny[4200], npy[4200], st[4200];

typedef struct alloc_state {
  size_t used;
} alloc_state;

/* The Lua allocator with a cap: realloc/free underneath, so blocks made before it was set stay valid. */
static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  alloc_state *a = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    a->used -= old;
    free(ptr);
    return NULL;
  }
  if (nsize > old && a->used + (nsize - old) > MAX_LUA_BYTES) return NULL;
  void *p = realloc(ptr, nsize);
  if (p) a->used = a->used - old + nsize;
  return p;
}

static long steps; /* thousands of instructions run by the current input (all its coroutines) */

static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (++steps * 1000 > MAX_INSTRUCTIONS) luaL_error(L, "fuzz: instruction limit");
}

/* The sandbox, run before each input: wraps writers and icl.load, removes what reaches outside the process. */
static const char PRELUDE[] =
    "local TINY = ...\n"
    "local function plain(p) return type(p) ~= 'string' or (p:match('^[%w_%-][%w_%-%.]*$') ~= nil) end\n"
    "local function refuse(p) if not plain(p) then error('fuzz: path refused: ' .. tostring(p)) end end\n"
    "local reg = debug.getregistry()\n"
    "local _, tm = debug.getupvalue(reg['icl.tensor'].__index, 1)\n"
    "local save = tm.save\n"
    "tm.save = function(t, p, ...) refuse(p) return save(t, p, ...) end\n"
    "local sst = icl.tensor.save_safetensors\n"
    "icl.tensor.save_safetensors = function(p, ...) refuse(p) return sst(p, ...) end\n"
    "local jw = icl.json.write\n"
    "icl.json.write = function(p, ...) refuse(p) return jw(p, ...) end\n"
    "local hw = icl.htmlcodec.write\n" /* icl.html's views and the experiments' index pages */
    "icl.htmlcodec.write = function(p, ...) refuse(p) return hw(p, ...) end\n"
    "local fig = reg['icl.figure']\n"
    "if fig then local fs = fig.__index.save fig.__index.save = function(f, p, ...) refuse(p) return fs(f, p, ...) end end\n"
    "local load_model = icl.load\n"
    "icl.load = function(p, o)\n"
    "  if type(o) ~= 'table' then o = {} end\n"
    "  o.backend = 'cpu'; o.threads = 1; o.device = nil\n"
    "  if math.type(o.n_ctx) ~= 'integer' or o.n_ctx > 256 or o.n_ctx < 1 then o.n_ctx = 64 end\n"
    "  if type(p) ~= 'string' or not plain(p) then p = TINY end\n"
    "  return load_model(p, o)\n"
    "end\n"
    "icl.devices = nil\n"
    "icl.fs, package.loaded['icl.fs'] = nil, nil\n"
    "local real_load = load\n"
    "load = function(c, n, m, e) return real_load(c, n, 't', e) end\n"
    "print = function() end\n"
    "dofile, loadfile = nil, nil\n"
    "package.loadlib, package.path, package.cpath = nil, '', ''\n"
    "package.searchers = {package.searchers[1]}\n"
    "os = {time = os.time, clock = os.clock, getenv = os.getenv}\n"
    "io = nil\n"
    "debug = nil\n";

static int remove_entry(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  return remove(p);
}

/* At exit: the scratch directory and whatever the snippets wrote there. */
static void remove_scratch(void) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void write_fixtures(void) {
  snprintf(dir, sizeof dir, "/tmp/icl-fuzz-lua.%ld", (long)getpid());
  if (mkdir(dir, 0700) && errno != EEXIST) abort();
  snprintf(tiny, sizeof tiny, "%s/tiny.gguf", dir);
  snprintf(npy, sizeof npy, "%s/t.npy", dir);
  snprintf(st, sizeof st, "%s/t.safetensors", dir);
  icl_error err = {0};
  icl_tiny_spec spec = {.arch = "llama", .seed = 1, .d = 64, .n_head = 2, .n_head_kv = 1, .head_dim = 32, .ff = 128};
  int64_t shape[2] = {3, 4};
  icl_tensor *t = icl_tensor_new(2, shape);
  for (int i = 0; t && i < 12; i++) t->data[i] = (float)i - 5.5f;
  const char *names[1] = {"x"};
  const icl_tensor *ts[1] = {t};
  if (!t || icl_write_tiny_model(tiny, &spec, &err) || icl_tensor_save_npy(t, npy, &err) ||
      icl_tensor_save_safetensors(st, 1, names, ts, &err)) {
    fprintf(stderr, "fuzz_lua: cannot write fixtures: %s\n", err.msg);
    abort();
  }
  icl_tensor_free(t);
  if (chdir(dir)) abort(); /* files the snippets write land here */
  atexit(remove_scratch);
}

int LLVMFuzzerInitialize(int *argc, char **argv[]) {
  (void)argc, (void)argv;
  write_fixtures();
  icl_tensor_limit_numel(MAX_TENSOR_NUMEL);
  setenv("ICL_BACKEND", "cpu", 1);
  return 0;
}

/* Creates the sandboxed state; NULL if the prelude failed (a bug in this file: abort). */
static lua_State *new_state(alloc_state *a) {
  lua_State *L = icl_lua_new_state();
  if (!L) abort();
  a->used = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
  lua_setallocf(L, capped_alloc, a);
  if (luaL_loadbuffer(L, PRELUDE, sizeof PRELUDE - 1, "=prelude") != LUA_OK) abort();
  lua_pushstring(L, tiny);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "fuzz_lua: prelude: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_pushstring(L, tiny), lua_setglobal(L, "TINY");
  lua_pushstring(L, npy), lua_setglobal(L, "NPY");
  lua_pushstring(L, st), lua_setglobal(L, "ST");
  return L;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  alloc_state a;
  lua_State *L = new_state(&a);
  steps = 0;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000);
  if (luaL_loadbufferx(L, (const char *)data, size, "=input", "t") == LUA_OK) lua_pcall(L, 0, 0, 0);
  lua_close(L); /* the hook stays: finalizers the input set are limited too */
  return 0;
}
