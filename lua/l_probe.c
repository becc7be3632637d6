/* icl.linalg.ncm_probe: a nearest-class-mean (centroid) classifier scored by stratified k-fold cross-validation,
 * the linear read-out of Cho et al.'s encoding probe. The C core is usable without Lua (l_linalg.h). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "icl_lua.h"
#include "l_linalg.h"

/* fold[i] = (rank of sample i among the samples of its class, in order) mod folds. */
static void assign_folds(const int32_t *labels, int64_t n, int n_classes, int folds, int32_t *fold, int64_t *seen) {
  memset(seen, 0, (size_t)n_classes * sizeof *seen);
  for (int64_t i = 0; i < n; i++) fold[i] = (int32_t)(seen[labels[i]]++ % folds);
}

/* Class means [n_classes][d] of the samples outside fold f; counts[c] = 0 for a class absent there. */
static void train_means(const float *x, int64_t n, int64_t d, const int32_t *labels, const int32_t *fold, int f,
                        int n_classes, double *means, int64_t *counts) {
  memset(means, 0, (size_t)(n_classes * d) * sizeof *means);
  memset(counts, 0, (size_t)n_classes * sizeof *counts);
  for (int64_t i = 0; i < n; i++) {
    if (fold[i] == f) continue;
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
static int32_t *check_labels(lua_State *L, int arg, int64_t n, int *nc) {
  luaL_checktype(L, arg, LUA_TTABLE);
  luaL_argcheck(L, luaL_len(L, arg) == n, arg, "need one label per row of X");
  int32_t *lab = lua_newuserdatauv(L, (size_t)n * sizeof *lab, 0);
  *nc = 0;
  for (int64_t i = 0; i < n; i++) {
    lua_geti(L, arg, i + 1);
    int ok;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    luaL_argcheck(L, ok && v >= 1 && v <= 1 << 16, arg, "labels must be integers in [1, 65536]");
    lua_pop(L, 1);
    lab[i] = (int32_t)(v - 1);
    if (v > *nc) *nc = (int)v;
  }
  return lab;
}

/* ncm_probe(X [n, d], labels, {folds = 5}) -> accuracy, predictions (1-based labels). */
int icl_lua_ncm_probe(lua_State *L) {
  icl_tensor *x = icl_lua_check_tensor(L, 1);
  luaL_argcheck(L, x->ndim == 2, 1, "expected a 2-d tensor [rows, cols]");
  int64_t n = x->shape[0], d = x->shape[1];
  lua_Integer folds = 5;
  if (!lua_isnoneornil(L, 3)) {
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_getfield(L, 3, "folds");
    folds = lua_isnil(L, -1) ? 5 : luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  lua_settop(L, 3);
  luaL_argcheck(L, folds >= 2 && folds <= n, 3, "folds must be in [2, rows]");
  int nc;
  int32_t *lab = check_labels(L, 2, n, &nc);
  int32_t *pred = lua_newuserdatauv(L, (size_t)n * sizeof *pred, 0);
  double acc;
  icl_error err;
  if (icl_ncm_probe(x->data, n, d, lab, nc, (int)folds, pred, &acc, &err) != ICL_OK) return luaL_error(L, "%s", err.msg);
  lua_pushnumber(L, acc);
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) lua_pushinteger(L, pred[i] + 1), lua_seti(L, -2, i + 1);
  return 2;
}
