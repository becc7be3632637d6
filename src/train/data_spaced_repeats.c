/* Synthetic induction data without a fixed period: a random segment at a random offset, its copies separated
 * by random gaps of fresh random tokens, so neither a fixed relative offset nor a small set of context tokens
 * predicts the next token; only "find the earlier occurrence of this token, copy its successor" does. */
#include "icl/train.h"
#include "train_rng.h"

static int64_t sr_uniform(uint64_t *s, int64_t lo, int64_t hi) {
  return lo + (int64_t)(tr_splitmix(s) % (uint64_t)(hi - lo + 1));
}

/* One sequence: noise everywhere, then copies of tk[a, a + L) at a + L + g1, then + L + g2, ... (cut at T). */
static void sr_sequence(uint64_t *s, int64_t T, int vocab, int seg_min, int seg_max, int gap_max, int32_t *tk,
                        int32_t *tg) {
  for (int64_t t = 0; t < T; t++) tk[t] = (int32_t)(tr_splitmix(s) % (uint64_t)vocab);
  int64_t len = sr_uniform(s, seg_min, seg_max), a = sr_uniform(s, 0, gap_max);
  for (int64_t p = a + len + sr_uniform(s, 0, gap_max); p < T; p += len + sr_uniform(s, 0, gap_max))
    for (int64_t i = 0; i < len && p + i < T; i++) tk[p + i] = tk[a + i];
  for (int64_t t = 0; t < T; t++) tg[t] = t + 1 < T ? tk[t + 1] : -1;
}

void icl_data_spaced_repeats(int64_t B, int64_t T, int vocab, int seg_min, int seg_max, int gap_max, uint64_t seed,
                             int64_t step, int32_t *tokens, int32_t *targets) {
  if (seg_min < 1) seg_min = 1;
  if (seg_max < seg_min) seg_max = seg_min;
  if (gap_max < 0) gap_max = 0;
  for (int64_t b = 0; b < B; b++) {
    uint64_t s = tr_sequence_stream(seed, step, b);
    sr_sequence(&s, T, vocab, seg_min, seg_max, gap_max, tokens + b * T, targets + b * T);
  }
}
