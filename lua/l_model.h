/* The run binding shared by m:run (l_model.c) and net:run (l_train.c): one parser of run options, one call of
 * icl_model_run. */
#ifndef ICL_L_MODEL_H
#define ICL_L_MODEL_H

#include <lua.h>

#include "icl/model.h"

/* The body of m:run for model m: arg 2 token ids (a table or 1-D tensor) or inputs (a 2-D tensor [n, input_length]
 * of an icl-attn model with continuous inputs), arg 3 the options; *busy guards against re-entry from callbacks.
 * Returns the number of results pushed (the result table, or nil + message). */
int icl_lua_model_run(lua_State *L, icl_model *m, int *busy);

/* Looks up a view's model at each use (raising when it has none, e.g. its net is closed) and the flag that guards
 * its runs against re-entry. */
typedef icl_model *(*icl_lua_model_get)(lua_State *L, void *ud, int **busy);

/* Pushes a model userdata that is a view: every method and field asks get(L, ud, ...) for the model, so it always
 * shows the current one (net:model(): the net's current weights); the value at index owner is kept alive with it. */
void icl_lua_push_model_view(lua_State *L, int owner, icl_lua_model_get get, void *ud);

#endif
