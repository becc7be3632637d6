/* Minimal test harness: CHECK macros, a counter and a deterministic RNG. */
#ifndef ICL_TESTUTIL_H
#define ICL_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>

#include "icl/model.h"

extern int t_failed, t_passed;

#define CHECK(cond)                                                                   \
  do {                                                                                \
    if (cond) { t_passed++; }                                                         \
    else { t_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
  } while (0)

#define CHECKF(cond, ...)                                                             \
  do {                                                                                \
    if (cond) { t_passed++; }                                                         \
    else { t_failed++; fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); }                       \
  } while (0)

/* Prints "N passed, N failed" and returns the process exit status. */
int t_done(void);

/* splitmix64-based RNG: t_rand_u64 and a uniform float in [lo, hi). */
uint64_t t_rand_u64(uint64_t *state);
float t_rand_f(uint64_t *state, float lo, float hi);
void t_rand_fill(float *x, int64_t n, uint64_t seed, float lo, float hi);

/* max |got - want| / max |want| (a NaN in got makes it NaN): float results against a float64 reference. */
double t_rel_err(const float *got, const double *want, int64_t n);
/* The same for float64 results (finite differences against an analytic gradient). */
double t_rel_err_d(const double *got, const double *want, int64_t n);

/* 0 in a -DICL_VULKAN=OFF build (a missing device still counts as built: the test then fails, as it should). */
int t_vulkan_built(void);

/* Runs m on n tokens with opts (NULL: none; logits forced to "all"); returns the logits, or NULL after printing
 * "run <what>: <message>". The rest of the result goes to *keep (free it with icl_run_result_free), or is freed. */
icl_tensor *t_run_logits(icl_model *m, const int32_t *tokens, int64_t n, const icl_run_opts *opts,
                         icl_run_result *keep, const char *what);
/* Runs m on n tokens with one capture c and the interventions; returns the capture (the caller frees it), or NULL
 * after t_run_logits printed why. */
icl_tensor *t_run_capture(icl_model *m, const int32_t *tokens, int64_t n, icl_capture c, const icl_intervention *iv,
                          int niv);

/* A tiny random llama model (Q8_0 weights, src/testmodel.h defaults) with the given seed, loaded on
 * backend with n_ctx 32, the given chunk and one thread; the file is removed again. NULL (a failed check
 * counted) if writing or loading fails. */
icl_model *t_tiny_llama(const char *backend, uint64_t seed, int chunk);

/* The capture named name in r, or NULL. */
const icl_tensor *t_find_capture(const icl_run_result *r, const char *name);

/* Path under the source tree (ICL_SOURCE_DIR); returns a static buffer. */
const char *t_src_path(const char *rel);

#endif
