/* Host analysis (src/linalg.c, bound to Lua as icl.linalg): PCA (LAPACKE), class means, Dirichlet energy and the
 * inner loops of icl.metrics and icl.heads. Tensors are float32 [rows, cols] (see icl/tensor.h); sums are accumulated in double. */
#ifndef ICL_LINALG_H
#define ICL_LINALG_H

#include <stdint.h>

#include "icl/icl.h"
#include "icl/tensor.h"

typedef struct icl_pca_result {
  int k;
  icl_tensor *components;  /* [k, d] unit rows; the entry of largest |value| of each row is positive */
  icl_tensor *projections; /* [n, k] centred rows projected on the components */
  icl_tensor *mean;        /* [d] column means that were subtracted */
  double *variance;        /* [k] singular value^2 / (n - 1) (/ 1 when n == 1) */
  double *ratio;           /* [k] singular value^2 / squared Frobenius norm of the centred matrix */
} icl_pca_result;

/* PCA of x [n, d] (row-major) keeping k <= min(n, d) components, via the SVD of the centred matrix. */
int icl_pca(const float *x, int64_t n, int64_t d, int k, icl_pca_result *out, icl_error *err);
void icl_pca_result_free(icl_pca_result *r); /* safe on a zeroed or half-built result */

/* Adds rows row0 .. row0+m-1 of x [rows, d] to sums [n_classes][d] by classes[i] in [0, n_classes) (-1 skips a
 * row) and counts them. The caller checks that the rows exist. */
void icl_class_accumulate(const icl_tensor *x, int64_t row0, const int32_t *classes, int64_t m, int n_classes,
                          double *sums, int64_t *counts);

/* Dirichlet energy of node embeddings x [n, d] over undirected edges (pairs of 0-based node ids).
 * normalized = 0: mean over edges of |x_i - x_j|^2. normalized = 1: x is divided by its Frobenius norm and
 * E = 1/2 sum_ij A_ij |x_i - x_j|^2 / d = sum over edges |x_i - x_j|^2 / d (A symmetric, each edge once). */
double icl_dirichlet_energy(const icl_tensor *x, const int64_t *edges, int64_t n_edges, int normalized);

/* Softmax of row[support] (support NULL: the whole row of n floats), then the total probability of targets,
 * which must lie in the support. */
double icl_softmax_mass(const float *row, int64_t n, const int32_t *support, int64_t n_support,
                        const int32_t *targets, int64_t n_targets);

/* Cross-entropy -log softmax(row)[target] over a row of n floats. */
double icl_token_nll(const float *row, int64_t n, int32_t target);

/* Attention patterns p [head, q, k] (or [q, k] as one head). Per head, the mean over queries q in
 * [q_from, Q) with 0 <= q - lag < K of p[h, q, q - lag]; out has one entry per head (NaN if no query). */
void icl_pattern_diag_mean(const icl_tensor *p, int64_t lag, int64_t q_from, double *out);

/* Per head, the mean over queries q in [q_from, Q) that have at least one matching key of the attention summed
 * over keys j with 0 <= j - shift < q and tokens[j - shift] == tokens[q] (tokens has Q entries). shift 0: earlier
 * copies of the query's token (duplicate-token heads); shift 1: tokens right after an earlier copy (prefix
 * matching). NaN where no query has a match. */
void icl_pattern_match_mass(const icl_tensor *p, const int32_t *tokens, int shift, int64_t q_from, double *out);

/* Nearest-class-mean classifier of rows x [n, d] with labels in [0, n_classes), scored by stratified k-fold
 * cross-validation: the j-th sample of each class (in row order) is in fold j mod folds; each fold is classified
 * by the squared Euclidean distance to the class means of the other folds. pred [n] receives the predicted
 * classes and *accuracy the fraction right. */
int icl_ncm_probe(const float *x, int64_t n, int64_t d, const int32_t *labels, int n_classes, int folds,
                  int32_t *pred, double *accuracy, icl_error *err);

/* The same classifier trained on all of x [n, d] (labels in [0, n_classes)) and applied to other rows xt [nt, d]:
 * pred [nt] receives the class of the nearest mean (ties to the lower class; classes absent from x never). */
int icl_ncm_fit_predict(const float *x, int64_t n, int64_t d, const int32_t *labels, int n_classes, const float *xt,
                        int64_t nt, int32_t *pred, icl_error *err);

#endif
