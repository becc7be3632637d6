/* icl bench model / icl bench hooks: whole-model throughput (prefill, decode, all-logits forward) and the
 * overhead of hook captures, each best of a few repetitions. `bench model --once` runs one prefill or one
 * decode and nothing else, so ICL_PROFILE=1 times exactly that. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "bench_roofline.h"
#include "cli_common.h"
#include "icl/model.h"

typedef struct bench_opts {
  const char *model, *backend, *once; /* once: "prefill" or "decode" */
  long tokens, reps, layer, decode;
  int precision; /* default fast: decode timed as `icl run` decodes */
  int have_ceil;  /* --ceilings given */
  icl_cpu_ceilings ceil;
} bench_opts;

static int parse_bench(const char *cmd, int argc, char **argv, bench_opts *o) {
  *o = (bench_opts){.tokens = 1400, .reps = 3, .layer = -1, .decode = 128, .precision = ICL_PRECISION_FAST};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf("usage: icl bench %s -m MODEL [--backend B] [--tokens N] [--reps R] [--precision exact|fast]%s\n", cmd,
             strcmp(cmd, "hooks") ? " [--decode D] [--once prefill|decode]\n       [--ceilings FMA,INT8,READ]"
                                  : " [--layer L]");
      if (strcmp(cmd, "hooks"))
        printf("  prefill 128, 512 (those below N) and N tokens (default 1400), decode D steps (default 128),\n"
               "  an N-token forward with all-position logits; --once: one prefill of N or D decode steps only;\n"
               "  --precision: the backend precision (default fast, as `icl run`); on the CPU backend each row is\n"
               "  followed by a roofline line against the ceilings of `icl bench cpu`, measured at the start\n"
               "  or given by --ceilings (GFLOP/s, GOP/s, GB/s: one measurement for a series of runs)\n");
      exit(0);
    }
    if (!v) { fprintf(stderr, "icl bench %s: %s needs a value\n", cmd, a); return 2; }
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "--backend")) o->backend = v;
    else if (!strcmp(a, "--tokens")) { if (cli_int("bench", a, v, 2, 1 << 20, &o->tokens)) return 2; }
    else if (!strcmp(a, "--reps")) { if (cli_int("bench", a, v, 1, 1000, &o->reps)) return 2; }
    else if (!strcmp(a, "--layer")) { if (cli_int("bench", a, v, 0, 4096, &o->layer)) return 2; }
    else if (!strcmp(a, "--decode")) { if (cli_int("bench", a, v, 1, 1 << 20, &o->decode)) return 2; }
    else if (!strcmp(a, "--once") && (!strcmp(v, "prefill") || !strcmp(v, "decode"))) o->once = v;
    else if (!strcmp(a, "--precision") && !strcmp(v, "exact")) o->precision = ICL_PRECISION_EXACT;
    else if (!strcmp(a, "--precision") && !strcmp(v, "fast")) o->precision = ICL_PRECISION_FAST;
    else if (!strcmp(a, "--ceilings") && strcmp(cmd, "hooks")) {
      if (bench_roof_parse(v, &o->ceil)) {
        fprintf(stderr, "icl bench %s: --ceilings '%s': expected three finite positive numbers FMA,INT8,READ "
                        "(GFLOP/s, GOP/s, GB/s)\n", cmd, v);
        return 2;
      }
      o->have_ceil = 1;
    }
    else { fprintf(stderr, "icl bench %s: unknown option '%s'\n", cmd, a); return 2; }
    i++;
  }
  if (!o->model) { fprintf(stderr, "icl bench %s: -m MODEL is required\n", cmd); return 2; }
  return 0;
}

static icl_model *open_model(const bench_opts *o, long n_ctx) {
  icl_load_opts lo = {.backend = o->backend, .device = -1, .n_ctx = (int)n_ctx, .precision = o->precision};
  icl_model *m = NULL;
  icl_error e = {0};
  if (icl_model_load(o->model, &lo, &m, &e)) fprintf(stderr, "icl bench: %s\n", e.msg);
  return m;
}

