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

#endif
