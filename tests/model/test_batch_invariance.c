/* ICL_PRECISION_EXACT (src/backend.h): a row's output does not depend on the batch. Tiny models of each
 * architecture on the ref and CPU backends: tokens fed one at a time, in uneven pieces, and all at once (chunks of
 * 8 with a lone-token tail) give bit-identical logits, and a run's "last" logits equal the last row of "all". The
 * fast precision is checked to stay close (it is allowed to differ). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "ref.h"
#include "testmodel.h"
#include "testutil.h"

#define NTOK 17 /* chunks of 8, 8 and a lone token */
#define V 258

static int32_t TOKS[NTOK];

static icl_model *load(const char *path, const char *backend, int precision) {
  icl_load_opts o = {.backend = backend, .device = -1, .n_ctx = 32, .chunk = 8, .n_threads = 2,
                     .precision = precision};
  icl_model *m = NULL;
  icl_error e = {0};
  if (icl_model_load(path, &o, &m, &e)) fprintf(stderr, "load %s on %s: %s\n", path, backend, e.msg);
  return m;
}

/* Logits of every position, feeding the tokens in pieces of the given lengths (cycled); 0 on success. */
static int eval_pieces(icl_model *m, const int *lens, int nlens, float *out) {
  icl_session *s = NULL;
  icl_error e = {0};
  int rc = icl_session_new(m, &s, &e);
  for (int64_t p = 0, i = 0; !rc && p < NTOK; i++) {
    int64_t n = lens[i % nlens] < NTOK - p ? lens[i % nlens] : NTOK - p;
    rc = icl_session_eval(s, TOKS + p, n, out + p * V, 1, &e);
    p += n;
  }
  if (rc) fprintf(stderr, "eval: %s\n", e.msg);
  icl_session_free(s);
  return rc;
}

static int run_last(icl_model *m, float *last) {
  icl_run_opts o = {.logits = ICL_LOGITS_LAST};
  icl_run_result r;
  icl_error e = {0};
  int rc = icl_model_run(m, TOKS, NTOK, &o, &r, &e);
  if (rc) fprintf(stderr, "run: %s\n", e.msg);
  else memcpy(last, r.logits->data, V * sizeof *last);
  if (!rc) icl_run_result_free(&r);
  return rc;
}

static void test_model(const char *path, const char *what, const char *backend) {
  icl_model *m = load(path, backend, ICL_PRECISION_EXACT);
  CHECKF(m != NULL, "%s: load", what);
  if (!m) return;
  static float all[NTOK * V], one[NTOK * V], mixed[NTOK * V], last[V];
  static const int one_len[] = {1}, mixed_len[] = {3, 1, 5, 2}, all_len[] = {NTOK};
  CHECK(eval_pieces(m, all_len, 1, all) == 0);
  CHECK(eval_pieces(m, one_len, 1, one) == 0);
  CHECK(eval_pieces(m, mixed_len, 4, mixed) == 0);
  CHECK(run_last(m, last) == 0);
  CHECKF(!memcmp(all, one, sizeof all), "%s on %s: one token at a time differs from all at once (NMSE %.3g)", what,
         backend, icl_nmse(all, one, NTOK * V));
  CHECKF(!memcmp(all, mixed, sizeof all), "%s on %s: pieces of 3,1,5,2 differ from all at once (NMSE %.3g)", what,
         backend, icl_nmse(all, mixed, NTOK * V));
  CHECKF(!memcmp(all + (NTOK - 1) * V, last, sizeof last), "%s on %s: run's last logits differ from eval's", what,
         backend);
  icl_model_free(m);
  if (strcmp(backend, "cpu") != 0) return;
  m = load(path, backend, ICL_PRECISION_FAST); /* fast may differ, within the int8 activations' error */
  CHECK(m != NULL && eval_pieces(m, one_len, 1, one) == 0);
  double nm = icl_nmse(all, one, NTOK * V);
  CHECKF(nm < 2e-3, "%s fast: one at a time NMSE %.3g vs exact", what, nm);
  printf("  %-22s %-4s bit-identical; fast one-at-a-time NMSE %.3g\n", what, backend, nm);
  icl_model_free(m);
}

int main(void) {
  for (int i = 0; i < NTOK; i++) TOKS[i] = (i * 53 + 7) % 256;
  const char *archs[] = {"llama", "qwen2", "gemma3"};
  uint32_t types[] = {ICL_TYPE_F32, ICL_TYPE_F16, ICL_TYPE_Q8_0, ICL_TYPE_Q4_1, ICL_TYPE_Q4_K, ICL_TYPE_Q6_K};
  for (size_t a = 0; a < 3; a++)
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
      char path[256], what[64];
      snprintf(path, sizeof path, "/tmp/icl-batchinv-%d-%s-%s.gguf", (int)getpid(), archs[a], icl_type_name(types[t]));
      icl_tiny_spec sp = {.arch = archs[a], .wtype = types[t], .seed = 7 + a * 10 + t, .n_layer = 2};
      icl_error e = {0};
      CHECKF(icl_write_tiny_model(path, &sp, &e) == 0, "write %s: %s", path, e.msg);
      snprintf(what, sizeof what, "%s %s", archs[a], icl_type_name(types[t]));
      test_model(path, what, "cpu");
      if (t < 3) test_model(path, what, "ref");
      unlink(path);
    }
  return t_done();
}
