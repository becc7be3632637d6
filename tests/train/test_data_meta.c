/* The in-context meta-learning generator (include/icl/data_meta.h): layout, labels, noise, frequencies,
 * determinism, checked against values computed here from the task's own parameters. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl/data_meta.h"
#include "testutil.h"

typedef struct bufs {
  int64_t B;
  int n, w, N;
  icl_meta_batch b;
} bufs;

static bufs alloc_bufs(const icl_meta_task *m, int64_t B) {
  const icl_meta_config *c = icl_meta_config_of(m);
  bufs x = {.B = B, .n = icl_meta_seq_len(m), .w = c->D + c->P, .N = c->N};
  x.b.tokens = malloc((size_t)(B * x.n) * sizeof(int32_t));
  x.b.targets = malloc((size_t)(B * x.n) * sizeof(int32_t));
  x.b.classes = malloc((size_t)(B * (c->N + 1)) * sizeof(int32_t));
  x.b.tasks = malloc((size_t)B * sizeof(int32_t));
  x.b.inputs = malloc((size_t)(B * x.n * x.w) * sizeof(float));
  return x;
}

static void free_bufs(bufs *x) {
  free(x->b.tokens), free(x->b.targets), free(x->b.classes), free(x->b.tasks), free(x->b.inputs);
}

static icl_meta_task *make(icl_meta_config c) {
  icl_meta_task *m;
  icl_error err;
  if (icl_meta_new(&c, &m, &err)) {
    fprintf(stderr, "icl_meta_new: %s\n", err.msg);
    exit(1);
  }
  return m;
}

static void sample(const icl_meta_task *m, bufs *x, uint64_t stream, int64_t step, int mode) {
  icl_error err;
  CHECK(icl_meta_sample(m, x->B, stream, step, mode, &x->b, &err) == ICL_OK);
}

/* Defaults, shape, tokens/targets layout and the one-hot positions. */
static void test_layout(void) {
  icl_meta_task *m = make((icl_meta_config){.eps = 0.1f, .seed = 7});
  const icl_meta_config *c = icl_meta_config_of(m);
  CHECK(c->K == 64 && c->T == 3 && c->N == 4 && c->L == 32 && c->D == 63 && c->P == 65);
  CHECK(icl_meta_seq_len(m) == 9);
  bufs x = alloc_bufs(m, 64);
  CHECK(x.w == 128);
  sample(m, &x, 0, 0, ICL_META_TRAIN);
  int ok_tok = 1, ok_pos = 1, ok_lab = 1;
  for (int64_t b = 0; b < x.B; b++)
    for (int p = 0; p < x.n; p++) {
      const float *row = x.b.inputs + (b * x.n + p) * x.w;
      int item = p % 2 == 0;
      if (item != (x.b.tokens[b * x.n + p] == -1)) ok_tok = 0;
      if ((p == x.n - 1) != (x.b.targets[b * x.n + p] >= 0)) ok_tok = 0;
      float s = 0.0f;
      for (int d = c->D; d < x.w; d++) s += row[d];
      if (item && (s != 1.0f || row[c->D + p / 2] != 1.0f)) ok_pos = 0;
      if (!item && s != 0.0f) ok_lab = 0;
      for (int d = 0; !item && d < c->D; d++)
        if (row[d] != 0.0f) ok_lab = 0;
    }
  CHECKF(ok_tok, "tokens -1 exactly at items, only the query scored");
  CHECKF(ok_pos, "items carry one-hot(pair index) at D + i");
  CHECKF(ok_lab, "label positions carry no input (label_pos = 0)");
  free_bufs(&x);
  icl_meta_free(m);
  m = make((icl_meta_config){.eps = 0.1f, .seed = 7, .label_pos = 1});
  x = alloc_bufs(m, 4);
  sample(m, &x, 0, 0, ICL_META_TRAIN);
  CHECK(x.b.inputs[(int64_t)3 * x.w + 63 + 1] == 1.0f); /* label of pair 1 at position 3 */
  free_bufs(&x);
  icl_meta_free(m);
}

