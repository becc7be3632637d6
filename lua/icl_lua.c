/* The Lua runtime of icl: state creation with the `icl` table and its modules, protected calls with a traceback
 * and Ctrl-C, and running script files. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lualib.h>

#include "icl/icl.h"
#include "icl_lua.h"
#include "file_read.h"
#include "l_embed.h"
#include "repl.h"

/* Per-state data, reached through the state's extra space (shared by its coroutines). */
typedef struct icl_lua_extra {
  volatile int interrupt;
} icl_lua_extra;

int icl_lua_result(lua_State *L, int rc, const icl_error *err) {
  if (rc == ICL_OK) return 0;
  if (rc == ICL_EINVAL || rc == ICL_EINTR) return luaL_error(L, "%s", err->msg);
  luaL_pushfail(L);
  lua_pushstring(L, err->msg);
  return 2;
}

volatile int *icl_lua_interrupt_flag(lua_State *L) {
  static icl_lua_extra unused; /* for a state icl_lua_new_state did not make */
  icl_lua_extra *x = *(icl_lua_extra **)lua_getextraspace(L);
  return x ? &x->interrupt : &unused.interrupt;
}

/* ---- Ctrl-C ---------------------------------------------------------------------------------------------- */

static lua_State *volatile sig_state; /* the state a SIGINT interrupts, while icl_lua_docall runs */

static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  *icl_lua_interrupt_flag(L) = 0;
  luaL_error(L, "interrupted");
}

