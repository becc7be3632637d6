/* icl.linalg's C core: PCA of known matrices, Dirichlet energy, softmax masses and pattern scores. */
#include <math.h>

#include "linalg.h"
#include "testutil.h"

#define NEAR(a, b) (fabs((double)(a) - (double)(b)) < 1e-5)

static void test_pca_axes(void) {
  const float x[] = {2, 0, 0, 1, -2, 0, 0, -1};
  icl_pca_result r;
  icl_error err;
  CHECK(icl_pca(x, 4, 2, 2, &r, &err) == ICL_OK);
  const float *c = r.components->data, *p = r.projections->data;
  CHECK(NEAR(c[0], 1) && NEAR(c[1], 0) && NEAR(c[2], 0) && NEAR(c[3], 1));
  CHECK(NEAR(p[0], 2) && NEAR(p[2], 0) && NEAR(p[4], -2) && NEAR(p[3], 1) && NEAR(p[7], -1));
  CHECK(NEAR(r.variance[0], 8.0 / 3) && NEAR(r.variance[1], 2.0 / 3));
  CHECK(NEAR(r.ratio[0], 0.8) && NEAR(r.ratio[1], 0.2));
  icl_pca_result_free(&r);
}

/* Points mean + a u + b v with u = (0.6, 0.8, 0), v = (-0.8, 0.6, 0): v's sign flips to (0.8, -0.6, 0). */
static void test_pca_rotated(void) {
  const float ab[4][2] = {{3, 0}, {-3, 0}, {0, 1}, {0, -1}}, mean[3] = {1, 2, 3};
  float x[12];
  for (int i = 0; i < 4; i++) {
    x[3 * i + 0] = mean[0] + 0.6f * ab[i][0] - 0.8f * ab[i][1];
    x[3 * i + 1] = mean[1] + 0.8f * ab[i][0] + 0.6f * ab[i][1];
    x[3 * i + 2] = mean[2];
  }
  icl_pca_result r;
  icl_error err;
  CHECK(icl_pca(x, 4, 3, 2, &r, &err) == ICL_OK);
  const float *c = r.components->data, *p = r.projections->data;
  CHECK(NEAR(c[0], 0.6) && NEAR(c[1], 0.8) && NEAR(c[2], 0));
  CHECK(NEAR(c[3], 0.8) && NEAR(c[4], -0.6) && NEAR(c[5], 0));
  CHECK(NEAR(p[0], 3) && NEAR(p[2], -3) && NEAR(p[5], -1) && NEAR(p[7], 1));
  CHECK(NEAR(r.mean->data[0], 1) && NEAR(r.mean->data[1], 2) && NEAR(r.mean->data[2], 3));
  CHECK(NEAR(r.variance[0], 6) && NEAR(r.ratio[0], 0.9) && NEAR(r.ratio[1], 0.1));
  icl_pca_result_free(&r);
  CHECK(icl_pca(x, 4, 3, 4, &r, &err) == ICL_EINVAL);
  float bad[4] = {1, NAN, 2, 3};
  CHECK(icl_pca(bad, 2, 2, 1, &r, &err) == ICL_EINVAL);
}

/* Square 0-1-3-2 (a 2x2 grid) embedded at unit-square corners. */
static void test_dirichlet(void) {
  int64_t shape[2] = {4, 2}, edges[8] = {0, 1, 0, 2, 1, 3, 2, 3};
  icl_tensor *x = icl_tensor_new(2, shape);
  const float pts[8] = {0, 0, 1, 0, 0, 1, 1, 1};
  for (int i = 0; i < 8; i++) x->data[i] = pts[i];
  CHECK(NEAR(icl_dirichlet_energy(x, edges, 4, 0), 1.0));
  CHECK(NEAR(icl_dirichlet_energy(x, edges, 4, 1), 4.0 / 4.0 / 2.0)); /* sum 4 / |X|_F^2 = 4 / d = 2 */
  icl_tensor_free(x);
}

static void test_softmax(void) {
  const float row[4] = {0, (float)log(2.0), (float)log(3.0), (float)log(4.0)}; /* probs 1,2,3,4 / 10 */
  const int32_t t13[2] = {1, 3}, sup[3] = {0, 1, 2}, t2[1] = {2};
  CHECK(NEAR(icl_softmax_mass(row, 4, NULL, 0, t13, 2), 0.6));
  CHECK(NEAR(icl_softmax_mass(row, 4, sup, 3, t2, 1), 0.5));
  CHECK(NEAR(icl_token_nll(row, 4, 3), -log(0.4)));
}

/* One head attending fully to the previous token, one attending to q - 2 (uniform at the first rows). */
static void test_patterns(void) {
  int64_t shape[3] = {2, 5, 5};
  icl_tensor *p = icl_tensor_new(3, shape);
  for (int q = 0; q < 5; q++) {
    p->data[(0 * 5 + q) * 5 + (q > 0 ? q - 1 : 0)] = 1;
    p->data[(1 * 5 + q) * 5 + (q > 1 ? q - 2 : 0)] = 1;
  }
  double out[2];
  icl_pattern_diag_mean(p, 1, 2, out);
  CHECK(NEAR(out[0], 1) && NEAR(out[1], 0));
  icl_pattern_diag_mean(p, 2, 2, out);
  CHECK(NEAR(out[0], 0) && NEAR(out[1], 1));
  const int32_t tok[5] = {7, 8, 7, 8, 9}; /* queries 2 and 3 repeat tokens 0 and 1 */
  icl_pattern_match_mass(p, tok, 0, 0, out);
  CHECK(NEAR(out[0], 0) && NEAR(out[1], 1));
  icl_pattern_match_mass(p, tok, 1, 0, out); /* keys right after an earlier copy: q2 -> 1, q3 -> 2 */
  CHECK(NEAR(out[0], 1) && NEAR(out[1], 0));
  icl_tensor_free(p);
}

int main(void) {
  test_pca_axes();
  test_pca_rotated();
  test_dirichlet();
  test_softmax();
  test_patterns();
  return t_done();
}