/* Labels: (b_k + o_{t,k}) mod L in the context and at the query; distinct context classes. */
static void test_labels(void) {
  icl_meta_task *m = make((icl_meta_config){.eps = 0.1f, .seed = 3});
  int ok_off = 1;
  for (int t = 0; t < 3; t++)
    for (int k = 0; k < 64; k++)
      if (icl_meta_label(m, t, k) != (icl_meta_label(m, 0, k) + t) % 32) ok_off = 0;
  CHECKF(ok_off, "offsets o_{t,k} = t (the paper's code)");
  bufs x = alloc_bufs(m, 2000);
  sample(m, &x, 1, 5, ICL_META_TRAIN);
  int ok_ctx = 1, ok_q = 1, distinct = 1, in_ctx = 0;
  for (int64_t b = 0; b < x.B; b++) {
    const int32_t *cl = x.b.classes + b * 5, *tk = x.b.tokens + b * x.n;
    int t = x.b.tasks[b];
    for (int i = 0; i < 4; i++) {
      if (tk[2 * i + 1] != icl_meta_label(m, t, cl[i])) ok_ctx = 0;
      for (int j = 0; j < i; j++) distinct &= cl[i] != cl[j];
      in_ctx += cl[i] == cl[4];
    }
    if (x.b.targets[b * x.n + 8] != icl_meta_label(m, t, cl[4])) ok_q = 0;
  }
  CHECK(ok_ctx && ok_q && distinct);
  double p = in_ctx / 2000.0; /* query among the 4 context classes: 4/64 */
  CHECKF(fabs(p - 4.0 / 64) < 0.02, "query class in the context: %.3f, expected 0.0625", p);
  sample(m, &x, 2, 0, ICL_META_RANDOM_LABELS);
  int agree = 0, ok_rq = 1;
  for (int64_t b = 0; b < x.B; b++) {
    const int32_t *cl = x.b.classes + b * 5;
    for (int i = 0; i < 4; i++) agree += x.b.tokens[b * x.n + 2 * i + 1] == icl_meta_label(m, x.b.tasks[b], cl[i]);
    if (x.b.targets[b * x.n + 8] != icl_meta_label(m, x.b.tasks[b], cl[4])) ok_rq = 0;
  }
  CHECKF(agree / 8000.0 < 0.06, "random labels agree with the task %.3f of the time (1/32 expected)", agree / 8000.0);
  CHECK(ok_rq);
  free_bufs(&x);
  icl_meta_free(m);
  m = make((icl_meta_config){.T = 4, .offsets = ICL_META_OFFSET_RANDOM, .seed = 3});
  int varied = 0;
  for (int k = 0; k < 64; k++) varied += (icl_meta_label(m, 1, k) - icl_meta_label(m, 0, k) + 32) % 32 != 1;
  CHECKF(varied > 32, "random offsets differ per class (%d of 64 not +1)", varied);
  icl_meta_free(m);
}

/* Means ~ N(0, I/D), items (mu + eps eta)/sqrt(1+eps^2): |x|^2 ~ 1, |x sqrt(1+eps^2) - mu|^2 ~ eps^2. */
static void test_items(void) {
  const float eps = 0.25f;
  icl_meta_task *m = make((icl_meta_config){.eps = eps, .seed = 11});
  double mean = 0, var = 0;
  for (int k = 0; k < 64; k++)
    for (int d = 0; d < 63; d++) mean += icl_meta_mean(m, k)[d], var += icl_meta_mean(m, k)[d] * icl_meta_mean(m, k)[d];
  mean /= 64 * 63, var = var / (64 * 63) - mean * mean;
  CHECKF(fabs(mean) < 0.01 && fabs(var * 63 - 1) < 0.06, "mu: mean %.4f, var*D %.4f", mean, var * 63);
  bufs x = alloc_bufs(m, 1000);
  sample(m, &x, 0, 1, ICL_META_TRAIN);
  double n2 = 0, e2 = 0, s = sqrt(1.0 + (double)eps * eps);
  for (int64_t b = 0; b < x.B; b++)
    for (int i = 0; i <= 4; i++) {
      const float *row = x.b.inputs + (b * x.n + 2 * i) * x.w, *mu = icl_meta_mean(m, x.b.classes[b * 5 + i]);
      for (int d = 0; d < 63; d++) n2 += row[d] * row[d], e2 += (row[d] * s - mu[d]) * (row[d] * s - mu[d]);
    }
  n2 /= 5000, e2 /= 5000;
  CHECKF(fabs(e2 / (eps * eps) - 1) < 0.03, "noise |eps eta|^2 = %.5f, expected %.5f", e2, (double)eps * eps);
  double mu2 = 0;
  for (int k = 0; k < 64; k++)
    for (int d = 0; d < 63; d++) mu2 += icl_meta_mean(m, k)[d] * icl_meta_mean(m, k)[d];
  mu2 /= 64;
  CHECKF(fabs(n2 - (mu2 + eps * eps) / (s * s)) < 0.03, "|x|^2 = %.4f, expected %.4f", n2, (mu2 + eps * eps) / (s * s));
  free_bufs(&x);
  icl_meta_free(m);
}

