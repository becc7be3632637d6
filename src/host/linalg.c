/* Host analysis: PCA through LAPACKE, class means, Dirichlet energy and the numeric inner loops of the Lua
 * library (icl.metrics, icl.heads). Pure C, no Lua: lua/l_linalg.c binds it as icl.linalg. */
#include "linalg.h"

#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- C core: PCA ----------------------------------------------------------------------------------------- */

void icl_pca_result_free(icl_pca_result *r) {
  if (!r) return;
  icl_tensor_free(r->components);
  icl_tensor_free(r->projections);
  icl_tensor_free(r->mean);
  free(r->variance);
  free(r->ratio);
  memset(r, 0, sizeof *r);
}

/* a = x - column means (double); mean receives the means. Returns 0, or -1 if x holds NaN or Inf. */
static int pca_center(const float *x, int64_t n, int64_t d, double *a, float *mean) {
  for (int64_t j = 0; j < d; j++) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i * d + j];
    if (!isfinite(s)) return -1;
    mean[j] = (float)(s / (double)n);
    for (int64_t i = 0; i < n; i++) a[i * d + j] = x[i * d + j] - s / (double)n;
  }
  return 0;
}

/* Flips the sign of component i (row i of vt [r, d]) and of column i of u [n, r] so that the entry of largest
 * magnitude (the first such) is positive. */
static void pca_fix_sign(double *vt, double *u, int64_t n, int64_t d, int64_t r, int64_t i) {
  int64_t best = 0;
  for (int64_t j = 1; j < d; j++)
    if (fabs(vt[i * d + j]) > fabs(vt[i * d + best])) best = j;
  if (vt[i * d + best] >= 0) return;
  for (int64_t j = 0; j < d; j++) vt[i * d + j] = -vt[i * d + j];
  for (int64_t p = 0; p < n; p++) u[p * r + i] = -u[p * r + i];
}

static int pca_alloc(icl_pca_result *out, int64_t n, int64_t d, int k) {
  int64_t sc[2] = {k, d}, sp[2] = {n, k}, sm[1] = {d};
  out->k = k;
  out->components = icl_tensor_new(2, sc);
  out->projections = icl_tensor_new(2, sp);
  out->mean = icl_tensor_new(1, sm);
  out->variance = malloc((size_t)k * sizeof(double));
  out->ratio = malloc((size_t)k * sizeof(double));
  return out->components && out->projections && out->mean && out->variance && out->ratio ? 0 : -1;
}

/* Copies the first k singular triplets into out. */
static void pca_fill(icl_pca_result *out, const double *a_total, const double *s, const double *u,
                     const double *vt, int64_t n, int64_t d, int64_t r) {
  double total = *a_total;
  for (int i = 0; i < out->k; i++) {
    for (int64_t j = 0; j < d; j++) out->components->data[i * d + j] = (float)vt[i * d + j];
    for (int64_t p = 0; p < n; p++) out->projections->data[p * out->k + i] = (float)(u[p * r + i] * s[i]);
    out->variance[i] = s[i] * s[i] / (double)(n > 1 ? n - 1 : 1);
    out->ratio[i] = total > 0 ? s[i] * s[i] / total : 0.0;
  }
}

int icl_pca(const float *x, int64_t n, int64_t d, int k, icl_pca_result *out, icl_error *err) {
  memset(out, 0, sizeof *out);
  int64_t r = n < d ? n : d;
  if (n < 1 || d < 1 || k < 1 || k > r)
    return icl_error_set(err, ICL_EINVAL, "pca: k = %d must be in [1, min(n, d) = %lld] for a %lld x %lld matrix",
                         k, (long long)r, (long long)n, (long long)d);
  if (n * d > INT_MAX) return icl_error_set(err, ICL_EINVAL, "pca: matrix of %lld x %lld is too large", (long long)n,
                                            (long long)d);
  double *a = malloc((size_t)(n * d) * sizeof *a), *s = malloc((size_t)r * sizeof *s);
  double *u = malloc((size_t)(n * r) * sizeof *u), *vt = malloc((size_t)(r * d) * sizeof *vt);
  int rc = ICL_OK;
  if (!a || !s || !u || !vt || pca_alloc(out, n, d, k) != 0) {
    rc = icl_error_set(err, ICL_ENOMEM, "pca: out of memory for a %lld x %lld matrix", (long long)n, (long long)d);
  } else if (pca_center(x, n, d, a, out->mean->data) != 0) {
    rc = icl_error_set(err, ICL_EINVAL, "pca: the matrix holds NaN or Inf values");
  } else {
    double total = 0;
    for (int64_t i = 0; i < n * d; i++) total += a[i] * a[i];
    lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', (lapack_int)n, (lapack_int)d, a, (lapack_int)d, s, u,
                                     (lapack_int)r, vt, (lapack_int)d);
    if (info != 0) {
      rc = icl_error_set(err, ICL_EINVAL, "pca: the SVD did not converge (LAPACKE_dgesdd info %d)", (int)info);
    } else {
      for (int64_t i = 0; i < k; i++) pca_fix_sign(vt, u, n, d, r, i);
      pca_fill(out, &total, s, u, vt, n, d, r);
    }
  }
  free(a), free(s), free(u), free(vt);
  if (rc != ICL_OK) icl_pca_result_free(out);
  return rc;
}

