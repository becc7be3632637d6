/* Synthetic data: repeated random segments, the classic induction-head data (Olsson et al.).
 * Each sequence draws from its own splitmix64 stream keyed by (seed, step, sequence). */
#include "icl/train.h"
#include "train_rng.h"

void icl_data_repeated_segments(int64_t B, int64_t T, int vocab, int seg_min, int seg_max, int repeated_only,
                                uint64_t seed, int64_t step, int32_t *tokens, int32_t *targets) {
  if (seg_min < 1) seg_min = 1;
  if (seg_max < seg_min) seg_max = seg_min;
  for (int64_t b = 0; b < B; b++) {
    uint64_t s = tr_sequence_stream(seed, step, b);
    int64_t seg_len = seg_min + (int64_t)(tr_splitmix(&s) % (uint64_t)(seg_max - seg_min + 1));
    int32_t *tk = tokens + b * T, *tg = targets + b * T;
    for (int64_t t = 0; t < T && t < seg_len; t++) tk[t] = (int32_t)(tr_splitmix(&s) % (uint64_t)vocab);
    for (int64_t t = seg_len; t < T; t++) tk[t] = tk[t - seg_len];
    for (int64_t t = 0; t < T; t++)
      tg[t] = t + 1 < T && (!repeated_only || t + 1 >= seg_len) ? tk[t + 1] : -1;
  }
}

/* Where sequence b's window starts among n elements: a window needs T + 1 (T inputs, the last target). The byte
 * and token windows share it, so the same (seed, step) picks the same offsets in both. */
static int64_t window_start(uint64_t seed, int64_t step, int64_t b, int64_t n, int64_t T) {
  uint64_t s = tr_sequence_stream(seed, step, b);
  return (int64_t)(tr_splitmix(&s) % (uint64_t)(n - T));
}

void icl_data_text_windows(const uint8_t *text, int64_t n, int64_t B, int64_t T, uint64_t seed, int64_t step,
                           int32_t *tokens, int32_t *targets) {
  for (int64_t b = 0; b < B; b++) {
    const uint8_t *w = text + window_start(seed, step, b, n, T);
    for (int64_t t = 0; t < T; t++) tokens[b * T + t] = w[t], targets[b * T + t] = w[t + 1];
  }
}

void icl_data_token_windows(const int32_t *ids, int64_t n, int64_t B, int64_t T, uint64_t seed, int64_t step,
                            int32_t *tokens, int32_t *targets) {
  for (int64_t b = 0; b < B; b++) {
    const int32_t *w = ids + window_start(seed, step, b, n, T);
    for (int64_t t = 0; t < T; t++) tokens[b * T + t] = w[t], targets[b * T + t] = w[t + 1];
  }
}
