/* icl run: generate text from a prompt, streaming tokens to stdout. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "icl/model.h"

typedef struct run_args {
  const char *model, *prompt, *backend;
  long n_predict, top_k, seed, n_ctx;
  double temp, top_p;
  int stats, chat;
} run_args;

static void run_usage(FILE *f) {
  fprintf(f, "usage: icl run -m MODEL -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]\n"
             "               [--chat] [--stats] [--backend auto|cpu|vulkan|ref] [--ctx N]\n"
             "  --temp 0 is greedy (the default is 0.7, range 0..100); --top-p in 0..1; --chat wraps the prompt in the\n"
             "  model's chat template. Generation stops at -n tokens, the end of text, or a full context (--ctx,\n"
             "  default the model's); --stats says which\n");
}

static int parse(int argc, char **argv, run_args *a) {
  *a = (run_args){.n_predict = 128, .top_k = 40, .seed = 42, .temp = 0.7, .top_p = 0.95};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) { run_usage(stdout); exit(0); }
    else if (!strcmp(o, "--stats")) { a->stats = 1; continue; }
    else if (!strcmp(o, "--chat")) { a->chat = 1; continue; }
    else if (o[0] != '-') { fprintf(stderr, "icl run: unexpected argument '%s' (options take -m, -p, ...)\n", o); return 2; }
    else if (!v) { fprintf(stderr, "icl run: %s needs a value\n", o); return 2; }
    else if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
    else if (!strcmp(o, "-p") || !strcmp(o, "--prompt")) a->prompt = v;
    else if (!strcmp(o, "--backend")) a->backend = v;
    else if (!strcmp(o, "-n")) bad = cli_int("run", o, v, 0, 1 << 20, &a->n_predict);
    else if (!strcmp(o, "--top-k")) bad = cli_int("run", o, v, 0, 1 << 20, &a->top_k);
    else if (!strcmp(o, "--seed")) bad = cli_int("run", o, v, 0, 0x7fffffff, &a->seed);
    else if (!strcmp(o, "--ctx")) bad = cli_int("run", o, v, 16, 1 << 20, &a->n_ctx);
    else if (!strcmp(o, "--temp")) bad = cli_float_in("run", o, v, 0, 100, &a->temp);
    else if (!strcmp(o, "--top-p")) bad = cli_float_in("run", o, v, 0, 1, &a->top_p);
    else { fprintf(stderr, "icl run: unknown option '%s'\n", o); run_usage(stderr); return 2; }
    if (bad) return 2;
    i++;
  }
  if (!a->model || !a->prompt) {
    fprintf(stderr, "icl run: -m MODEL and -p PROMPT are required\n");
    run_usage(stderr);
    return 2;
  }
  return 0;
}

/* xorshift64*: a small seeded generator for sampling. */
static double rand_unit(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (double)((*s * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct cand {
  int32_t id;
  float p;
} cand;

static int by_prob(const void *a, const void *b) {
  float x = ((const cand *)a)->p, y = ((const cand *)b)->p;
  return (x < y) - (x > y);
}

/* Keeps the k largest logits in a min-heap (c[0] smallest): O(n log k) instead of sorting the vocabulary. */
static void heap_down(cand *c, int k, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < k && c[l].p < c[m].p) m = l;
    if (r < k && c[r].p < c[m].p) m = r;
    if (m == i) return;
    cand t = c[i];
    c[i] = c[m], c[m] = t, i = m;
  }
}

static int top_k(const float *logits, int n, int k, cand *c) {
  for (int i = 0; i < k; i++) c[i] = (cand){i, logits[i]};
  for (int i = k / 2 - 1; i >= 0; i--) heap_down(c, k, i);
  for (int i = k; i < n; i++)
    if (logits[i] > c[0].p) {
      c[0] = (cand){i, logits[i]};
      heap_down(c, k, 0);
    }
  qsort(c, (size_t)k, sizeof *c, by_prob);
  return k;
}

static int32_t sample(const float *logits, int n, const run_args *a, uint64_t *rng, cand *c) {
  int32_t best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  if (a->temp <= 0) return best;
  int k = top_k(logits, n, a->top_k > 0 && a->top_k < n ? (int)a->top_k : n, c); /* sorted by logit */
  double sum = 0;
  for (int i = 0; i < k; i++) sum += (c[i].p = expf((c[i].p - logits[best]) / (float)a->temp));
  double cum = 0;
  int keep = k;
  for (int i = 0; i < k; i++) {
    cum += c[i].p / sum;
    if (cum >= a->top_p) { keep = i + 1; break; }
  }
  double total = 0;
  for (int i = 0; i < keep; i++) total += c[i].p;
  double r = rand_unit(rng) * total;
  for (int i = 0; i < keep; i++) {
    r -= c[i].p;
    if (r <= 0) return c[i].id;
  }
  return c[keep - 1].id;
}

/* Wraps the prompt in the model's chat format when its vocabulary has one. */
static char *chat_prompt(const icl_tokenizer *t, const char *p) {
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_error e;
  const char *fmt = "%s";
  if (icl_tokenize(t, "<|im_start|>", 12, 0, 1, &ids, &n, &e) == ICL_OK && n == 1)
    fmt = "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n";
  else if (free(ids), ids = NULL, icl_tokenize(t, "<start_of_turn>", 15, 0, 1, &ids, &n, &e) == ICL_OK && n == 1)
    fmt = "<start_of_turn>user\n%s<end_of_turn>\n<start_of_turn>model\n";
  free(ids);
  size_t len = strlen(fmt) + strlen(p) + 1;
  char *s = malloc(len);
  if (s) snprintf(s, len, fmt, p);
  return s;
}

static int generate(icl_model *m, const run_args *a) {
  const icl_tokenizer *tok = icl_model_tokenizer(m);
  const icl_hparams *hp = icl_model_hparams(m);
  icl_error err = {0};
  char *text = a->chat ? chat_prompt(tok, a->prompt) : strdup(a->prompt);
  int32_t *ids = NULL;
  int64_t n = 0;
  icl_session *s = NULL;
  float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
  cand *c = malloc((size_t)hp->n_vocab * sizeof *c);
  int rc = !text || !logits || !c ? icl_error_set(&err, ICL_ENOMEM, "out of memory") : ICL_OK;
  if (!rc) rc = icl_tokenize(tok, text, strlen(text), -1, 1, &ids, &n, &err);
  if (!rc) rc = icl_session_new(m, &s, &err);
  double t0 = cli_now(), t1 = t0;
  if (!rc) rc = icl_session_eval(s, ids, n, logits, 0, &err);
  t1 = cli_now();
  uint64_t rng = (uint64_t)a->seed * 0x9E3779B97F4A7C15ull + 1;
  long gen = 0;
  const char *why = "the -n limit";
  int full = 0;
  while (!rc && gen < a->n_predict) {
    int32_t id = sample(logits, hp->n_vocab, a, &rng, c);
    if (id == icl_tokenizer_eos(tok) || icl_token_is_control(tok, id)) {
      why = "end of text";
      break;
    }
    size_t len;
    const char *piece = icl_token_text(tok, id, &len);
    if (piece) fwrite(piece, 1, len, stdout);
    fflush(stdout);
    gen++;
    if (gen == a->n_predict) break;
    if (icl_session_pos(s) + 1 > icl_model_n_ctx(m)) { /* the sampled token has no room to be evaluated */
      why = "the context is full", full = 1;
      break;
    }
    rc = icl_session_eval(s, &id, 1, logits, 0, &err);
  }
  double t2 = cli_now();
  printf("\n");
  fflush(stdout);
  if (rc) fprintf(stderr, "icl run: %s\n", err.msg);
  if (!rc && full)
    fprintf(stderr, "icl run: stopped after %ld tokens: the context of %d tokens is full (raise it with --ctx)\n", gen,
            icl_model_n_ctx(m));
  if (!rc && a->stats) fprintf(stderr, "stopped: %s\n", why);
  if (!rc && a->stats)
    fprintf(stderr,
            "backend: %s\nprompt: %lld tokens in %.3f s (%.2f tok/s)\ngeneration: %ld tokens in %.3f s (%.2f tok/s)\n"
            "device memory: weights %.1f MiB + session %.1f MiB\n",
            icl_model_device(m), (long long)n, t1 - t0, n / (t1 - t0), gen, t2 - t1, gen / (t2 - t1 + 1e-12),
            icl_model_weight_bytes(m) / 1048576.0, s ? icl_session_peak_bytes(s) / 1048576.0 : 0.0);
  icl_session_free(s);
  free(ids);
  free(text);
  free(logits);
  free(c);
  return rc == ICL_EFORMAT ? 2 : rc ? 1 : 0; /* non-finite logits: the model file is bad */
}

int icl_cmd_run(int argc, char **argv) {
  run_args a;
  int rc = parse(argc, argv, &a);
  if (rc) return rc;
  icl_load_opts o = {.backend = a.backend, .device = -1, .n_ctx = (int)a.n_ctx,
                     .precision = ICL_PRECISION_FAST}; /* decoding: speed over batch-independence */
  icl_model *m;
  icl_error err = {0};
  if ((rc = icl_model_load(a.model, &o, &m, &err))) {
    fprintf(stderr, "icl run: %s\n", err.msg);
    return rc == ICL_EIO || rc == ICL_EFORMAT || rc == ICL_EUNSUPPORTED || rc == ICL_EINVAL ? 2 : 1;
  }
  rc = generate(m, &a);
  icl_model_free(m);
  return rc;
}
