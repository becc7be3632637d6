/* icl.progress: a progress bar with rate and ETA on stderr when stderr is a terminal; silent otherwise, or one
 * line per 10% when ICL_PROGRESS=lines (for logs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "icl_lua.h"

#define PROGRESS_MT "icl.progress"
#define BAR_WIDTH 30
#define COUNT_MAX 9007199254740992.0 /* 2^53: counts and totals beyond (or NaN, inf, negative) are refused */

enum { MODE_SILENT, MODE_BAR, MODE_LINES };

typedef struct progress {
  double total;    /* <= 0: unknown */
  double count;    /* units done */
  double t0;       /* start, seconds */
  double drawn_at; /* last redraw, seconds */
  int mode;
  int decile;      /* MODE_LINES: deciles printed so far */
  int finished;
  char label[64];
} progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void format_duration(char *buf, size_t cap, double s) {
  if (!(s >= 0) || s > 359999) {
    snprintf(buf, cap, "--:--");
    return;
  }
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

/* A count or total: whole numbers as such, anything beyond 1e15 (never a real count) in short form. */
static void format_count(char *buf, size_t cap, double v) {
  snprintf(buf, cap, v < 1e15 ? "%.0f" : "%.3g", v);
}

/* "45% 450/1000 12.3/s ETA 0:44" ("... in 1:20" when finished; count, rate and time when the total is unknown). A
 * count past the total reads as 100% with an ETA of 0:00, never a negative time. */
static void format_status(const progress *p, double t, char *buf, size_t cap) {
  double el = t - p->t0, rate = el > 0 ? p->count / el : 0;
  char eta[32], spent[32], count[32], total[32];
  format_duration(spent, sizeof spent, el);
  format_count(count, sizeof count, p->count);
  if (p->total > 0) {
    double left = p->count < p->total ? p->total - p->count : 0;
    format_duration(eta, sizeof eta, left == 0 ? 0 : rate > 0 ? left / rate : -1);
    format_count(total, sizeof total, p->total);
    snprintf(buf, cap, "%3.0f%% %s/%s %.1f/s %s %s", 100 * (p->total - left) / p->total, count, total, rate,
             p->finished ? "in" : "ETA", p->finished ? spent : eta);
  } else {
    snprintf(buf, cap, "%s %.1f/s %s", count, rate, spent);
  }
}

static void draw_bar(const progress *p, double t) {
  char bar[BAR_WIDTH + 1], status[160];
  double frac = p->total > 0 ? p->count / p->total : 0;
  int fill = (int)(frac * BAR_WIDTH + 0.5);
  if (fill > BAR_WIDTH) fill = BAR_WIDTH;
  for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '=' : ' ';
  bar[BAR_WIDTH] = 0;
  format_status(p, t, status, sizeof status);
  if (p->total > 0) fprintf(stderr, "\r%s [%s] %s\033[K", p->label, bar, status);
  else fprintf(stderr, "\r%s %s\033[K", p->label, status);
  if (p->finished) fputc('\n', stderr);
  fflush(stderr);
}

static void draw_lines(progress *p, double t) {
  int dec = p->total > 0 ? (int)(10 * p->count / p->total) : 0;
  if (dec > 9) dec = 9; /* the 100% line comes from done() */
  if (dec <= p->decile && !(p->finished && p->decile < 10)) return;
  p->decile = p->finished ? 10 : dec;
  char status[160];
  format_status(p, t, status, sizeof status);
  fprintf(stderr, "%s: %s\n", p->label, status);
}

/* Redraws at most 10 times a second, and always when finished. */
static void redraw(progress *p, int force) {
  if (p->mode == MODE_SILENT) return;
  double t = now_s();
  if (!force && t - p->drawn_at < 0.1 && p->mode == MODE_BAR) return;
  p->drawn_at = t;
  if (p->mode == MODE_BAR) draw_bar(p, t);
  else draw_lines(p, t);
}

/* ---- Lua binding ------------------------------------------------------------------------------------------ */

static progress *check_progress(lua_State *L) { return luaL_checkudata(L, 1, PROGRESS_MT); }

static int choose_mode(void) {
  if (isatty(STDERR_FILENO)) return MODE_BAR;
  const char *env = getenv("ICL_PROGRESS");
  return env && strcmp(env, "lines") == 0 ? MODE_LINES : MODE_SILENT;
}

/* icl.progress.new{total = n, label = "walks"} */
static int progress_new(lua_State *L) {
  int has_opts = !lua_isnoneornil(L, 1);
  if (has_opts) luaL_checktype(L, 1, LUA_TTABLE);
  progress *p = lua_newuserdatauv(L, sizeof *p, 0);
  memset(p, 0, sizeof *p);
  luaL_setmetatable(L, PROGRESS_MT);
  if (has_opts) {
    lua_getfield(L, 1, "total");
    if (!lua_isnil(L, -1) && !lua_isnumber(L, -1)) luaL_argerror(L, 1, "total must be a number");
    p->total = lua_tonumber(L, -1);
    if (!(p->total >= 0 && p->total <= COUNT_MAX)) luaL_argerror(L, 1, "total must be a number in 0..2^53");
    lua_getfield(L, 1, "label");
    if (!lua_isnil(L, -1) && !lua_isstring(L, -1)) luaL_argerror(L, 1, "label must be a string");
    snprintf(p->label, sizeof p->label, "%s", lua_isnil(L, -1) ? "" : lua_tostring(L, -1));
    lua_pop(L, 2);
  }
  p->t0 = now_s();
  p->mode = choose_mode();
  return 1;
}

/* p:update(n = 1): n more units done. */
static int progress_update(lua_State *L) {
  progress *p = check_progress(L);
  double n = luaL_optnumber(L, 2, 1);
  luaL_argcheck(L, n >= 0 && n <= COUNT_MAX, 2, "n must be a number in 0..2^53");
  if (p->finished) return 0;
  p->count = p->count + n <= COUNT_MAX ? p->count + n : COUNT_MAX;
  redraw(p, 0);
  return 0;
}

/* p:set(count): the units done so far. */
static int progress_set(lua_State *L) {
  progress *p = check_progress(L);
  double c = luaL_checknumber(L, 2);
  luaL_argcheck(L, c >= 0 && c <= COUNT_MAX, 2, "count must be a number in 0..2^53");
  if (p->finished) return 0;
  p->count = c;
  redraw(p, 0);
  return 0;
}

/* p:done(): the final line (once); later calls do nothing. Returns the seconds elapsed. */
static int progress_done(lua_State *L) {
  progress *p = check_progress(L);
  if (!p->finished) {
    p->finished = 1;
    redraw(p, 1);
  }
  lua_pushnumber(L, now_s() - p->t0);
  return 1;
}

static int progress_tostring(lua_State *L) {
  progress *p = check_progress(L);
  char status[160];
  format_status(p, now_s(), status, sizeof status);
  lua_pushfstring(L, "icl.progress (%s%s%s)", p->label, p->label[0] ? ": " : "", status);
  return 1;
}

/* icl.clock(): seconds on a monotonic clock (sub-second; for timing, not dates). */
int icl_lua_clock(lua_State *L) {
  lua_pushnumber(L, now_s());
  return 1;
}

static const luaL_Reg progress_methods[] = {
    {"update", progress_update}, {"set", progress_set}, {"done", progress_done}, {NULL, NULL}};

int icl_lua_open_progress(lua_State *L) {
  if (luaL_newmetatable(L, PROGRESS_MT)) {
    luaL_newlib(L, progress_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, progress_done);
    lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, progress_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushcfunction(L, progress_new);
  lua_setfield(L, -2, "new");
  return 1;
}