/* ---- C core: class means, Dirichlet energy ------------------------------------------------------------------ */

void icl_class_accumulate(const icl_tensor *x, int64_t row0, const int32_t *classes, int64_t m, int n_classes,
                          double *sums, int64_t *counts) {
  int64_t d = x->shape[x->ndim - 1];
  for (int64_t i = 0; i < m; i++) {
    int c = classes[i];
    if (c < 0 || c >= n_classes) continue;
    const float *row = x->data + (row0 + i) * d;
    for (int64_t j = 0; j < d; j++) sums[c * d + j] += row[j];
    counts[c]++;
  }
}

static double sq_dist(const float *a, const float *b, int64_t d) {
  double s = 0;
  for (int64_t j = 0; j < d; j++) s += ((double)a[j] - b[j]) * ((double)a[j] - b[j]);
  return s;
}

double icl_dirichlet_energy(const icl_tensor *x, const int64_t *edges, int64_t n_edges, int normalized) {
  int64_t d = x->shape[x->ndim - 1];
  double e = 0;
  for (int64_t k = 0; k < n_edges; k++) e += sq_dist(x->data + edges[2 * k] * d, x->data + edges[2 * k + 1] * d, d);
  if (!normalized) return n_edges ? e / (double)n_edges : 0.0;
  double frob2 = 0;
  for (int64_t i = 0; i < x->numel; i++) frob2 += (double)x->data[i] * x->data[i];
  return frob2 > 0 ? e / frob2 / (double)d : 0.0;
}

/* ---- C core: softmax masses, losses, attention-pattern scores --------------------------------------------- */

static float support_max(const float *row, int64_t n, const int32_t *support, int64_t n_support) {
  float mx = -INFINITY;
  int64_t m = support ? n_support : n;
  for (int64_t i = 0; i < m; i++) {
    float v = row[support ? support[i] : i];
    if (v > mx) mx = v;
  }
  return mx;
}

double icl_softmax_mass(const float *row, int64_t n, const int32_t *support, int64_t n_support,
                        const int32_t *targets, int64_t n_targets) {
  float mx = support_max(row, n, support, n_support);
  double z = 0, t = 0;
  int64_t m = support ? n_support : n;
  for (int64_t i = 0; i < m; i++) z += exp((double)row[support ? support[i] : i] - mx);
  for (int64_t i = 0; i < n_targets; i++) t += exp((double)row[targets[i]] - mx);
  return t / z;
}

double icl_token_nll(const float *row, int64_t n, int32_t target) {
  float mx = support_max(row, n, NULL, 0);
  double z = 0;
  for (int64_t i = 0; i < n; i++) z += exp((double)row[i] - mx);
  return log(z) + mx - row[target];
}

/* Heads, queries and keys of a pattern tensor [head, q, k] or [q, k]. */
static void pattern_dims(const icl_tensor *p, int64_t *h, int64_t *q, int64_t *k) {
  *h = p->ndim == 3 ? p->shape[0] : 1;
  *q = p->shape[p->ndim - 2];
  *k = p->shape[p->ndim - 1];
}

void icl_pattern_diag_mean(const icl_tensor *p, int64_t lag, int64_t q_from, double *out) {
  int64_t nh, nq, nk;
  pattern_dims(p, &nh, &nq, &nk);
  for (int64_t h = 0; h < nh; h++) {
    double s = 0;
    int64_t cnt = 0;
    for (int64_t q = q_from < 0 ? 0 : q_from; q < nq; q++) {
      int64_t k = q - lag;
      if (k < 0 || k >= nk) continue;
      s += p->data[(h * nq + q) * nk + k];
      cnt++;
    }
    out[h] = cnt ? s / (double)cnt : NAN;
  }
}

/* Attention of one query row summed over the matching keys; *found tells whether any key matched. */
static double match_row(const float *row, int64_t nk, const int32_t *tokens, int shift, int64_t q, int *found) {
  double s = 0;
  *found = 0;
  for (int64_t j = shift; j < nk && j - shift < q; j++) {
    if (tokens[j - shift] != tokens[q]) continue;
    s += row[j];
    *found = 1;
  }
  return s;
}

void icl_pattern_match_mass(const icl_tensor *p, const int32_t *tokens, int shift, int64_t q_from, double *out) {
  int64_t nh, nq, nk;
  pattern_dims(p, &nh, &nq, &nk);
  for (int64_t h = 0; h < nh; h++) {
    double s = 0;
    int64_t cnt = 0;
    for (int64_t q = q_from < 0 ? 0 : q_from; q < nq; q++) {
      int found;
      double m = match_row(p->data + (h * nq + q) * nk, nk, tokens, shift, q, &found);
      if (found) s += m, cnt++;
    }
    out[h] = cnt ? s / (double)cnt : NAN;
  }
}
