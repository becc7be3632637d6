/* Text that is safe to hand on: valid UTF-8 for JSON readers, no terminal control sequences in names. */
#ifndef ICL_TEXT_SAFE_H
#define ICL_TEXT_SAFE_H

#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s[0..n) (1..4), or 0 if s starts an invalid one (overlong forms,
 * surrogates, code points above U+10FFFF, truncated sequences). */
size_t icl_utf8_seq(const unsigned char *s, size_t n);

/* Copies s[0..n) into out (cap bytes, always NUL-terminated) for display: invalid UTF-8 bytes become U+FFFD,
 * control characters (C0, DEL, C1) become '?', and the copy is never cut inside a character. Returns out. */
char *icl_text_display(const char *s, size_t n, char *out, size_t cap);

/* A malloc'd copy of s[0..n) with invalid UTF-8 bytes replaced by U+FFFD (all else kept); NULL without memory. */
char *icl_utf8_fix(const char *s, size_t n);

#endif
