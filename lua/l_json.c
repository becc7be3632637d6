/* icl.json: deterministic JSON encoding (sorted keys, round-trip numbers, tensors as nested arrays) written here,
 * decoding through cJSON, and atomic file writes. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_tmp.h"
#include "icl_lua.h"
#include "text_safe.h"

#define BUF_MT "icl.json.buffer"
#define ARRAY_MT "icl.json.array"
#define OBJECT_MT "icl.json.object"
#define TREE_MT "icl.json.tree"
#define MAX_DEPTH 100

/* ---- output buffer (a userdata, so that an error raised halfway frees it through __gc) ------------------------ */

typedef struct strbuf {
  char *p;
  size_t n, cap;
} strbuf;

static int buf_gc(lua_State *L) {
  strbuf *b = luaL_checkudata(L, 1, BUF_MT);
  free(b->p);
  b->p = NULL;
  return 0;
}

static strbuf *push_buf(lua_State *L) {
  strbuf *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  if (luaL_newmetatable(L, BUF_MT)) {
    lua_pushcfunction(L, buf_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  return b;
}

static void buf_add(lua_State *L, strbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) luaL_error(L, "json.encode: out of memory");
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void buf_str(lua_State *L, strbuf *b, const char *s) { buf_add(L, b, s, strlen(s)); }

/* ---- encoding --------------------------------------------------------------------------------------------- */

typedef struct encoder {
  lua_State *L;
  strbuf *b;
  int indent;                   /* spaces per level; 0 = compact */
  int depth;                    /* containers entered */
  const char *key[MAX_DEPTH];   /* path to the value being encoded: key[i], or NULL and index[i], i < depth */
  lua_Integer index[MAX_DEPTH];
} encoder;

/* Raises "json.encode: <what> at $.a[3]". */
static void enc_error(encoder *e, const char *what) {
  luaL_Buffer path;
  luaL_buffinit(e->L, &path);
  luaL_addstring(&path, "$");
  for (int i = 0; i < e->depth; i++) {
    if (e->key[i]) lua_pushfstring(e->L, ".%s", e->key[i]);
    else lua_pushfstring(e->L, "[%I]", e->index[i]);
    luaL_addvalue(&path);
  }
  luaL_pushresult(&path);
  luaL_error(e->L, "json.encode: %s at %s", what, lua_tostring(e->L, -1));
}

static void newline(encoder *e, int depth) {
  if (!e->indent) return;
  buf_add(e->L, e->b, "\n", 1);
  for (int i = 0; i < depth * e->indent; i++) buf_add(e->L, e->b, " ", 1);
}

static void enc_string(encoder *e, const char *s, size_t n) {
  char esc[8];
  buf_add(e->L, e->b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *r = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                    : c == '\r' ? "\\r" : NULL;
    if (!r && c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c), r = esc;
    size_t k = c < 0x80 ? 1 : icl_utf8_seq((const unsigned char *)s + i, n - i);
    if (!k) r = "\\ufffd"; /* invalid UTF-8 (JSON readers refuse it): the replacement character */
    if (r) buf_str(e->L, e->b, r);
    else buf_add(e->L, e->b, s + i, k);
    i += k ? k - 1 : 0;
  }
  buf_add(e->L, e->b, "\"", 1);
}

/* The shortest %.Ng (N from lo to hi) that reads back as v (as a float when single), with ".0" added to
 * integral values so that readers keep them floating point; NaN and infinities become null. */
static void enc_float(encoder *e, double v, int single) {
  char s[40];
  if (!isfinite(v)) return buf_str(e->L, e->b, "null");
  for (int prec = single ? 6 : 15; prec <= (single ? 9 : 17); prec++) {
    snprintf(s, sizeof s, "%.*g", prec, v);
    if (single ? strtof(s, NULL) == (float)v : strtod(s, NULL) == v) break;
  }
  if (!strpbrk(s, ".eEn")) strcat(s, ".0");
  buf_str(e->L, e->b, s);
}

static void enc_value(encoder *e, int idx);

/* Elements of a tensor from offset off along dimension dim (innermost rows on one line). */
static void enc_tensor_dim(encoder *e, const icl_tensor *t, int dim, int64_t off, int depth) {
  int64_t n = t->shape[dim], stride = 1;
  for (int d = dim + 1; d < t->ndim; d++) stride *= t->shape[d];
  int inner = dim == t->ndim - 1;
  buf_add(e->L, e->b, "[", 1);
  for (int64_t i = 0; i < n; i++) {
    if (i) buf_str(e->L, e->b, inner && e->indent ? ", " : ",");
    if (inner) {
      enc_float(e, t->data[off + i], 1);
    } else {
      newline(e, depth + 1);
      enc_tensor_dim(e, t, dim + 1, off + i * stride, depth + 1);
    }
  }
  if (!inner && n) newline(e, depth);
  buf_add(e->L, e->b, "]", 1);
}

static void enc_tensor(encoder *e, const icl_tensor *t) {
  if (t->ndim == 0) enc_float(e, t->data[0], 1);
  else enc_tensor_dim(e, t, 0, 0, e->depth);
}

/* Length n when the table at idx is a sequence 1..n holding every key, else -1. */
static lua_Integer array_length(lua_State *L, int idx) {
  lua_Integer n = 0, count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
      lua_pop(L, 1);
      return -1;
    }
    if (lua_tointeger(L, -1) > n) n = lua_tointeger(L, -1);
    count++;
  }
  return n == count ? n : -1;
}