/* Same (seed, stream, step) -> the same bytes; anything else -> different sequences. */
static void test_determinism(void) {
  icl_meta_task *a = make((icl_meta_config){.eps = 0.1f, .seed = 5}), *b = make((icl_meta_config){.eps = 0.1f, .seed = 5});
  bufs x = alloc_bufs(a, 32), y = alloc_bufs(b, 32);
  size_t bytes = (size_t)(32 * x.n * x.w) * sizeof(float);
  sample(a, &x, 0, 42, ICL_META_TRAIN);
  sample(b, &y, 0, 42, ICL_META_TRAIN);
  CHECK(!memcmp(x.b.inputs, y.b.inputs, bytes) && !memcmp(x.b.tokens, y.b.tokens, (size_t)(32 * x.n) * 4));
  CHECK(!memcmp(icl_meta_mean(a, 0), icl_meta_mean(b, 0), 64 * 63 * sizeof(float)));
  sample(b, &y, 0, 43, ICL_META_TRAIN);
  CHECK(memcmp(x.b.inputs, y.b.inputs, bytes) != 0);
  sample(b, &y, 1, 42, ICL_META_TRAIN);
  CHECK(memcmp(x.b.inputs, y.b.inputs, bytes) != 0);
  icl_meta_task *c = make((icl_meta_config){.eps = 0.1f, .seed = 6});
  CHECK(memcmp(icl_meta_mean(a, 0), icl_meta_mean(c, 0), 64 * 63 * sizeof(float)) != 0);
  free_bufs(&x), free_bufs(&y);
  icl_meta_free(a), icl_meta_free(b), icl_meta_free(c);
}

/* Zipf: task t with probability (t+1)^-alpha / H; query classes likewise with alpha_class. */
static void test_zipf(void) {
  icl_meta_task *m = make((icl_meta_config){.K = 8, .N = 2, .alpha = 1.0f, .alpha_class = 1.0f, .seed = 9});
  double H = 1 + 0.5 + 1.0 / 3, Hk = 0;
  for (int k = 0; k < 8; k++) Hk += 1.0 / (k + 1);
  CHECK(fabs(icl_meta_task_prob(m, 0) - 1 / H) < 1e-12 && fabs(icl_meta_task_prob(m, 2) - 1 / (3 * H)) < 1e-12);
  bufs x = alloc_bufs(m, 30000);
  sample(m, &x, 0, 0, ICL_META_TRAIN);
  int nt[3] = {0}, nq[8] = {0};
  for (int64_t b = 0; b < x.B; b++) nt[x.b.tasks[b]]++, nq[x.b.classes[b * 3 + 2]]++;
  for (int t = 0; t < 3; t++)
    CHECKF(fabs(nt[t] / 30000.0 - 1 / ((t + 1) * H)) < 0.01, "task %d: %.4f vs %.4f", t, nt[t] / 30000.0, 1 / ((t + 1) * H));
  for (int k = 0; k < 8; k += 7)
    CHECKF(fabs(nq[k] / 30000.0 - 1 / ((k + 1) * Hk)) < 0.01, "class %d: %.4f vs %.4f", k, nq[k] / 30000.0, 1 / ((k + 1) * Hk));
  free_bufs(&x);
  icl_meta_free(m);
}

static void test_errors(void) {
  icl_meta_task *m = (icl_meta_task *)&m;
  icl_error err;
  CHECK(icl_meta_new(&(icl_meta_config){.K = 3, .N = 4}, &m, &err) == ICL_EINVAL && m == NULL);
  CHECK(strstr(err.msg, "N=4") != NULL);
  CHECK(icl_meta_new(&(icl_meta_config){.N = 8, .P = 8}, &m, &err) == ICL_EINVAL);
}

int main(void) {
  test_layout();
  test_labels();
  test_items();
  test_determinism();
  test_zipf();
  test_errors();
  return t_done();
}
