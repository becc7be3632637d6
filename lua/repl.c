/* The interactive REPL: read a line, try it as `return <line>` (printing the values), else as a statement,
 * reading more lines while the chunk is incomplete; errors print with a traceback and the loop goes on.
 * On a terminal: GNU readline with history (~/.icl_history or $ICL_HISTORY) and Ctrl-C clearing the line;
 * otherwise plain lines without prompts. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <readline/history.h>
#include <readline/readline.h>

#include "icl/icl.h"
#include "icl_lua.h"
#include "repl.h"

#define PROMPT "> "
#define PROMPT2 ">> "
#define HISTORY_MAX 1000
#define CANCELLED (-1) /* read_chunk: Ctrl-C at the prompt */
#define END (-2)       /* read_chunk: end of input */

typedef struct repl {
  lua_State *L;
  int tty;
  char history[4096]; /* history file, "" for none */
  int failed;
} repl;

/* ---- printing values ------------------------------------------------------------------------------------- */

/* Prints its arguments separated by tabs: tables nested and sorted (depth and length limited), strings at the top
 * level as they are, everything else through tostring (tensors show shape and a preview). */
static const char PRINTER[] =
    "local maxdepth, maxitems = 4, 40\n"
    "local function order(a, b)\n"
    "  local ta, tb = type(a), type(b)\n"
    "  if ta ~= tb then return ta < tb end\n"
    "  if ta == 'number' or ta == 'string' then return a < b end\n"
    "  return tostring(a) < tostring(b)\n"
    "end\n"
    "local repr\n"
    "local function key(k)\n"
    "  if type(k) == 'string' and k:match('^[%a_][%w_]*$') then return k end\n"
    "  return '[' .. repr(k, maxdepth, {}, '') .. ']'\n"
    "end\n"
    "repr = function(v, depth, seen, indent)\n"
    "  if type(v) == 'string' then return (string.format('%q', v):gsub('\\\\\\n', '\\\\n')) end\n"
    "  if type(v) ~= 'table' then\n"
    "    local s = tostring(v)\n"
    "    return depth > 0 and s:match('^[^\\n]*') or s\n"
    "  end\n"
    "  local mt = getmetatable(v)\n"
    "  if mt and mt.__tostring then return tostring(v) end\n"
    "  if seen[v] then return '<cycle>' end\n"
    "  if depth >= maxdepth then return '{...}' end\n"
    "  seen[v] = true\n"
    "  local parts, n, keys = {}, #v, {}\n"
    "  for i = 1, math.min(n, maxitems) do parts[#parts + 1] = repr(v[i], depth + 1, seen, indent .. '  ') end\n"
    "  if n > maxitems then parts[#parts + 1] = '... (' .. n .. ' items)' end\n"
    "  for k in pairs(v) do\n"
    "    if not (math.type(k) == 'integer' and k >= 1 and k <= n) then keys[#keys + 1] = k end\n"
    "  end\n"
    "  table.sort(keys, order)\n"
    "  for i, k in ipairs(keys) do\n"
    "    if i > maxitems then parts[#parts + 1] = '... (' .. #keys .. ' keys)' break end\n"
    "    parts[#parts + 1] = key(k) .. ' = ' .. repr(v[k], depth + 1, seen, indent .. '  ')\n"
    "  end\n"
    "  seen[v] = nil\n"
    "  local line = '{' .. table.concat(parts, ', ') .. '}'\n"
    "  if #line <= 78 and not line:find('\\n') then return line end\n"
    "  local sep = ',\\n' .. indent .. '  '\n"
    "  return '{\\n' .. indent .. '  ' .. table.concat(parts, sep) .. '\\n' .. indent .. '}'\n"
    "end\n"
    "local out = {}\n"
    "for i = 1, select('#', ...) do\n"
    "  local v = select(i, ...)\n"
    "  out[i] = type(v) == 'string' and v or repr(v, 0, {}, '')\n"
    "end\n"
    "io.write(table.concat(out, '\\t'), '\\n')\n"
    "io.flush()\n";

#define PRINTER_KEY "icl.repl.printer"

/* Prints the values on the stack (all of it) with the printer; errors in __tostring are reported. */
static void print_results(repl *r) {
  lua_State *L = r->L;
  int n = lua_gettop(L);
  if (n == 0) return;
  luaL_checkstack(L, 1, "too many results to print");
  lua_getfield(L, LUA_REGISTRYINDEX, PRINTER_KEY);
  lua_insert(L, 1);
  if (lua_pcall(L, n, 0, 0) != LUA_OK) {
    fprintf(stderr, "error printing the results: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
}

/* ---- reading lines --------------------------------------------------------------------------------------- */

static volatile sig_atomic_t prompt_interrupted;

static void on_prompt_sigint(int sig) {
  (void)sig;
  prompt_interrupted = 1;
}

/* readline's character source: like its own, except that Ctrl-C empties the line and accepts it, so readline
 * returns and the REPL starts afresh. The flag is checked before each read as well as on EINTR: a Ctrl-C that
 * lands while readline is busy with earlier keys interrupts no read, and would otherwise be lost. */
static int repl_getc(FILE *f) {
  for (;;) {
    if (prompt_interrupted) {
      rl_replace_line("", 0);
      return '\n';
    }
    unsigned char c;
    ssize_t n = read(fileno(f), &c, 1);
    if (n == 1) return c;
    if (n == 0 || errno != EINTR) return EOF;
  }
}

/* Reads one line without its newline (malloc'd), or NULL at the end of input. */
static char *read_line(repl *r, const char *prompt) {
  fflush(stdout);
  if (!r->tty) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
      free(line);
      return NULL;
    }
    if (n > 0 && line[n - 1] == '\n') line[n - 1] = '\0';
    return line;
  }
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prompt_sigint; /* no SA_RESTART: the read returns EINTR */
  sigemptyset(&sa.sa_mask);
  prompt_interrupted = 0;
  sigaction(SIGINT, &sa, &old);
  char *line = readline(prompt);
  sigaction(SIGINT, &old, NULL);
  return line;
}

