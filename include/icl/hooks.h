/* Hook points (TransformerLens names), captures and interventions for icl_model_run. */
#ifndef ICL_HOOKS_H
#define ICL_HOOKS_H

#include <stdint.h>

#include "icl/icl.h"
#include "icl/tensor.h"

/* Positions are 0-based; negative ones count from the end (-1 = the last); a range [begin, end) with end <= 0 runs
 * to end + n (end 0: through the last position), (0, 0) = all. The core checks them against the run's length; its
 * messages show positions 1-based (a negative one as given) and name the request's label and field. */

/* SELECT: per position only the logits of opts.logit_ids and (opts.logit_lse) the log-sum-exp over the whole
 * vocabulary, reduced per LM-head sub-chunk so that [n, vocab] never reaches the host. */
typedef enum icl_logits_mode {
  ICL_LOGITS_NONE = 0, ICL_LOGITS_LAST = 1, ICL_LOGITS_ALL = 2, ICL_LOGITS_SELECT = 3
} icl_logits_mode;

/* A capture request: every hook point matching pattern ('*' matches one dot-free field, e.g.
 * "blocks.*.hook_resid_post"), optionally restricted to positions [pos_begin, pos_end) (see above; 0,0 = all)
 * and to a set of heads (for per-head points). */
typedef struct icl_capture {
  const char *pattern;
  int64_t pos_begin, pos_end;
  const int *heads; /* NULL = all */
  int n_heads;
  const char *label; /* NULL, or the caller's name for it in messages ("capture[1]") */
} icl_capture;

typedef enum icl_iv_kind {
  ICL_IV_ZERO = 0,     /* zero the point (heads/positions restricted) */
  ICL_IV_MEAN = 1,     /* replace by value (mean activation, broadcast over positions) */
  ICL_IV_PATCH = 2,    /* replace by value at the given positions */
  ICL_IV_ADD = 3,      /* add coef * value (a vector broadcast over positions, or per position) */
  ICL_IV_KNOCKOUT = 4, /* mask attention edges q_pos -> k_pos of a layer's heads */
  ICL_IV_MASK = 5      /* keep only the listed attention edges q_pos -> k_pos (allowed edges) of a layer's heads */
} icl_iv_kind;

/* One intervention. hook names a point ("blocks.3.attn.hook_z"), or is short: "z", "result", "q", "k" or "v" of
 * attention layer `layer` (NULL: "z" for ZERO, MEAN, and PATCH with a layer); heads restrict per-head points.
 * The core checks every field (layer, heads, positions, edges) and names it after label in its messages. */
typedef struct icl_intervention {
  icl_iv_kind kind;
  const char *hook;
  const int *heads; int n_heads;              /* NULL = all heads */
  int64_t pos_begin, pos_end;                 /* positions [begin, end); 0,0 = all */
  const icl_tensor *value;                    /* MEAN/PATCH/ADD: the replacement or addend */
  float coef;                                 /* ADD */
  int layer;                                  /* KNOCKOUT, MASK, and short hook names (-1: not given) */
  const int64_t *edges; int64_t n_edges;      /* KNOCKOUT: pairs (q_pos, k_pos), k_pos <= q_pos, masked; MASK: the
                                                 only pairs kept. Positions as above (negative: from the end) */
  const char *label;                          /* NULL, or the caller's name for it in messages ("patch[1]") */
} icl_intervention;

/* Slow-path host callback: receives a point's value [pos, ...] for positions pos0.. of the current chunk;
 * may modify it in place; return nonzero (with err set) to abort the run. */
typedef int (*icl_hook_fn)(void *ud, const char *hook, icl_tensor *value, int64_t pos0, icl_error *err);

/* Per-chunk callback for streaming: called after each chunk with its position range; captures of that chunk
 * are in res (and are dropped after the call when opts.stream is set). */
struct icl_run_result;
typedef int (*icl_chunk_fn)(void *ud, int64_t pos0, int64_t n, struct icl_run_result *res, icl_error *err);

typedef struct icl_run_opts {
  icl_logits_mode logits;
  const icl_capture *captures; int n_captures;
  const icl_intervention *interventions; int n_interventions;
  const char *const *hook_points; int n_hook_points; icl_hook_fn hook; void *hook_ud;
  icl_chunk_fn on_chunk; void *chunk_ud; int stream;
  volatile int *interrupt; /* nonzero stops the run between chunks with ICL_EINTR */
  const float *inputs; int64_t inputs_width; /* icl-attn: continuous inputs [n_tokens, width] row-major, width =
                                                input_length; NULL = zeros */
  const int32_t *logit_ids; int n_logit_ids; /* SELECT: token ids whose logits are kept, in this order */
  int logit_lse;                             /* SELECT: also the log-sum-exp over the vocabulary */
  int reuse;  /* nonzero: the leading positions this run shares with the previous icl_model_run (same tokens, and
               * no intervention reaching them in either run: knockouts reach positions from their earliest query
               * on, any other intervention, hook callback or continuous input all of them) keep the keys and
               * values that run left in the cache, and only the rest is computed. Only with logits LAST or NONE,
               * no captures and no on_chunk; otherwise ignored. res.reused says how many positions were kept */
} icl_run_opts;

/* Results: logits [n_pos, n_vocab] (or [1, n_vocab] for LAST, [n_pos, n_logit_ids] for SELECT) and named
 * captures; lse [n_pos] for SELECT with logit_lse. */
typedef struct icl_run_result {
  icl_tensor *logits;
  int n_captures;
  char **names;
  icl_tensor **captures;
  icl_tensor *lse;
  int64_t reused; /* positions whose keys and values came from the previous run (opts.reuse) */
} icl_run_result;

/* Frees what a run put into res and zeroes it. */
void icl_run_result_free(icl_run_result *res);

#endif