/* Deterministic pseudo-random tokens (speed does not depend on content). */
static int32_t *make_tokens(const icl_model *m, long n) {
  int32_t *t = malloc((size_t)n * sizeof *t);
  uint64_t s = 12345;
  for (long i = 0; t && i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t[i] = (int32_t)((s >> 33) % (uint64_t)(icl_model_hparams(m)->n_vocab / 2));
  }
  return t;
}

/* Best wall time of reps runs of icl_model_run with opts. */
static double time_run(icl_model *m, const int32_t *t, long n, const icl_run_opts *opts, long reps) {
  double best = 1e30;
  for (long r = 0; r < reps; r++) {
    icl_run_result res;
    icl_error e = {0};
    double t0 = cli_now();
    if (icl_model_run(m, t, n, opts, &res, &e)) {
      fprintf(stderr, "icl bench: %s\n", e.msg);
      return -1;
    }
    double dt = cli_now() - t0;
    icl_run_result_free(&res);
    if (dt < best) best = dt;
  }
  return best;
}

/* Best prefill time of n tokens and decode rate over `steps` single-token steps after a short prompt. */
static int time_session(icl_model *m, const int32_t *t, long n, long steps, long reps, double *prefill, double *decode) {
  icl_session *s = NULL;
  icl_error e = {0};
  float *logits = malloc((size_t)icl_model_hparams(m)->n_vocab * sizeof *logits);
  int rc = logits ? icl_session_new(m, &s, &e) : ICL_ENOMEM;
  *prefill = *decode = 1e30;
  for (long r = 0; r < reps && !rc; r++) {
    icl_session_reset(s);
    double t0 = cli_now();
    rc = icl_session_eval(s, t, n, logits, 0, &e);
    double t1 = cli_now();
    if (t1 - t0 < *prefill) *prefill = t1 - t0;
    icl_session_reset(s);
    if (!rc) rc = icl_session_eval(s, t, 8, logits, 0, &e);
    double t2 = cli_now();
    for (long i = 0; i < steps && !rc; i++) rc = icl_session_eval(s, t + 8 + i, 1, logits, 0, &e);
    double t3 = cli_now();
    if (t3 - t2 < *decode) *decode = t3 - t2;
  }
  if (rc) fprintf(stderr, "icl bench: %s\n", e.msg);
  icl_session_free(s);
  free(logits);
  return rc;
}

/* --once: one prefill of n tokens, or an 8-token prompt then `steps` decode steps, and nothing else (no
 * warm-up, no repetition), so an ICL_PROFILE=1 table holds exactly that work. */
static int run_once(icl_model *m, const int32_t *t, const bench_opts *o, const bench_roof *roof) {
  int decode = !strcmp(o->once, "decode");
  long n = decode ? 8 : o->tokens;
  icl_session *s = NULL;
  icl_error e = {0};
  float *logits = malloc((size_t)icl_model_hparams(m)->n_vocab * sizeof *logits);
  int rc = logits ? icl_session_new(m, &s, &e) : icl_error_set(&e, ICL_ENOMEM, "out of memory");
  double t0 = cli_now();
  if (!rc) rc = icl_session_eval(s, t, n, logits, 0, &e);
  double t1 = cli_now();
  for (long i = 0; decode && i < o->decode && !rc; i++) rc = icl_session_eval(s, t + n + i, 1, logits, 0, &e);
  double t2 = cli_now();
  if (rc) fprintf(stderr, "icl bench: %s\n", e.msg);
  else if (decode) printf("%-34s %10.3f %12.1f\n", "decode (once, after 8 tokens)", t2 - t1, o->decode / (t2 - t1));
  else printf("prefill %-26ld %10.3f %12.1f\n", n, t1 - t0, n / (t1 - t0));
  if (!rc && decode) bench_roof_decode(roof, n, o->decode, t2 - t1);
  else if (!rc) bench_roof_prefill(roof, n, 1, t1 - t0);
  icl_session_free(s);
  free(logits);
  return rc;
}