/* ---- history --------------------------------------------------------------------------------------------- */

/* A failed history write (read-only home, full disk) is said once; the history then lives in memory only. */
static void history_failed(repl *r, int e) {
  if (!e) return;
  fprintf(stderr, "icl: cannot write the history file %s: %s (history kept for this session only)\n", r->history,
          strerror(e));
  r->history[0] = '\0';
}

static void history_open(repl *r) {
  const char *env = getenv("ICL_HISTORY"), *home = getenv("HOME");
  if (env) snprintf(r->history, sizeof r->history, "%s", env);
  else if (home) snprintf(r->history, sizeof r->history, "%s/.icl_history", home);
  using_history();
  stifle_history(HISTORY_MAX);
  history_comment_char = '#';
  history_write_timestamps = 1;  /* "#<time>" lines delimit entries ... */
  history_multiline_entries = 1; /* ... so a multi-line chunk comes back as one entry */
  if (r->history[0] && r->tty && read_history(r->history) == ENOENT) history_failed(r, write_history(r->history));
}

static void history_add(repl *r, const char *chunk) {
  if (!r->tty || !chunk[strspn(chunk, " \t\n")]) return;
  HIST_ENTRY *last = history_length > 0 ? history_get(history_base + history_length - 1) : NULL;
  if (last && !strcmp(last->line, chunk)) return;
  add_history(chunk);
  if (r->history[0]) history_failed(r, append_history(1, r->history));
}

static void history_close(repl *r) {
  if (r->tty && r->history[0]) history_failed(r, history_truncate_file(r->history, HISTORY_MAX));
}

/* ---- compiling a chunk ----------------------------------------------------------------------------------- */

/* A syntax error at the end of the input: the chunk may continue on the next line. */
static int incomplete(lua_State *L, int status) {
  size_t len;
  const char *msg = lua_tolstring(L, -1, &len);
  return status == LUA_ERRSYNTAX && len >= 5 && !strcmp(msg + len - 5, "<eof>");
}

/* Compiles `return <buffer>` (buffer at index 1); on success leaves the function on top. */
static int try_return(lua_State *L) {
  const char *code = lua_pushfstring(L, "return %s;", lua_tostring(L, 1));
  int status = luaL_loadbuffer(L, code, strlen(code), "=stdin");
  lua_remove(L, -2);
  if (status != LUA_OK) lua_pop(L, 1);
  return status;
}

/* Compiles the buffer at index 1 as statements, reading continuation lines while it is incomplete. Leaves the
 * function or the error message on top. */
static int try_statements(repl *r) {
  lua_State *L = r->L;
  for (;;) {
    size_t len;
    const char *code = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, code, len, "=stdin");
    if (!incomplete(L, status)) return status;
    char *line = read_line(r, PROMPT2);
    if (!line) return status;
    if (prompt_interrupted) {
      free(line);
      return CANCELLED;
    }
    lua_pop(L, 1);
    lua_pushfstring(L, "%s\n%s", code, line);
    lua_replace(L, 1);
    free(line);
  }
}

/* Reads and compiles one chunk: the function (or an error message) on top of an otherwise empty stack. */
static int read_chunk(repl *r) {
  lua_State *L = r->L;
  lua_settop(L, 0);
  char *line = read_line(r, PROMPT);
  if (!line) return END;
  if (prompt_interrupted) {
    free(line);
    if (r->tty) fputs("\n", stdout);
    return CANCELLED;
  }
  lua_pushstring(L, line);
  free(line);
  int status = try_return(L);
  if (status != LUA_OK) status = try_statements(r);
  if (status == CANCELLED) {
    lua_settop(L, 0);
    return CANCELLED;
  }
  history_add(r, lua_tostring(L, 1));
  lua_remove(L, 1);
  return status;
}

/* ---- the loop -------------------------------------------------------------------------------------------- */

static int load_printer(lua_State *L) {
  if (luaL_loadbuffer(L, PRINTER, sizeof PRINTER - 1, "=[repl printer]") != LUA_OK) return 0;
  lua_setfield(L, LUA_REGISTRYINDEX, PRINTER_KEY);
  return 1;
}

static void setup_terminal(repl *r) {
  rl_readline_name = "icl";
  rl_catch_signals = 0;
  rl_getc_function = repl_getc;
  rl_bind_key('\t', rl_insert); /* no file-name completion in Lua code */
  history_open(r);
  printf("icl %s (%s): Lua with icl.* loaded; Ctrl-D exits, Ctrl-C interrupts\n", ICL_VERSION, LUA_RELEASE);
}

int icl_lua_repl(lua_State *L) {
  repl r = {.L = L, .tty = isatty(STDIN_FILENO)};
  if (!load_printer(L)) {
    fprintf(stderr, "icl repl: %s\n", lua_tostring(L, -1));
    return 1;
  }
  if (r.tty) setup_terminal(&r);
  for (;;) {
    int status = read_chunk(&r);
    if (status == END) break;
    if (status == CANCELLED) continue;
    if (status == LUA_OK) status = icl_lua_docall(L, 0, LUA_MULTRET);
    if (status == LUA_OK) print_results(&r);
    else r.failed = icl_lua_report(L, status) != LUA_OK || r.failed;
  }
  lua_settop(L, 0);
  if (r.tty) fputs("\n", stdout);
  history_close(&r);
  fflush(stdout);
  return !r.tty && r.failed ? 1 : 0;
}
