#include "testutil.h"

#include "backend.h"
#include "testmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int t_failed = 0, t_passed = 0;

int t_done(void) {
  printf("%d passed, %d failed\n", t_passed, t_failed);
  return t_failed ? 1 : 0;
}

uint64_t t_rand_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float t_rand_f(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((t_rand_u64(s) >> 40) * (1.0 / 16777216.0));
}

void t_rand_fill(float *x, int64_t n, uint64_t seed, float lo, float hi) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = t_rand_f(&s, lo, hi);
}

double t_rel_err_d(const double *got, const double *want, int64_t n) {
  double e = 0.0, m = 1e-30;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs(got[i] - want[i]);
    e = d > e || isnan(d) ? d : e;
    m = fabs(want[i]) > m ? fabs(want[i]) : m;
  }
  return e / m;
}

double t_rel_err(const float *got, const double *want, int64_t n) {
  double *g = malloc((size_t)(n > 0 ? n : 1) * sizeof *g);
  if (!g) abort();
  for (int64_t i = 0; i < n; i++) g[i] = got[i]; /* exact: every float is a double */
  double r = t_rel_err_d(g, want, n);
  free(g);
  return r;
}

const char *t_src_path(const char *rel) {
  static char buf[4096];
  const char *root = getenv("ICL_SOURCE_DIR");
  snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
  return buf;
}

int t_vulkan_built(void) {
  icl_backend *v = NULL;
  icl_error e = {0};
  int rc = icl_vk_backend_new(-1, &v, &e);
  if (rc == ICL_OK) v->ops->destroy(v);
  return rc != ICL_EUNSUPPORTED;
}

icl_tensor *t_run_logits(icl_model *m, const int32_t *tokens, int64_t n, const icl_run_opts *opts,
                         icl_run_result *keep, const char *what) {
  icl_run_opts o = opts ? *opts : (icl_run_opts){0};
  o.logits = ICL_LOGITS_ALL;
  icl_run_result r;
  icl_error e = {0};
  if (icl_model_run(m, tokens, n, &o, &r, &e)) {
    fprintf(stderr, "run %s: %s\n", what, e.msg);
    return NULL;
  }
  icl_tensor *l = r.logits;
  r.logits = NULL;
  if (keep) *keep = r;
  else icl_run_result_free(&r);
  return l;
}

icl_tensor *t_run_capture(icl_model *m, const int32_t *tokens, int64_t n, icl_capture c, const icl_intervention *iv,
                          int niv) {
  icl_run_opts o = {.captures = &c, .n_captures = 1, .interventions = iv, .n_interventions = niv};
  icl_run_result r;
  icl_tensor *l = t_run_logits(m, tokens, n, &o, &r, c.pattern);
  if (!l) return NULL;
  icl_tensor_free(l);
  icl_tensor *t = r.captures[0];
  r.captures[0] = NULL;
  icl_run_result_free(&r);
  return t;
}

const icl_tensor *t_find_capture(const icl_run_result *r, const char *name) {
  for (int i = 0; i < r->n_captures; i++)
    if (!strcmp(r->names[i], name)) return r->captures[i];
  return NULL;
}

icl_model *t_tiny_llama(const char *backend, uint64_t seed, int chunk) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-tiny-%d-%s-%llu.gguf", (int)getpid(), backend, (unsigned long long)seed);
  icl_tiny_spec sp = {.arch = "llama", .wtype = ICL_TYPE_Q8_0, .seed = seed};
  icl_error e = {0};
  CHECKF(icl_write_tiny_model(path, &sp, &e) == 0, "tiny model: %s", e.msg);
  icl_load_opts lo = {.backend = backend, .device = -1, .n_ctx = 32, .chunk = chunk, .n_threads = 1};
  icl_model *m = NULL;
  CHECKF(icl_model_load(path, &lo, &m, &e) == 0, "load on %s: %s", backend, e.msg);
  unlink(path);
  return m;
}
