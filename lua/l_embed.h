/* What cmake/embed_lua.cmake generates (lua_embed.c in the build tree): the pure-Lua modules lua/icl/NAME.lua as
 * byte arrays, preloaded by icl_lua.c so `require "icl.graph"` and `icl.graph` work without the source tree. */
#ifndef ICL_L_EMBED_H
#define ICL_L_EMBED_H

#include <stddef.h>

extern const char *const icl_lua_embedded_names[];   /* "icl.graph", ..., NULL */
extern const char *const icl_lua_embedded_sources[]; /* the file's bytes */
extern const size_t icl_lua_embedded_sizes[];          /* their lengths */

/* The files of lua/icl/assets/ (the views' stylesheet and script: l_html.c), likewise. */
extern const char *const icl_lua_asset_names[];   /* "views.js", ..., NULL */
extern const char *const icl_lua_asset_sources[];
extern const size_t icl_lua_asset_sizes[];

#endif
