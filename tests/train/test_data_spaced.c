/* icl_data_spaced_repeats: deterministic per (seed, step); every sequence is explained by one segment, an
 * offset and gaps within the stated ranges (checked by an independent parser of the tokens); offsets and gaps
 * take every allowed value; and no fixed relative offset predicts the next token (the position shortcut of the
 * fixed-period data, where offset = period is always right). */
#include <string.h>

#include "icl/train.h"
#include "testutil.h"

enum { NB = 256, NT = 48, VOC = 1000, LMIN = 3, LMAX = 8, GMAX = 6 };

/* The first g in 0..GMAX where seg[0, L) (cut at T) starts at q + g; -1 when none. */
static int copy_at(const int32_t *tk, int q, const int32_t *seg, int L) {
  for (int g = 0; g <= GMAX && q + g < NT; g++) {
    int ok = 1;
    for (int i = 0; i < L && q + g + i < NT; i++) ok &= tk[q + g + i] == seg[i];
    if (ok) return g;
  }
  return -1;
}

/* Parses one sequence as (offset a, length L, gaps); records what was seen. 1 when a parse exists. */
static int parse(const int32_t *tk, int seen_a[], int seen_g[], int seen_l[]) {
  for (int L = LMAX; L >= LMIN; L--)
    for (int a = 0; a <= GMAX; a++) {
      int q = a + L, g, copies = 0, gs[NT];
      while (q < NT && (g = copy_at(tk, q, tk + a, L)) >= 0) gs[copies++] = g, q += g + L;
      if (copies == 0 || (q < NT && q + GMAX < NT)) continue; /* a copy missing before the end */
      seen_a[a] = seen_l[L] = 1;
      for (int c = 0; c + 1 < copies; c++) seen_g[gs[c]] = 1; /* the last gap may be cut by the end */
      return 1;
    }
  return 0;
}

int main(void) {
  static int32_t tk[NB * NT], tg[NB * NT], tk2[NB * NT], tg2[NB * NT];
  icl_data_spaced_repeats(NB, NT, VOC, LMIN, LMAX, GMAX, 3, 7, tk, tg);
  icl_data_spaced_repeats(NB, NT, VOC, LMIN, LMAX, GMAX, 3, 7, tk2, tg2);
  CHECK(!memcmp(tk, tk2, sizeof tk) && !memcmp(tg, tg2, sizeof tg));
  icl_data_spaced_repeats(NB, NT, VOC, LMIN, LMAX, GMAX, 3, 8, tk2, tg2);
  CHECK(memcmp(tk, tk2, sizeof tk)); /* another step, other sequences */
  int range = 1, targets = 1, parsed = 0, seen_a[GMAX + 1] = {0}, seen_g[GMAX + 1] = {0}, seen_l[LMAX + 1] = {0};
  for (int b = 0; b < NB; b++) {
    const int32_t *x = tk + b * NT, *y = tg + b * NT;
    for (int t = 0; t < NT; t++) {
      range &= x[t] >= 0 && x[t] < VOC;
      targets &= y[t] == (t + 1 < NT ? x[t + 1] : -1);
    }
    parsed += parse(x, seen_a, seen_g, seen_l);
  }
  CHECK(range && targets);
  CHECKF(parsed == NB, "%d of %d sequences parse as offset + segment + gapped copies\n", parsed, NB);
  int all = 1;
  for (int v = 0; v <= GMAX; v++) all &= seen_a[v] && seen_g[v];
  for (int v = LMIN; v <= LMAX; v++) all &= seen_l[v];
  CHECK(all);
  double best = 0; /* how often tk[t] == tk[t - d], the best fixed offset d */
  for (int d = 1; d < NT; d++) {
    int hit = 0, n = 0;
    for (int b = 0; b < NB; b++)
      for (int t = d; t < NT; t++) hit += tk[b * NT + t] == tk[b * NT + t - d], n++;
    if ((double)hit / n > best) best = (double)hit / n;
  }
  printf("best fixed-offset copy rule: right on %.3f of positions\n", best);
  CHECK(best > 0.05 && best < 0.3);
  return t_done();
}
