/* Parts of icl.tensor shared by l_tensor.c (userdata, constructors, indexing, printing) and l_tensor_ops.c
 * (math, layout, files). Indices and dimensions are 1-based at the Lua boundary; negative ones count from the end. */
#ifndef ICL_L_TENSOR_H
#define ICL_L_TENSOR_H

#include <lauxlib.h>
#include <lua.h>

#include "icl/tensor.h"

#define ICL_TENSOR_MT "icl.tensor"

/* The userdata: a closed tensor has t == NULL. */
typedef struct icl_lua_tbox {
  icl_tensor *t;
} icl_lua_tbox;

/* Pushes a new closed tensor userdata; an operation then fills box->t. */
icl_lua_tbox *icl_lua_new_tbox(lua_State *L);

/* Tells the collector about t's data (Lua sees only the box): a step as if Lua had allocated it. Every place that
 * gives Lua a new tensor calls it once the box holds the tensor (icl_lua_push_tensor and icl_lua_tensor_done do). */
void icl_lua_tensor_account(lua_State *L, const icl_tensor *t);

/* After an operation that filled (or failed to fill) box->t on top of the stack: returns 1 on success, else raises
 * err's message. */
int icl_lua_tensor_done(lua_State *L, int rc, const icl_error *err);

/* Optional 1-based dimension argument of t (negative from the end) -> 0-based; def is 0-based. */
int icl_lua_opt_dim(lua_State *L, int arg, const icl_tensor *t, int def);

/* Copies a tensor, or a (nested) table of numbers, at arg into a new tensor userdata pushed on the stack; returns
 * the tensor (raises on bad input). */
icl_tensor *icl_lua_to_tensor(lua_State *L, int arg);

/* Methods and module functions defined in l_tensor_ops.c (NULL-terminated). */
extern const luaL_Reg icl_lua_tensor_op_methods[];
extern const luaL_Reg icl_lua_tensor_op_funcs[];

#endif