/* Whether every element of the array at idx is a scalar (then it goes on one line). */
static int flat_array(lua_State *L, int idx, lua_Integer n) {
  int flat = 1;
  for (lua_Integer i = 1; i <= n && flat; i++) {
    int t = lua_geti(L, idx, i);
    flat = t != LUA_TTABLE && !icl_lua_test_tensor(L, -1);
    lua_pop(L, 1);
  }
  return flat;
}

/* Encodes the value on top of the stack as element `key` / `index` of the current container, and pops it. */
static void enc_member(encoder *e, const char *key, lua_Integer index) {
  e->key[e->depth] = key, e->index[e->depth] = index;
  e->depth++;
  enc_value(e, lua_gettop(e->L));
  e->depth--;
  lua_pop(e->L, 1);
}

static void enc_array(encoder *e, int idx, lua_Integer n) {
  lua_State *L = e->L;
  int flat = flat_array(L, idx, n);
  buf_add(L, e->b, "[", 1);
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) buf_str(L, e->b, flat && e->indent ? ", " : ",");
    if (!flat) newline(e, e->depth + 1);
    lua_geti(L, idx, i);
    enc_member(e, NULL, i);
  }
  if (!flat && n) newline(e, e->depth);
  buf_add(L, e->b, "]", 1);
}

static int cmp_keys(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Pushes a table mapping each key's string form to the key, and returns the sorted string forms in a userdata
 * array (left on the stack above the map). */
static const char **sorted_keys(encoder *e, int idx, lua_Integer *n) {
  lua_State *L = e->L;
  lua_newtable(L);
  int map = lua_gettop(L);
  *n = 0;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    int kt = lua_type(L, -2);
    if (kt != LUA_TSTRING && kt != LUA_TNUMBER) enc_error(e, "object keys must be strings or numbers");
    lua_pushvalue(L, -2);
    const char *s = lua_tostring(L, -1); /* converts the copy only */
    if (lua_getfield(L, map, s) != LUA_TNIL) enc_error(e, lua_pushfstring(L, "two keys read as \"%s\"", s));
    lua_pop(L, 1);
    lua_pushvalue(L, -3);
    lua_setfield(L, map, s);
    lua_pop(L, 1);
    (*n)++;
  }
  const char **keys = lua_newuserdatauv(L, (size_t)(*n + 1) * sizeof *keys, 0);
  lua_Integer i = 0;
  for (lua_pushnil(L); lua_next(L, map); lua_pop(L, 1)) keys[i++] = lua_tostring(L, -2);
  qsort(keys, (size_t)*n, sizeof *keys, cmp_keys);
  return keys;
}

static void enc_object(encoder *e, int idx) {
  lua_State *L = e->L;
  lua_Integer n;
  const char **keys = sorted_keys(e, idx, &n);
  int map = lua_gettop(L) - 1;
  buf_add(L, e->b, "{", 1);
  for (lua_Integer i = 0; i < n; i++) {
    if (i) buf_add(L, e->b, ",", 1);
    newline(e, e->depth + 1);
    enc_string(e, keys[i], strlen(keys[i]));
    buf_str(L, e->b, e->indent ? ": " : ":");
    lua_getfield(L, map, keys[i]);
    lua_rawget(L, idx);
    enc_member(e, keys[i], 0);
  }
  if (n) newline(e, e->depth);
  buf_add(L, e->b, "}", 1);
  lua_pop(L, 2);
}

/* Which JSON container a table is: 1 array (n elements), 0 object. Empty tables are arrays unless marked by
 * json.object(); json.array() forces an array. */
