/* icl_trainer_model (issue 43): the trainer's current weights as a loaded model. Its runs (all logits, a capture, a
 * knockout and a mask) equal icl_model_load of icl_trainer_save's checkpoint on the CPU backend, bit for bit; the
 * model is cached between steps, replaced after a step (whose weights the next run sees) and after a writable
 * icl_trainer_param; a mask equals the knockout of its complement. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "icl/train.h"
#include "testutil.h"

enum { T = 10, V = 12 };

static const icl_attn_config CFG = {.n_layer = 2, .n_head = 2, .d_model = 16, .n_ctx = T, .vocab = V,
                                    .position = ICL_POS_LEARNED, .norm = ICL_NORM_LAYER, .w_o = 1, .qkv_bias = 1,
                                    .smeared_key = 1, .d_ff = 8, .seed = 5};
static const int32_t TOK[T] = {1, 4, 7, 2, 1, 4, 7, 2, 1, 4};
static const int64_t KO[] = {5, 1, 5, 2, 9, 8}; /* (q, k) 0-based */

/* The run's logits and its layer-1 pattern capture, copied out (caller frees). */
static float *run_once(icl_model *m, const icl_intervention *iv, int n_iv, size_t *n) {
  icl_capture cap = {.pattern = "blocks.1.attn.hook_pattern"};
  icl_run_opts o = {.logits = ICL_LOGITS_ALL, .captures = &cap, .n_captures = 1, .interventions = iv,
                    .n_interventions = n_iv};
  icl_run_result r = {0};
  icl_error err;
  int rc = icl_model_run(m, TOK, T, &o, &r, &err);
  CHECKF(rc == ICL_OK, "%s", err.msg);
  if (rc) return NULL;
  size_t nl = (size_t)r.logits->numel, np = (size_t)r.captures[0]->numel;
  float *out = malloc((nl + np) * sizeof *out);
  memcpy(out, r.logits->data, nl * sizeof *out);
  memcpy(out + nl, r.captures[0]->data, np * sizeof *out);
  *n = nl + np;
  icl_run_result_free(&r);
  return out;
}

/* Runs with no intervention, a knockout and a mask (its complement) on the trainer's model and on its checkpoint. */
static void same_as_checkpoint(icl_trainer *tr, const char *what) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/icl_tmr_%ld.gguf", (long)getpid());
  icl_error err;
  icl_model *mt, *ml = NULL;
  CHECKF(icl_trainer_model(tr, &mt, &err) == ICL_OK, "%s: %s", what, err.msg);
  CHECKF(icl_trainer_save(tr, path, &err) == ICL_OK, "%s: %s", what, err.msg);
  icl_load_opts lo = {.backend = "cpu", .device = -1};
  CHECKF(icl_model_load(path, &lo, &ml, &err) == ICL_OK, "%s: %s", what, err.msg);
  icl_intervention ko = {.kind = ICL_IV_KNOCKOUT, .layer = 1, .edges = KO, .n_edges = 3};
  int64_t allow[T * (T + 1)];
  int64_t na = 0;
  for (int64_t q = 0; q < T; q++)
    for (int64_t k = 0; k <= q; k++) {
      int cut = 0;
      for (int j = 0; j < 3; j++) cut |= KO[2 * j] == q && KO[2 * j + 1] == k;
      if (!cut) allow[2 * na] = q, allow[2 * na + 1] = k, na++;
    }
  icl_intervention mask = {.kind = ICL_IV_MASK, .layer = 1, .edges = allow, .n_edges = na};
  const icl_intervention *ivs[3] = {NULL, &ko, &mask};
  size_t n0 = 0, n1 = 0, nk = 0;
  float *ko_ref = run_once(mt, &ko, 1, &nk);
  for (int i = 0; i < 3 && ml; i++) {
    float *a = run_once(mt, ivs[i], ivs[i] ? 1 : 0, &n0), *b = run_once(ml, ivs[i], ivs[i] ? 1 : 0, &n1);
    CHECKF(a && b && n0 == n1 && !memcmp(a, b, n0 * sizeof *a), "%s: run %d equals the checkpoint's bit for bit",
           what, i);
    if (i == 2) CHECKF(a && ko_ref && n0 == nk && !memcmp(a, ko_ref, n0 * sizeof *a), "%s: mask = knockout", what);
    free(a), free(b);
  }
  free(ko_ref);
  icl_model_free(ml);
  unlink(path);
  strcat(path, ".optim");
  unlink(path);
}

static void one_step(icl_trainer *tr) {
  int32_t tok[2 * T], tgt[2 * T];
  icl_data_repeated_segments(2, T, V, 3, 3, 0, 9, icl_trainer_steps(tr), tok, tgt);
  icl_train_batch b = {.B = 2, .T = T, .tokens = tok, .targets = tgt};
  icl_optim_config o = {.kind = ICL_OPTIM_ADAMW, .lr = 1e-2f};
  double loss;
  icl_error err;
  CHECKF(icl_trainer_step(tr, &b, &o, &loss, &err) == ICL_OK, "%s", err.msg);
}

int main(void) {
  icl_trainer *tr;
  icl_error err;
  if (icl_trainer_new(&CFG, 1, &tr, &err)) {
    fprintf(stderr, "trainer: %s\n", err.msg);
    return 1;
  }
  same_as_checkpoint(tr, "fresh");
  icl_model *a, *b;
  CHECK(icl_trainer_model(tr, &a, &err) == ICL_OK && icl_trainer_model(tr, &b, &err) == ICL_OK && a == b);
  size_t n0 = 0, n1 = 0;
  float *before = run_once(a, NULL, 0, &n0);
  one_step(tr);
  CHECK(icl_trainer_model(tr, &b, &err) == ICL_OK);
  float *after = run_once(b, NULL, 0, &n1);
  CHECKF(before && after && n0 == n1 && memcmp(before, after, n0 * sizeof *before), "a step changes the runs");
  free(before), free(after);
  same_as_checkpoint(tr, "after a step");
  /* writable parameter pointers: the next model is bound from the weights as changed through them */
  CHECK(icl_trainer_model(tr, &a, &err) == ICL_OK);
  before = run_once(a, NULL, 0, &n0);
  for (int i = 0; i < icl_trainer_n_params(tr); i++) {
    float *w;
    icl_trainer_param(tr, i, &w, NULL, NULL);
    w[0] += 0.5f;
  }
  CHECK(icl_trainer_model(tr, &b, &err) == ICL_OK);
  after = run_once(b, NULL, 0, &n1);
  CHECKF(before && after && n0 == n1 && memcmp(before, after, n0 * sizeof *before), "an edit changes the runs");
  free(before), free(after);
  same_as_checkpoint(tr, "after a weight edit");
  icl_trainer_free(tr);
  return t_done();
}
