/* Model loading and runs: placeholder until the forward-pass issue lands (replace this whole file). */
#include "icl/model.h"

int icl_model_load(const char *path, const icl_load_opts *opts, icl_model **out, icl_error *err) {
  (void)opts;
  *out = NULL;
  return icl_error_set(err, ICL_EUNSUPPORTED, "%s: model loading is not implemented yet", path);
}
void icl_model_free(icl_model *m) { (void)m; }
const icl_hparams *icl_model_hparams(const icl_model *m) { (void)m; return NULL; }
const icl_tokenizer *icl_model_tokenizer(const icl_model *m) { (void)m; return NULL; }
const char *icl_model_backend(const icl_model *m) { (void)m; return "none"; }
const char *icl_model_device(const icl_model *m) { (void)m; return "none"; }
size_t icl_model_weight_bytes(const icl_model *m) { (void)m; return 0; }
int icl_session_new(icl_model *m, icl_session **out, icl_error *err) {
  (void)m;
  *out = NULL;
  return icl_error_set(err, ICL_EUNSUPPORTED, "sessions are not implemented yet");
}
void icl_session_free(icl_session *s) { (void)s; }
void icl_session_reset(icl_session *s) { (void)s; }
int64_t icl_session_pos(const icl_session *s) { (void)s; return 0; }
int icl_session_eval(icl_session *s, const int32_t *tokens, int64_t n, float *logits, int want_all, icl_error *err) {
  (void)s; (void)tokens; (void)n; (void)logits; (void)want_all;
  return icl_error_set(err, ICL_EUNSUPPORTED, "sessions are not implemented yet");
}
size_t icl_session_peak_bytes(const icl_session *s) { (void)s; return 0; }
int icl_model_run(icl_model *m, const int32_t *tokens, int64_t n, const icl_run_opts *opts, icl_run_result *res,
                  icl_error *err) {
  (void)m; (void)tokens; (void)n; (void)opts; (void)res;
  return icl_error_set(err, ICL_EUNSUPPORTED, "runs are not implemented yet");
}
void icl_run_result_free(icl_run_result *res) { (void)res; }