static int table_kind(encoder *e, int idx, lua_Integer *n) {
  *n = array_length(e->L, idx);
  int marked = 0;
  if (luaL_getmetafield(e->L, idx, "__name") != LUA_TNIL) {
    const char *name = lua_tostring(e->L, -1);
    marked = name && strcmp(name, OBJECT_MT) == 0 ? 2 : name && strcmp(name, ARRAY_MT) == 0 ? 1 : 0;
    lua_pop(e->L, 1);
  }
  if (marked == 2) return 0;
  if (marked == 1 && *n < 0) enc_error(e, "a table marked json.array has non-sequence keys");
  return *n >= 0;
}

static void enc_table(encoder *e, int idx) {
  if (e->depth >= MAX_DEPTH - 1) enc_error(e, "tables nested too deep (a cycle?)");
  luaL_checkstack(e->L, 8, "json.encode: tables nested too deep");
  lua_Integer n;
  if (table_kind(e, idx, &n)) enc_array(e, idx, n);
  else enc_object(e, idx);
}

static void enc_value(encoder *e, int idx) {
  lua_State *L = e->L;
  icl_tensor *t;
  switch (lua_type(L, idx)) {
  case LUA_TNIL: buf_str(L, e->b, "null"); break;
  case LUA_TBOOLEAN: buf_str(L, e->b, lua_toboolean(L, idx) ? "true" : "false"); break;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      char s[32];
      snprintf(s, sizeof s, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, idx));
      buf_str(L, e->b, s);
    } else {
      enc_float(e, lua_tonumber(L, idx), 0);
    }
    break;
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    enc_string(e, s, n);
    break;
  }
  case LUA_TTABLE: enc_table(e, idx); break;
  case LUA_TLIGHTUSERDATA:
    if (lua_touserdata(L, idx) != NULL) enc_error(e, "cannot encode a light userdata");
    buf_str(L, e->b, "null"); /* json.null */
    break;
  default:
    if ((t = icl_lua_test_tensor(L, idx)) != NULL) {
      enc_tensor(e, t);
      break;
    }
    enc_error(e, lua_pushfstring(L, "cannot encode a %s", luaL_typename(L, idx)));
  }
}

/* Indentation from an options table at arg: {indent = true} (2 spaces) or {indent = n}; def when absent. */
static int opt_indent(lua_State *L, int arg, int def) {
  if (lua_isnoneornil(L, arg)) return def;
  luaL_checktype(L, arg, LUA_TTABLE);
  int t = lua_getfield(L, arg, "indent"), v = def;
  if (t == LUA_TBOOLEAN) v = lua_toboolean(L, -1) ? 2 : 0;
  else if (t != LUA_TNIL) v = (int)luaL_checkinteger(L, -1);
  lua_pop(L, 1);
  luaL_argcheck(L, v >= 0 && v <= 16, arg, "indent must be a boolean or 0..16");
  return v;
}

/* Encodes the value at idx into a new buffer userdata left on the stack. */
static strbuf *encode_to_buf(lua_State *L, int idx, int indent) {
  idx = lua_absindex(L, idx);
  strbuf *b = push_buf(L);
  encoder e = {L, b, indent, 0, {NULL}, {0}};
  enc_value(&e, idx);
  return b;
}

static int json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  strbuf *b = encode_to_buf(L, 1, opt_indent(L, 2, 0));
  lua_pushlstring(L, b->p ? b->p : "", b->n);
  return 1;
}

/* ---- decoding --------------------------------------------------------------------------------------------- */

static void push_json(lua_State *L, const cJSON *j, int depth);

static void push_number(lua_State *L, double v) {
  if (v == floor(v) && fabs(v) < 9007199254740992.0) lua_pushinteger(L, (lua_Integer)v);
  else lua_pushnumber(L, v);
}

static void push_container(lua_State *L, const cJSON *j, int depth) {
  int is_array = cJSON_IsArray(j), i = 0;
  lua_createtable(L, is_array ? cJSON_GetArraySize(j) : 0, is_array ? 0 : cJSON_GetArraySize(j));
  for (const cJSON *c = j->child; c; c = c->next) {
    push_json(L, c, depth + 1);
    if (is_array) lua_seti(L, -2, ++i);
    else lua_setfield(L, -2, c->string);
  }
  if (!is_array && !j->child) luaL_setmetatable(L, OBJECT_MT); /* keeps {} an object on re-encoding */
}

