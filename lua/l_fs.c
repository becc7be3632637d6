/* icl.fs: the folder operations scripts need, without a shell (a path is never pasted into a command line):
 * make_dirs, list, remove (never following a symbolic link), is_dir. Thin over src/file_tmp.c and src/file_tree.c. */
#include <stdlib.h>
#include <string.h>

#include "file_tmp.h"
#include "file_tree.h"
#include "icl_lua.h"

/* The path argument: a string without an embedded NUL (which would silently cut it). */
static const char *check_path(lua_State *L, int arg) {
  size_t len;
  const char *p = luaL_checklstring(L, arg, &len);
  luaL_argcheck(L, strlen(p) == len, arg, "path holds a NUL byte");
  luaL_argcheck(L, len > 0, arg, "path is empty");
  return p;
}

/* Pushes true, or fail and the message: the expected failures of a file operation. */
static int result(lua_State *L, int rc, const icl_error *err) {
  if (rc == ICL_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  luaL_pushfail(L);
  lua_pushstring(L, err->msg);
  return 2;
}

/* icl.fs.make_dirs(path): creates the folder and those above it (mkdir -p); true, or nil and a message. */
static int fs_make_dirs(lua_State *L) {
  icl_error err = {0};
  return result(L, icl_make_dirs(check_path(L, 1), &err), &err);
}

/* icl.fs.remove(path): removes a file, a link or a whole folder without following links; true (also when nothing
 * was there) and whether something was removed, or nil and a message. */
static int fs_remove(lua_State *L) {
  icl_error err = {0};
  int removed = 0, rc = icl_remove_tree(check_path(L, 1), &removed, &err);
  if (rc == ICL_EINVAL) return luaL_argerror(L, 1, err.msg);
  int n = result(L, rc, &err);
  if (rc == ICL_OK) lua_pushboolean(L, removed), n++;
  return n;
}

/* icl.fs.list(path): the folder's entry names, sorted, without "." and ".."; or nil and a message. */
static int fs_list(lua_State *L) {
  icl_error err = {0};
  char **names;
  size_t n;
  if (icl_list_dir(check_path(L, 1), &names, &n, &err)) return result(L, ICL_EIO, &err);
  if (!lua_checkstack(L, 4) || n > 0x7fffffff) {
    icl_free_names(names, n);
    return luaL_error(L, "icl.fs.list: too many entries");
  }
  lua_createtable(L, (int)n, 0); /* may raise only on memory errors: names leak then */
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  icl_free_names(names, n);
  return 1;
}

/* icl.fs.is_dir(path): whether path is a folder (a link to one counts). */
static int fs_is_dir(lua_State *L) {
  lua_pushboolean(L, icl_is_dir(check_path(L, 1)));
  return 1;
}

int icl_lua_open_fs(lua_State *L) {
  static const luaL_Reg fns[] = {
      {"make_dirs", fs_make_dirs}, {"remove", fs_remove}, {"list", fs_list}, {"is_dir", fs_is_dir}, {NULL, NULL}};
  luaL_newlib(L, fns);
  return 1;
}
