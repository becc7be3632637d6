/* Runs tests/lua/hostile_model.lua (hostile Lua input that needs a model) against a tiny random model written
 * here, so it needs no model file and runs under the sanitizers. Then checks the capture memory limit message
 * for a small limit (ICL_MAX_CAPTURE_BYTES). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl_lua.h"
#include "testmodel.h"
#include "testutil.h"

static int run_chunk(lua_State *L, const char *code, const char *name) {
  int rc = luaL_loadbuffer(L, code, strlen(code), name) || lua_pcall(L, 0, 0, 0);
  if (rc) fprintf(stderr, "%s: %s\n", name, lua_tostring(L, -1));
  return rc;
}

int main(void) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-hostile-lua-%d.gguf", (int)getpid());
  icl_tiny_spec sp = {.arch = "llama", .wtype = ICL_TYPE_Q8_0, .seed = 11};
  icl_error e = {0};
  if (icl_write_tiny_model(path, &sp, &e)) {
    fprintf(stderr, "cannot write the tiny model: %s\n", e.msg);
    return 1;
  }
  lua_State *L = icl_lua_new_state();
  CHECK(L != NULL);
  if (!L) return t_done();
  lua_pushstring(L, path);
  lua_setglobal(L, "TINY");
  int rc = luaL_dofile(L, t_src_path("tests/lua/hostile_model.lua"));
  CHECKF(rc == LUA_OK, "hostile_model.lua: %s", rc ? lua_tostring(L, -1) : "");
  setenv("ICL_MAX_CAPTURE_BYTES", "100", 1); /* a tiny limit: the message must show bytes, not "0.00 GiB" */
  CHECK(run_chunk(L,
                  "local m = assert(icl.load(TINY, {backend = 'cpu'}))\n"
                  "local r, e = m:run({1, 2, 3, 4}, {capture = {'blocks.0.hook_resid_post'}})\n"
                  "assert(r == nil, 'ran above the capture limit')\n"
                  "assert(e:find('need 4096 bytes of host memory, above the limit of 100 bytes', 1, true), e)\n",
                  "=capture limit") == LUA_OK);
  unsetenv("ICL_MAX_CAPTURE_BYTES");
  lua_close(L);
  unlink(path);
  return t_done();
}