/* Only sets the flag (model runs poll it between chunks) and a hook (Lua code stops at its next instruction). */
static void on_sigint(int sig) {
  signal(sig, SIG_DFL); /* a second Ctrl-C ends the process */
  lua_State *L = sig_state;
  if (!L) return;
  *icl_lua_interrupt_flag(L) = 1;
  lua_sethook(L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* Message handler: the message (or a description of a non-string error) followed by a traceback. */
static int msghandler(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

int icl_lua_docall(lua_State *L, int narg, int nres) {
  int base = lua_gettop(L) - narg;
  lua_pushcfunction(L, msghandler);
  lua_insert(L, base);
  *icl_lua_interrupt_flag(L) = 0;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sig_state = L;
  sigaction(SIGINT, &sa, &old);
  int status = lua_pcall(L, narg, nres, base);
  sigaction(SIGINT, &old, NULL);
  sig_state = NULL;
  lua_sethook(L, NULL, 0, 0);
  *icl_lua_interrupt_flag(L) = 0;
  lua_remove(L, base);
  return status;
}

int icl_lua_report(lua_State *L, int status) {
  if (status == LUA_OK) return status;
  const char *msg = lua_tostring(L, -1);
  fflush(stdout);
  fprintf(stderr, "%s\n", msg ? msg : "(error object is not a string)");
  fflush(stderr);
  lua_pop(L, 1);
  return status;
}

/* ---- script files ---------------------------------------------------------------------------------------- */

/* arg as the stock interpreter sets it: arg[0] the script, arg[1..] its arguments, arg[-1] "script",
 * arg[-2] the program. */
static void set_arg(lua_State *L, int argc, char **argv) {
  lua_createtable(L, argc, 2);
  lua_pushstring(L, program_invocation_name);
  lua_rawseti(L, -2, -2);
  lua_pushliteral(L, "script");
  lua_rawseti(L, -2, -1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  lua_setglobal(L, "arg");
}

int icl_lua_run_file(lua_State *L, const char *path, int argc, char **argv) {
  set_arg(L, argc, argv);
  icl_error err;
  int fd = strcmp(path, "-") ? icl_file_open_read(path, NULL, &err) : -2; /* a FIFO would block forever */
  if (fd == -1) {
    fprintf(stderr, "icl: %s\n", err.msg);
    return 1;
  }
  if (fd >= 0) close(fd);
  int status = luaL_loadfile(L, strcmp(path, "-") ? path : NULL);
  if (status == LUA_OK) {
    luaL_checkstack(L, argc + 1, "too many arguments to the script");
    for (int i = 1; i < argc; i++) lua_pushstring(L, argv[i]); /* also passed as ... */
    status = icl_lua_docall(L, argc > 0 ? argc - 1 : 0, 0);
  }
  return icl_lua_report(L, status) == LUA_OK ? 0 : 1;
}

/* ---- modules --------------------------------------------------------------------------------------------- */

/* package.preload loader of embedded module number upvalue 1. */
static int embedded_loader(lua_State *L) {
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(1));
  const char *name = icl_lua_embedded_names[i];
  const char *chunk = lua_pushfstring(L, "@lua/icl/%s.lua", name + 4); /* "icl.graph" -> lua/icl/graph.lua */
  if (luaL_loadbuffer(L, icl_lua_embedded_sources[i], icl_lua_embedded_sizes[i], chunk) != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, name);
  lua_pushvalue(L, 2); /* the loader data require passes */
  lua_call(L, 2, 1);
  return 1;
}

static void preload_embedded(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (lua_Integer i = 0; icl_lua_embedded_names[i]; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, embedded_loader, 1);
    lua_setfield(L, -2, icl_lua_embedded_names[i]);
  }
  lua_pop(L, 1);
}

/* icl.<name> for an embedded module not yet required: requires it (once) and caches it in icl. */
static int icl_index(lua_State *L) {
  if (lua_type(L, 2) != LUA_TSTRING) return 0;
  const char *full = lua_pushfstring(L, "icl.%s", lua_tostring(L, 2));
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  if (lua_getfield(L, -1, full) == LUA_TNIL) return 0;
  lua_getglobal(L, "require");
  lua_pushstring(L, full);
  lua_call(L, 1, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

/* Opens a module as package.loaded["icl.<name>"] and sets icl.<name> (icl table on top). */
static void add_module(lua_State *L, const char *name, lua_CFunction open) {
  char full[64];
  snprintf(full, sizeof full, "icl.%s", name);
  luaL_requiref(L, full, open, 0);
  lua_setfield(L, -2, name);
}

/* Copies every field of the table on top into the table below it and pops it. */
static void merge_fields(lua_State *L) {
  lua_pushnil(L);
  while (lua_next(L, -2)) { /* icl, module, key, value */
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_settable(L, -5); /* icl[key] = value; leaves the key for lua_next */
  }
  lua_pop(L, 1);
}

static int open_all(lua_State *L) {
  icl_lua_extra *x = lua_newuserdatauv(L, sizeof *x, 0);
  x->interrupt = 0;
  *(icl_lua_extra **)lua_getextraspace(L) = x;
  lua_setfield(L, LUA_REGISTRYINDEX, "icl.extra");
  luaL_openlibs(L);
  preload_embedded(L);

  lua_newtable(L); /* icl */
  lua_pushliteral(L, ICL_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushcfunction(L, icl_lua_clock);
  lua_setfield(L, -2, "clock");
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, icl_index);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "icl");
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "icl");
  lua_pop(L, 1);

  add_module(L, "tensor", icl_lua_open_tensor);
  luaL_requiref(L, "icl.model", icl_lua_open_model, 0); /* icl.load, icl.devices */
  merge_fields(L);
  luaL_requiref(L, "icl.trainer", icl_lua_open_train, 0); /* icl.train, icl.nn, icl.optim, icl.data */
  merge_fields(L);
  static const struct { const char *name; lua_CFunction open; } libs[] = {
      {"rng", icl_lua_open_rng},   {"linalg", icl_lua_open_linalg},     {"plot", icl_lua_open_plot},
      {"json", icl_lua_open_json}, {"progress", icl_lua_open_progress}, {"fs", icl_lua_open_fs},
      {"htmlcodec", icl_lua_open_htmlcodec}};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) add_module(L, libs[i].name, libs[i].open);
  icl_lua_add_data_meta(L); /* icl.data.meta_learning, after icl.data exists */
  lua_pop(L, 1);
  return 0;
}

lua_State *icl_lua_new_state(void) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "icl: cannot create a Lua state (out of memory)\n");
    return NULL;
  }
  lua_pushcfunction(L, open_all);
  if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
    fprintf(stderr, "icl: cannot open the Lua libraries: %s\n", lua_tostring(L, -1));
    lua_close(L);
    return NULL;
  }
  return L;
}

int icl_lua_read_file(lua_State *L, const char *path, icl_error *err) {
  FILE *f = icl_file_fopen_read(path, err); /* regular files only: a FIFO would block the script */
  if (!f) return ICL_EIO;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  size_t got;
  do {
    char *p = luaL_prepbuffer(&b);
    got = fread(p, 1, LUAL_BUFFERSIZE, f);
    luaL_addsize(&b, got);
  } while (got == LUAL_BUFFERSIZE);
  int bad = ferror(f), e = errno;
  fclose(f);
  luaL_pushresult(&b);
  if (!bad) return ICL_OK;
  lua_pop(L, 1);
  return icl_error_set(err, ICL_EIO, "%s: cannot read: %s", path, strerror(e));
}
