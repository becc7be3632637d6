/* icl.rng's C core: known first outputs, ranges, sampling without replacement. */
#include <math.h>
#include <stdlib.h>

#include "l_rng.h"
#include "testutil.h"

static void test_known_values(void) {
  icl_rng r;
  icl_rng_seed(&r, 0); /* splitmix64(0) words: e220a8397b1dcdaf 6e789e6aa1b965f4 06c45d188009454f f88bb8a8724c81ec */
  CHECK(r.s[0] == 0xe220a8397b1dcdafull && r.s[3] == 0xf88bb8a8724c81ecull);
  CHECK(icl_rng_next(&r) == 0x99ec5f36cb75f2b4ull);
  CHECK(icl_rng_next(&r) == 0xbf6e1f784956452aull);
  CHECK(icl_rng_next(&r) == 0x1a5f849d4933e6e0ull);
  icl_rng_seed(&r, 42);
  CHECK(icl_rng_next(&r) == 0x15780b2e0c2ec716ull);
  icl_rng_seed(&r, 42);
  CHECKF(fabs(icl_rng_uniform(&r) - 0.08386297105988216) < 1e-16, "uniform");
  CHECKF(fabs(icl_rng_uniform(&r) - 0.3789802506626686) < 1e-16, "uniform");
  icl_rng_seed(&r, 7);
  const int dice[10] = {1, 3, 1, 5, 3, 6, 5, 5, 5, 2};
  for (int i = 0; i < 10; i++) CHECKF((int)icl_rng_below(&r, 6) + 1 == dice[i], "die %d", i);
}

static void test_ranges(void) {
  icl_rng r;
  icl_rng_seed(&r, 1);
  int hist[5] = {0};
  for (int i = 0; i < 50000; i++) hist[icl_rng_below(&r, 5)]++;
  for (int i = 0; i < 5; i++) CHECKF(abs(hist[i] - 10000) < 500, "bin %d: %d", i, hist[i]);
  double s = 0, s2 = 0;
  for (int i = 0; i < 100000; i++) {
    double z = icl_rng_normal(&r);
    s += z, s2 += z * z;
  }
  CHECKF(fabs(s / 1e5) < 0.02 && fabs(s2 / 1e5 - 1) < 0.02, "normal moments %g %g", s / 1e5, s2 / 1e5);
}

static void test_sample(void) {
  icl_rng r;
  icl_rng_seed(&r, 3);
  uint64_t out[100];
  CHECK(icl_rng_sample(&r, 100, 100, out) == 0);
  int seen[100] = {0}, dup = 0;
  for (int i = 0; i < 100; i++) dup += out[i] >= 100 || seen[out[i]]++;
  CHECK(dup == 0);
  CHECK(icl_rng_sample(&r, 5, 6, out) == -1);
  CHECK(icl_rng_sample(&r, (uint64_t)1 << 62, 10, out) == 0);
}

int main(void) {
  test_known_values();
  test_ranges();
  test_sample();
  return t_done();
}
