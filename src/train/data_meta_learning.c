/* In-context meta-learning sequences (include/icl/data_meta.h), following the protocol of the paper's public
 * code: mu_k ~ N(0, I/D), base labels b_k ~ U{0..L-1}, items (mu_k + eps*eta)/sqrt(1+eps^2) with
 * eta ~ N(0, I/D), one task per sequence, N distinct context classes, query class from all K classes.
 * Item positions carry x ++ one-hot(pair index); label positions carry the label id as the token. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icl/data_meta.h"
#include "train_rng.h"

struct icl_meta_task {
  icl_meta_config c;
  float *mu;          /* [K, D] */
  int32_t *base, *off; /* [K], [T, K] */
  double *task_cdf, *class_w; /* [T] cumulative task probabilities, [K] class weights */
};

/* ---- random numbers: splitmix64 streams ------------------------------------------------------ */

/* Uniform in [0, 1) with 53 bits. */
static double unif(uint64_t *s) { return (double)(tr_splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

/* Uniform integer in [0, n). */
static int below(uint64_t *s, int n) { return (int)(unif(s) * n); }

/* Standard normal (Box-Muller, one value per call). */
static double gauss(uint64_t *s) {
  double u = 1.0 - unif(s), v = unif(s);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* A stream keyed by the seed and three more words. */
static uint64_t stream_key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = seed;
  s = tr_splitmix(&s) ^ a;
  s = tr_splitmix(&s) ^ b;
  s = tr_splitmix(&s) ^ c;
  return tr_splitmix(&s);
}

/* ---- the dataset ---------------------------------------------------------------------------- */

static int fill_defaults(icl_meta_config *c, icl_error *err) {
  if (!c->K) c->K = 64;
  if (!c->T) c->T = 3;
  if (!c->N) c->N = 4;
  if (!c->L) c->L = 32;
  if (!c->D) c->D = 63;
  if (!c->P) c->P = 65;
  if (c->K < 1 || c->T < 1 || c->L < 1 || c->D < 1)
    return icl_error_set(err, ICL_EINVAL, "meta_learning: K=%d T=%d L=%d D=%d, expected all >= 1", c->K, c->T,
                         c->L, c->D);
  if (c->K > (1 << 16) || c->T > (1 << 16) || c->L > (1 << 24) || c->D > (1 << 16) || c->P > (1 << 16))
    return icl_error_set(err, ICL_EINVAL, "meta_learning: K=%d T=%d L=%d D=%d P=%d, expected K, T, D, P <= 65536 "
                         "and L <= 16777216", c->K, c->T, c->L, c->D, c->P);
  if ((int64_t)c->K * c->D > (1 << 28) || (int64_t)c->T * c->K > (1 << 28))
    return icl_error_set(err, ICL_EINVAL, "meta_learning: K*D = %lld and T*K = %lld, expected each <= 2^28",
                         (long long)c->K * c->D, (long long)c->T * c->K);
  if (c->N < 1 || c->N > c->K || c->P < c->N + 1)
    return icl_error_set(err, ICL_EINVAL, "meta_learning: N=%d with K=%d, P=%d, expected 1 <= N <= K and P >= N+1",
                         c->N, c->K, c->P);
  if (!isfinite(c->eps) || c->eps < 0 || !isfinite(c->alpha) || c->alpha < 0 || c->alpha > 100 ||
      !isfinite(c->alpha_class) || c->alpha_class < 0 || c->alpha_class > 100)
    return icl_error_set(err, ICL_EINVAL, "meta_learning: eps = %g, alpha = %g, alpha_class = %g, expected finite, "
                         "eps >= 0, alphas in [0, 100]", (double)c->eps, (double)c->alpha, (double)c->alpha_class);
  if (c->offsets != ICL_META_OFFSET_TASK && c->offsets != ICL_META_OFFSET_RANDOM)
    return icl_error_set(err, ICL_EINVAL, "meta_learning: offsets = %d, expected task (0) or random (1)", c->offsets);
  return ICL_OK;
}

/* Zipf weights 1/(i+1)^alpha for i < n. */
static void zipf(double *w, int n, double alpha) {
  for (int i = 0; i < n; i++) w[i] = pow(i + 1.0, -alpha);
}

static void draw_dataset(icl_meta_task *m) {
  const icl_meta_config *c = &m->c;
  uint64_t s = stream_key(c->seed, 0x6d657461u, 0, 0);
  double sd = 1.0 / sqrt((double)c->D);
  for (int64_t i = 0; i < (int64_t)c->K * c->D; i++) m->mu[i] = (float)(sd * gauss(&s));
  for (int k = 0; k < c->K; k++) m->base[k] = below(&s, c->L);
  for (int t = 0; t < c->T; t++)
    for (int k = 0; k < c->K; k++)
      m->off[t * c->K + k] = c->offsets == ICL_META_OFFSET_RANDOM ? (t ? below(&s, c->L) : 0) : t % c->L;
  zipf(m->task_cdf, c->T, c->alpha);
  for (int t = 1; t < c->T; t++) m->task_cdf[t] += m->task_cdf[t - 1];
  for (int t = 0; t < c->T; t++) m->task_cdf[t] /= m->task_cdf[c->T - 1];
  zipf(m->class_w, c->K, c->alpha_class);
}

int icl_meta_new(const icl_meta_config *cfg, icl_meta_task **out, icl_error *err) {
  *out = NULL;
  icl_meta_task *m = calloc(1, sizeof *m);
  if (!m) return icl_error_set(err, ICL_ENOMEM, "meta_learning: out of memory");
  m->c = *cfg;
  int rc = fill_defaults(&m->c, err);
  if (rc) return free(m), rc;
  const icl_meta_config *c = &m->c;
  m->mu = malloc((size_t)c->K * c->D * sizeof *m->mu);
  m->base = malloc((size_t)c->K * sizeof *m->base);
  m->off = malloc((size_t)c->T * c->K * sizeof *m->off);
  m->task_cdf = malloc((size_t)c->T * sizeof *m->task_cdf);
  m->class_w = malloc((size_t)c->K * sizeof *m->class_w);
  if (!m->mu || !m->base || !m->off || !m->task_cdf || !m->class_w) {
    int K = c->K;
    icl_meta_free(m);
    return icl_error_set(err, ICL_ENOMEM, "meta_learning: out of memory for K=%d classes", K);
  }
  draw_dataset(m);
  *out = m;
  return ICL_OK;
}

void icl_meta_free(icl_meta_task *m) {
  if (!m) return;
  free(m->mu), free(m->base), free(m->off), free(m->task_cdf), free(m->class_w);
  free(m);
}

const icl_meta_config *icl_meta_config_of(const icl_meta_task *m) { return &m->c; }
int icl_meta_seq_len(const icl_meta_task *m) { return 2 * m->c.N + 1; }
const float *icl_meta_mean(const icl_meta_task *m, int k) { return m->mu + (int64_t)k * m->c.D; }

int icl_meta_label(const icl_meta_task *m, int t, int k) {
  return (m->base[k] + m->off[t * m->c.K + k]) % m->c.L;
}

double icl_meta_task_prob(const icl_meta_task *m, int t) {
  return m->task_cdf[t] - (t ? m->task_cdf[t - 1] : 0.0);
}

/* ---- sequences ------------------------------------------------------------------------------ */

static int draw_task(const icl_meta_task *m, uint64_t *s) {
  double u = unif(s);
  int t = 0;
  while (t + 1 < m->c.T && u >= m->task_cdf[t]) t++;
  return t;
}

/* A class by the Zipf weights among those not yet taken (taken may be NULL: with repetition). */
static int draw_class(const icl_meta_task *m, uint64_t *s, const unsigned char *taken) {
  if (m->c.alpha_class == 0.0f && !taken) return below(s, m->c.K);
  double total = 0.0;
  for (int k = 0; k < m->c.K; k++) total += taken && taken[k] ? 0.0 : m->class_w[k];
  double u = unif(s) * total;
  int last = 0;
  for (int k = 0; k < m->c.K; k++) {
    if (taken && taken[k]) continue;
    last = k;
    if ((u -= m->class_w[k]) < 0.0) return k;
  }
  return last;
}

/* Writes the item of class k at pair index i into one row of inputs (D + P floats). */
static void put_item(const icl_meta_task *m, uint64_t *s, int k, int i, float *row) {
  const icl_meta_config *c = &m->c;
  double sd = 1.0 / sqrt((double)c->D), norm = 1.0 / sqrt(1.0 + (double)c->eps * c->eps);
  const float *mu = icl_meta_mean(m, k);
  for (int d = 0; d < c->D; d++) row[d] = (float)((mu[d] + c->eps * sd * gauss(s)) * norm);
  memset(row + c->D, 0, (size_t)c->P * sizeof *row);
  row[c->D + i] = 1.0f;
}

/* Context classes of one sequence: distinct in training, with repetition for random labels. */
static void draw_context(const icl_meta_task *m, uint64_t *s, int mode, int32_t *cls, unsigned char *taken) {
  memset(taken, 0, (size_t)m->c.K);
  for (int i = 0; i < m->c.N; i++) {
    cls[i] = draw_class(m, s, mode == ICL_META_TRAIN ? taken : NULL);
    taken[cls[i]] = 1;
  }
}

/* One sequence b of the batch. */
static void one_seq(const icl_meta_task *m, uint64_t *s, int mode, int64_t b, const icl_meta_batch *o,
                    unsigned char *taken) {
  const icl_meta_config *c = &m->c;
  int n = 2 * c->N + 1, w = c->D + c->P;
  int32_t *tk = o->tokens + b * n, *tg = o->targets + b * n, *cls = o->classes + b * (c->N + 1);
  float *in = o->inputs + b * n * w;
  int t = draw_task(m, s);
  draw_context(m, s, mode, cls, taken);
  cls[c->N] = draw_class(m, s, NULL);
  o->tasks[b] = t;
  memset(in, 0, (size_t)n * w * sizeof *in);
  for (int i = 0; i <= c->N; i++) {
    put_item(m, s, cls[i], i, in + (int64_t)2 * i * w);
    tk[2 * i] = -1, tg[2 * i] = -1;
    if (i == c->N) break;
    tk[2 * i + 1] = mode == ICL_META_TRAIN ? icl_meta_label(m, t, cls[i]) : below(s, c->L);
    tg[2 * i + 1] = -1;
    if (c->label_pos) in[(int64_t)(2 * i + 1) * w + c->D + i] = 1.0f;
  }
  tg[2 * c->N] = icl_meta_label(m, t, cls[c->N]);
}

int icl_meta_sample(const icl_meta_task *m, int64_t B, uint64_t stream, int64_t step, int mode,
                    const icl_meta_batch *out, icl_error *err) {
  unsigned char *taken = malloc((size_t)m->c.K);
  if (!taken) return icl_error_set(err, ICL_ENOMEM, "meta_learning: out of memory for a batch");
  for (int64_t b = 0; b < B; b++) {
    uint64_t s = stream_key(m->c.seed, stream, (uint64_t)step, (uint64_t)b);
    one_seq(m, &s, mode, b, out, taken);
  }
  free(taken);
  return ICL_OK;
}
