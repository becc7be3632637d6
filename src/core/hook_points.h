/* Hook points: their ids, TransformerLens names, glob matching, per-position layout, and the position and head
 * lists requests give. Pure functions of the model's shape: the bottom of the run path (docs/architecture.md). */
#ifndef ICL_HOOK_POINTS_H
#define ICL_HOOK_POINTS_H

#include <stddef.h>
#include <stdint.h>

#include "model_internal.h"

/* Hook point ids within a layer. */
typedef enum icl_hp {
  HP_RESID_PRE, HP_LN1, HP_Q, HP_K, HP_V, HP_PATTERN, HP_Z, HP_RESULT, HP_ATTN_OUT, HP_LN1_POST, HP_RESID_MID,
  HP_LN2, HP_MLP_PRE, HP_MLP_POST, HP_MLP_OUT, HP_LN2_POST, HP_RESID_POST, HP_LAYER_COUNT
} icl_hp;
/* Points outside layers use layer -1: HP_EMBED, HP_LN_FINAL */
enum { HP_EMBED = HP_LAYER_COUNT, HP_LN_FINAL, HP_COUNT };

/* Layout of a point per position: row floats, split into `heads` blocks of hsz (heads = 0: not per head). The
 * pattern has heads = n_head and row = 0 (its rows are key positions, as many as the run so far). */
typedef struct icl_hk_geom {
  int64_t row, hsz;
  int heads;
} icl_hk_geom;

/* The layout of point hp of m. */
icl_hk_geom icl_hk_geom_of(const icl_model *m, int hp);

/* Hook point name of (layer, hp) into buf; returns 0 if the point does not exist for this model. */
int icl_hook_name(const icl_model *m, int layer, int hp, char *buf, size_t len);

/* Calls fn for every point of m whose name matches pattern ('*' matches one dot-free run); returns the match count,
 * or an error (< 0): fn's, or "matches nothing". */
typedef int (*icl_hp_fn)(void *ud, int layer, int hp, const char *name, icl_error *err);
int icl_hook_points_match(const icl_model *m, const char *pattern, icl_hp_fn fn, void *ud, icl_error *err);

/* Checks one position p of the C API (0-based, negative from the end) against the run length n into *out (0-based
 * from the start); the error names what, the position 1-based (a negative one as given) and the valid range. */
int icl_hk_position(int64_t p, int64_t n, const char *what, int64_t *out, icl_error *err);

/* Checks a position range [b, e) of the C API against the run length n into [*pb, *pe): negatives count from the
 * end (e = 0: through the last position), (0,0) = all; an error names "<what>.pos", the position and the valid
 * range, or the empty range. */
int icl_hk_pos_range(int64_t b, int64_t e, int64_t n, int64_t *pb, int64_t *pe, const char *what, icl_error *err);

/* The positions [*b, *e) of a request's range [pb, pe) inside the chunk [p0, p0+n); 0 if they do not meet. */
int icl_hk_overlap(int64_t pb, int64_t pe, int64_t p0, int64_t n, int64_t *b, int64_t *e);

/* Copies and checks a head list (NULL = all max_heads heads) into a new array *out of *nsel heads; an error names
 * "<what>.head" (one head) or "<what>.heads[i]". */
int icl_hk_head_list(const int *heads, int nh, int max_heads, const char *what, int **out, int *nsel, icl_error *err);

/* The number of positions in a site's chunk view. */
int64_t icl_hk_view_positions(const icl_dt *v, int hp);

#endif
