/* icl perplexity: perplexity of a model over a text file, in windows. Window definition (the same as the
 * reference fixtures, docs/fixtures.md): the file's tokens without BOS are cut into consecutive pieces of
 * ctx-1 tokens; each window is BOS + piece; every position of the window predicts the next token of the
 * window, so a window of ctx tokens scores ctx-1 predictions. Tokens after the last full piece are not scored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "icl/model.h"

static void ppl_usage(FILE *f) {
  fprintf(f, "usage: icl perplexity -m MODEL -f FILE [--ctx N] [--backend auto|cpu|vulkan|ref] [--max-windows K]\n");
}

/* Negative log-likelihood of target under logits (log-softmax). */
static double nll(const float *logits, int n, int32_t target) {
  float mx = logits[0];
  for (int i = 1; i < n; i++) mx = logits[i] > mx ? logits[i] : mx;
  double sum = 0;
  for (int i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
  return log(sum) + mx - logits[target];
}

static int score(icl_model *m, const int32_t *ids, int64_t n, long ctx, long max_windows) {
  const icl_hparams *hp = icl_model_hparams(m);
  int32_t bos = icl_tokenizer_bos(icl_model_tokenizer(m));
  int64_t piece = bos >= 0 ? ctx - 1 : ctx;
  int64_t windows = n / piece;
  if (windows == 0) {
    fprintf(stderr, "icl perplexity: %lld tokens are fewer than one window of %lld\n", (long long)n, (long long)piece);
    return 2;
  }
  if (max_windows > 0 && windows > max_windows) windows = max_windows;
  int32_t *win = malloc((size_t)ctx * sizeof *win);
  float *logits = malloc((size_t)ctx * (size_t)hp->n_vocab * sizeof *logits);
  icl_session *s = NULL;
  icl_error err = {0};
  int rc = !win || !logits ? icl_error_set(&err, ICL_ENOMEM, "out of memory") : icl_session_new(m, &s, &err);
  double total = 0, t0 = cli_now();
  int64_t scored = 0;
  for (int64_t w = 0; w < windows && !rc; w++) {
    int64_t start = w * piece, len = n - start < piece ? n - start : piece, wl = 0;
    if (bos >= 0) win[wl++] = bos;
    memcpy(win + wl, ids + start, (size_t)len * sizeof *win);
    wl += len;
    icl_session_reset(s);
    if ((rc = icl_session_eval(s, win, wl, logits, 1, &err))) break;
    for (int64_t i = 0; i + 1 < wl; i++) total += nll(logits + i * hp->n_vocab, hp->n_vocab, win[i + 1]);
    scored += wl - 1;
    if (cli_progress_enabled()) {
      double el = cli_now() - t0;
      fprintf(stderr, "\r[%lld/%lld] ppl %.4f  %.1f tok/s  ETA %.0f s   ", (long long)(w + 1), (long long)windows,
              exp(total / scored), (start + len) / el, el / (w + 1) * (windows - w - 1));
    }
  }
  if (cli_progress_enabled()) fprintf(stderr, "\n");
  if (rc) fprintf(stderr, "icl perplexity: %s\n", err.msg);
  else
    printf("perplexity %.4f over %lld windows of up to %ld tokens (%lld predictions) in %.1f s\n",
           exp(total / scored), (long long)windows, ctx, (long long)scored, cli_now() - t0);
  icl_session_free(s);
  free(win);
  free(logits);
  return rc == ICL_EFORMAT ? 2 : rc ? 1 : 0; /* non-finite logits: the model file is bad */
}

int icl_cmd_perplexity(int argc, char **argv) {
  const char *model = NULL, *file = NULL, *backend = NULL;
  long ctx = 512, max_windows = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) { ppl_usage(stdout); return 0; }
    if (o[0] != '-') { fprintf(stderr, "icl perplexity: unexpected argument '%s' (options take -m, -f, ...)\n", o); return 2; }
    if (!v) { fprintf(stderr, "icl perplexity: %s needs a value\n", o); return 2; }
    if (!strcmp(o, "-m")) model = v;
    else if (!strcmp(o, "-f")) file = v;
    else if (!strcmp(o, "--backend")) backend = v;
    else if (!strcmp(o, "--ctx")) { if (cli_int("perplexity", o, v, 2, 1 << 20, &ctx)) return 2; }
    else if (!strcmp(o, "--max-windows")) { if (cli_int("perplexity", o, v, 0, 1 << 30, &max_windows)) return 2; }
    else { fprintf(stderr, "icl perplexity: unknown option '%s'\n", o); ppl_usage(stderr); return 2; }
    i++;
  }
  if (!model || !file) { fprintf(stderr, "icl perplexity: -m MODEL and -f FILE are required\n"); return 2; }
  icl_error err = {0};
  size_t len;
  char *text = cli_read_file(file, &len, &err);
  if (!text) { fprintf(stderr, "icl perplexity: %s\n", err.msg); return 2; }
  icl_load_opts o = {.backend = backend, .device = -1, .n_ctx = (int)ctx, .chunk = (int)ctx};
  icl_model *m = NULL;
  int32_t *ids = NULL;
  int64_t n = 0;
  int rc = icl_model_load(model, &o, &m, &err);
  if (!rc) rc = icl_tokenize(icl_model_tokenizer(m), text, len, 0, 0, &ids, &n, &err);
  free(text);
  if (rc) {
    fprintf(stderr, "icl perplexity: %s\n", err.msg);
    icl_model_free(m);
    return 2;
  }
  rc = n < 2 ? (fprintf(stderr, "icl perplexity: %s has fewer than 2 tokens\n", file), 2) : score(m, ids, n, ctx, max_windows);
  free(ids);
  icl_model_free(m);
  return rc;
}