/* Prefill 128, 512 (those below n) and n tokens; decode after the first. */
static int bench_sizes(icl_model *m, const int32_t *t, const bench_opts *o, const bench_roof *roof) {
  long sizes[3] = {128, 512, o->tokens};
  int rc = 0, first = 1;
  for (int i = 0; i < 3 && !rc; i++) {
    if (i < 2 && sizes[i] >= o->tokens) continue;
    double pf, dec;
    rc = time_session(m, t, sizes[i], first ? o->decode : 0, o->reps, &pf, &dec);
    if (rc) break;
    printf("prefill %-26ld %10.3f %12.1f\n", sizes[i], pf, sizes[i] / pf);
    bench_roof_prefill(roof, sizes[i], 1, pf);
    if (first) {
      char what[48];
      snprintf(what, sizeof what, "decode %ld (after 8 tokens)", o->decode);
      printf("%-34s %10.3f %12.1f\n", what, dec, o->decode / dec);
      bench_roof_decode(roof, 8, o->decode, dec);
    }
    first = 0;
  }
  return rc;
}

/* Counts of the backend's work (icl_model_work_counts) for one decoded token after an 8-token prompt and for one
 * prefill chunk of up to 512 tokens: dispatches (per layer too), barriers, submits, host waits, and bytes bound
 * for reading against the weights' size. Deterministic, unlike the times. */
static int print_counts(icl_model *m, const int32_t *t, long n) {
  icl_work_counts c0, c1, c2, c3;
  icl_error e = {0};
  if (icl_model_work_counts(m, &c0, &e)) return printf("counts: %s\n", e.msg), 0;
  icl_session *s = NULL;
  float *logits = malloc((size_t)icl_model_hparams(m)->n_vocab * sizeof *logits);
  long chunk = n < 512 ? n : 512;
  int rc = logits ? icl_session_new(m, &s, &e) : icl_error_set(&e, ICL_ENOMEM, "out of memory");
  if (!rc) rc = icl_session_eval(s, t, 8, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c0, &e);
  if (!rc) rc = icl_session_eval(s, t + 8, 1, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c1, &e);
  if (!rc) icl_session_reset(s);
  if (!rc) rc = icl_model_work_counts(m, &c2, &e);
  if (!rc) rc = icl_session_eval(s, t, chunk, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c3, &e);
  if (rc) fprintf(stderr, "icl bench: %s\n", e.msg);
  int nl = icl_model_hparams(m)->n_layer;
  double wmb = (double)icl_model_weight_bytes(m) / (1 << 20);
  const icl_work_counts *a[2] = {&c0, &c2}, *b[2] = {&c1, &c3};
  for (int i = 0; i < 2 && !rc; i++) {
    uint64_t d = b[i]->dispatches - a[i]->dispatches;
    char what[48];
    snprintf(what, sizeof what, i ? "prefill chunk of %ld tokens" : "decoded token", chunk);
    printf("counts per %-28s dispatches %llu (%.1f per layer), barriers %llu, submits %llu, host waits %llu, "
           "read %.1f MiB (weights %.1f MiB)\n", what, (unsigned long long)d, (double)d / nl,
           (unsigned long long)(b[i]->barriers - a[i]->barriers), (unsigned long long)(b[i]->submits - a[i]->submits),
           (unsigned long long)(b[i]->host_waits - a[i]->host_waits),
           (double)(b[i]->bytes_read - a[i]->bytes_read) / (1 << 20), wmb);
  }
  icl_session_free(s);
  free(logits);
  return rc;
}