static void push_json(lua_State *L, const cJSON *j, int depth) {
  luaL_checkstack(L, 4, "json.decode: nested too deep");
  if (cJSON_IsNull(j)) lua_pushlightuserdata(L, NULL);
  else if (cJSON_IsFalse(j)) lua_pushboolean(L, 0);
  else if (cJSON_IsTrue(j)) lua_pushboolean(L, 1);
  else if (cJSON_IsNumber(j)) push_number(L, j->valuedouble);
  else if (cJSON_IsString(j)) lua_pushstring(L, j->valuestring);
  else push_container(L, j, depth);
}

static int tree_gc(lua_State *L) {
  cJSON **j = luaL_checkudata(L, 1, TREE_MT);
  cJSON_Delete(*j);
  *j = NULL;
  return 0;
}

/* Decodes s (n bytes): pushes the value, or nil and a message; returns the number of values pushed. The cJSON
 * tree sits in a userdata while it is converted, so that an error raised meanwhile still frees it. */
static int decode_string(lua_State *L, const char *s, size_t n, const char *where) {
  cJSON **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  if (luaL_newmetatable(L, TREE_MT)) {
    lua_pushcfunction(L, tree_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  const char *end = NULL;
  *box = cJSON_ParseWithLengthOpts(s, n, &end, 0);
  if (!*box) {
    size_t at = end && end >= s ? (size_t)(end - s) : 0;
    lua_pushnil(L);
    lua_pushfstring(L, "%s: invalid JSON near byte %d", where, (int)at + 1);
    return 2;
  }
  push_json(L, *box, 0);
  cJSON_Delete(*box);
  *box = NULL;
  return 1;
}

static int json_decode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  return decode_string(L, s, n, "json.decode");
}

/* ---- files ------------------------------------------------------------------------------------------------ */

static int push_fail(lua_State *L, const char *path, const char *what) {
  lua_pushnil(L);
  lua_pushfstring(L, "%s: %s: %s", path, what, strerror(errno));
  return 2;
}

/* Creates the directories above the file at path (mkdir -p of its dirname); 0 or -1 with errno. */
static int make_parents(lua_State *L, const char *path) {
  size_t len = strlen(path);
  char *buf = lua_newuserdatauv(L, len + 1, 0);
  memcpy(buf, path, len + 1); /* left on the stack: freed with the call's frame */
  for (char *s = buf + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
    *s = '/';
  }
  return 0;
}

int icl_lua_write_atomic(lua_State *L, const char *path, const char *data, size_t n) {
  size_t cap = strlen(path) + 32;
  char *tmp = lua_newuserdatauv(L, cap, 0);
  icl_error terr;
  int fd = icl_tmp_create(path, tmp, cap, &terr); /* also removes orphans of killed writers */
  if (fd < 0) return push_fail(L, path, "cannot create a temporary file");
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  int bad = done < n, saved = errno;
  if (close(fd) != 0 && !bad) bad = 1, saved = errno;
  if (!bad && rename(tmp, path) != 0) bad = 1, saved = errno;
  if (bad) {
    unlink(tmp);
    errno = saved;
    return push_fail(L, path, "cannot write");
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* json.write(path, value, opts): indented by default; a final newline; true or nil, message. */
static int json_write(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_checkany(L, 2);
  strbuf *b = encode_to_buf(L, 2, opt_indent(L, 3, 2));
  buf_add(L, b, "\n", 1);
  if (make_parents(L, path) != 0) return push_fail(L, path, "cannot create its directory");
  return icl_lua_write_atomic(L, path, b->p, b->n);
}

/* json.read(path): the value, or nil and a message (missing file, invalid JSON). */
static int json_read(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  icl_error ferr;
  if (icl_lua_read_file(L, path, &ferr)) {
    luaL_pushfail(L);
    lua_pushstring(L, ferr.msg);
    return 2;
  }
  size_t n;
  const char *s = lua_tolstring(L, -1, &n);
  return decode_string(L, s, n, path);
}

/* ---- markers ---------------------------------------------------------------------------------------------- */

static int mark(lua_State *L, const char *mt) {
  if (lua_isnoneornil(L, 1)) lua_newtable(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  luaL_setmetatable(L, mt);
  return 1;
}

static int json_array(lua_State *L) { return mark(L, ARRAY_MT); }
static int json_object(lua_State *L) { return mark(L, OBJECT_MT); }

static const luaL_Reg json_funcs[] = {{"encode", json_encode}, {"decode", json_decode}, {"write", json_write},
                                      {"read", json_read},     {"array", json_array},   {"object", json_object},
                                      {NULL, NULL}};

int icl_lua_open_json(lua_State *L) {
  luaL_newmetatable(L, ARRAY_MT);
  luaL_newmetatable(L, OBJECT_MT);
  lua_pop(L, 2);
  luaL_newlib(L, json_funcs);
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  return 1;
}
