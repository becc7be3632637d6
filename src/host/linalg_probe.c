/* A nearest-class-mean (centroid) classifier scored by stratified k-fold cross-validation, the linear read-out
 * of Cho et al.'s encoding probe (bound to Lua as icl.linalg.ncm_probe in lua/l_probe.c). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"

/* fold[i] = (rank of sample i among the samples of its class, in order) mod folds. */
static void assign_folds(const int32_t *labels, int64_t n, int n_classes, int folds, int32_t *fold, int64_t *seen) {
  memset(seen, 0, (size_t)n_classes * sizeof *seen);
  for (int64_t i = 0; i < n; i++) fold[i] = (int32_t)(seen[labels[i]]++ % folds);
}

/* Class means [n_classes][d] of the samples outside fold f (all samples when fold is NULL); counts[c] = 0 for a
 * class absent there. */
static void train_means(const float *x, int64_t n, int64_t d, const int32_t *labels, const int32_t *fold, int f,
                        int n_classes, double *means, int64_t *counts) {
  memset(means, 0, (size_t)(n_classes * d) * sizeof *means);
  memset(counts, 0, (size_t)n_classes * sizeof *counts);
  for (int64_t i = 0; i < n; i++) {
    if (fold && fold[i] == f) continue;
    double *m = means + labels[i] * d;
    for (int64_t j = 0; j < d; j++) m[j] += x[i * d + j];
    counts[labels[i]]++;
  }
  for (int c = 0; c < n_classes; c++)
    for (int64_t j = 0; j < d && counts[c]; j++) means[c * d + j] /= (double)counts[c];
}

/* The class of the nearest mean (squared Euclidean distance; ties to the lower class; absent classes skipped). */
static int32_t nearest(const float *row, int64_t d, const double *means, const int64_t *counts, int n_classes) {
  int32_t best = -1;
  double best_d = DBL_MAX;
  for (int c = 0; c < n_classes; c++) {
    if (!counts[c]) continue;
    double s = 0;
    for (int64_t j = 0; j < d; j++) {
      double t = row[j] - means[c * d + j];
      s += t * t;
    }
    if (best < 0 || s < best_d) best = (int32_t)c, best_d = s;
  }
  return best;
}

int icl_ncm_probe(const float *x, int64_t n, int64_t d, const int32_t *labels, int n_classes, int folds,
                  int32_t *pred, double *accuracy, icl_error *err) {
  if (n < 2 || d < 1 || n_classes < 1 || folds < 2 || folds > n)
    return icl_error_set(err, ICL_EINVAL, "ncm_probe: need n >= 2 rows, d >= 1, 2 <= folds <= n (n %lld, d %lld, "
                         "folds %d)", (long long)n, (long long)d, folds);
  int32_t *fold = malloc((size_t)n * sizeof *fold);
  double *means = malloc((size_t)(n_classes * d) * sizeof *means);
  int64_t *counts = malloc((size_t)n_classes * sizeof *counts);
  if (!fold || !means || !counts) {
    free(fold), free(means), free(counts);
    return icl_error_set(err, ICL_ENOMEM, "ncm_probe: out of memory for %d classes of %lld values", n_classes,
                         (long long)d);
  }
  assign_folds(labels, n, n_classes, folds, fold, counts);
  int64_t right = 0;
  for (int f = 0; f < folds; f++) {
    train_means(x, n, d, labels, fold, f, n_classes, means, counts);
    for (int64_t i = 0; i < n; i++) {
      if (fold[i] != f) continue;
      pred[i] = nearest(x + i * d, d, means, counts, n_classes);
      right += pred[i] == labels[i];
    }
  }
  *accuracy = (double)right / (double)n;
  free(fold), free(means), free(counts);
  return ICL_OK;
}

/* ---- Lua binding --------------------------------------------------------------------------------------------- */

/* Labels (1-based integers) of a list with n entries, into a 0-based buffer left on the stack; *nc = max label. */

int icl_ncm_fit_predict(const float *x, int64_t n, int64_t d, const int32_t *labels, int n_classes, const float *xt,
                        int64_t nt, int32_t *pred, icl_error *err) {
  if (n < 1 || d < 1 || nt < 0 || n_classes < 1)
    return icl_error_set(err, ICL_EINVAL, "ncm_fit: need n >= 1 training rows, d >= 1 (n %lld, d %lld)",
                         (long long)n, (long long)d);
  double *means = malloc((size_t)(n_classes * d) * sizeof *means);
  int64_t *counts = malloc((size_t)n_classes * sizeof *counts);
  if (!means || !counts) {
    free(means), free(counts);
    return icl_error_set(err, ICL_ENOMEM, "ncm_fit: out of memory for %d classes of %lld values", n_classes,
                         (long long)d);
  }
  train_means(x, n, d, labels, NULL, 0, n_classes, means, counts);
  for (int64_t i = 0; i < nt; i++) pred[i] = nearest(xt + i * d, d, means, counts, n_classes);
  free(means), free(counts);
  return ICL_OK;
}