int icl_bench_model(int argc, char **argv) {
  bench_opts o;
  if (parse_bench("model", argc, argv, &o)) return 2;
  long n = o.tokens > 8 + o.decode ? o.tokens : 8 + o.decode;
  icl_model *m = open_model(&o, n + 8);
  if (!m) return 2;
  int32_t *t = make_tokens(m, n + 8);
  printf("model: %s\nbackend: %s\nprecision: %s\n", icl_model_hparams(m)->name, icl_model_device(m),
         o.precision == ICL_PRECISION_EXACT ? "exact" : "fast");
  bench_roof roof;
  bench_roof_init(m, o.precision, o.have_ceil ? &o.ceil : NULL, &roof);
  printf("%-34s %10s %12s\n", "measure", "seconds", "tokens/s");
  int rc = 0;
  double dt = 1;
  if (o.once) {
    rc = run_once(m, t, &o, &roof);
  } else {
    double warm_p, warm_d; /* warm-up: first dispatches compile pipelines (lavapipe JIT) and fault in pages */
    rc = time_session(m, t, o.tokens < 64 ? o.tokens : 64, 4, 1, &warm_p, &warm_d);
    if (!rc) rc = bench_sizes(m, t, &o, &roof);
    icl_run_opts all = {.logits = ICL_LOGITS_ALL};
    dt = rc ? -1 : time_run(m, t, o.tokens, &all, o.reps);
    char what[48];
    snprintf(what, sizeof what, "forward %ld, all-position logits", o.tokens);
    if (dt > 0) printf("%-34s %10.3f %12.1f\n", what, dt, o.tokens / dt);
    if (dt > 0) bench_roof_prefill(&roof, o.tokens, o.tokens, dt);
    if (!rc && dt > 0) rc = print_counts(m, t, o.tokens);
  }
  bench_roof_free(&roof);
  free(t);
  icl_model_free(m);
  return rc || dt < 0 ? 1 : 0;
}

int icl_bench_hooks(int argc, char **argv) {
  bench_opts o;
  if (parse_bench("hooks", argc, argv, &o)) return 2;
  icl_model *m = open_model(&o, o.tokens);
  if (!m) return 2;
  int L = o.layer >= 0 ? (int)o.layer : icl_model_hparams(m)->n_layer / 2;
  int32_t *t = make_tokens(m, o.tokens);
  char resid[64], pattern[64];
  snprintf(resid, sizeof resid, "blocks.%d.hook_resid_post", L);
  snprintf(pattern, sizeof pattern, "blocks.%d.attn.hook_pattern", L);
  icl_capture c_resid = {.pattern = resid}, c_pat = {.pattern = pattern};
  icl_run_opts plain = {.logits = ICL_LOGITS_LAST};
  icl_run_opts with_resid = plain, with_pat = plain;
  with_resid.captures = &c_resid, with_resid.n_captures = 1;
  with_pat.captures = &c_pat, with_pat.n_captures = 1;
  printf("model: %s\nbackend: %s\ntokens: %ld, best of %ld\n", icl_model_hparams(m)->name, icl_model_device(m),
         o.tokens, o.reps);
  time_run(m, t, o.tokens, &plain, 1); /* warm-up */
  double base = time_run(m, t, o.tokens, &plain, o.reps);
  double r1 = time_run(m, t, o.tokens, &with_resid, o.reps);
  double r2 = time_run(m, t, o.tokens, &with_pat, o.reps);
  int rc = base < 0 || r1 < 0 || r2 < 0;
  if (!rc) {
    printf("%-44s %9.3f s\n", "plain run (last-position logits)", base);
    printf("%-44s %9.3f s  overhead %+6.2f%%\n", resid, r1, 100 * (r1 / base - 1));
    printf("%-44s %9.3f s  overhead %+6.2f%%\n", pattern, r2, 100 * (r2 / base - 1));
  }
  free(t);
  icl_model_free(m);
  return rc;
}
