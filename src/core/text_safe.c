/* UTF-8 checking and display-safe copies of untrusted text (model names, metadata values). */
#include "text_safe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t icl_utf8_seq(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned c = s[0];
  size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  if (!k || k > n) return 0;
  uint32_t cp = k == 1 ? c : c & (0x7Fu >> k);
  for (size_t j = 1; j < k; j++) {
    if ((s[j] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (s[j] & 0x3Fu);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return k;
}

static char *copy_safe(const char *s, size_t n, char *out, size_t cap, int controls) {
  const unsigned char *p = (const unsigned char *)s;
  size_t o = 0;
  if (cap == 0) return out;
  for (size_t i = 0; i < n;) {
    size_t k = icl_utf8_seq(p + i, n - i);
    uint32_t c1 = k == 2 ? (uint32_t)(p[i] & 0x1F) << 6 | (p[i + 1] & 0x3F) : 0; /* C1 controls are 2 bytes */
    int ctl = controls && ((k == 1 && (p[i] < 0x20 || p[i] == 0x7F)) || (c1 >= 0x80 && c1 < 0xA0));
    const char *rep = !k ? "\xEF\xBF\xBD" : ctl ? "?" : NULL;
    size_t len = rep ? strlen(rep) : k;
    if (o + len >= cap) break;
    memcpy(out + o, rep ? (const unsigned char *)rep : p + i, len);
    o += len;
    i += k ? k : 1;
  }
  out[o] = '\0';
  return out;
}

char *icl_text_display(const char *s, size_t n, char *out, size_t cap) { return copy_safe(s, n, out, cap, 1); }

char *icl_utf8_fix(const char *s, size_t n) {
  size_t cap = 3 * n + 1; /* each invalid byte grows to the 3-byte U+FFFD */
  char *out = malloc(cap);
  return out ? copy_safe(s, n, out, cap, 0) : NULL;
}
