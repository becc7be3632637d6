/* Options tables of the training API (icl.nn, icl.optim, icl.data, icl.train): every key known, every value
 * type- and range-checked, errors naming the function, the key, the value and what was expected. */
#ifndef ICL_L_OPTS_H
#define ICL_L_OPTS_H

#include <stdint.h>

#include <lua.h>

/* Raises "fn: unknown option 'k' (known: ...)" for a string key of the table at t not in keys (NULL-ended), and
 * for any non-string key. */
void lopt_known(lua_State *L, int t, const char *fn, const char *const *keys);
/* Integer field k in lo..hi (dflt when absent); a float with an integral value is accepted; raises otherwise. */
int64_t lopt_int(lua_State *L, int t, const char *fn, const char *k, int64_t dflt, int64_t lo, int64_t hi);
/* Boolean field k (true/false, or the integers 0 and 1); dflt when absent. */
int lopt_bool(lua_State *L, int t, const char *fn, const char *k, int dflt);
/* Finite number field k in [lo, hi] (open at lo when lo_open, open at hi when hi_open); dflt when absent. */
double lopt_num(lua_State *L, int t, const char *fn, const char *k, double dflt, double lo, int lo_open, double hi,
                int hi_open);
/* Seed field k: any integer >= 0 up to 2^63-1, kept in full (dflt when absent). */
uint64_t lopt_seed(lua_State *L, int t, const char *fn, const char *k, uint64_t dflt);

#endif
