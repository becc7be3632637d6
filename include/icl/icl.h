/* icl: a portable inference core for in-context-learning interpretability. Umbrella header. */
#ifndef ICL_ICL_H
#define ICL_ICL_H

#include <stddef.h>
#include <stdint.h>

#define ICL_VERSION "0.1.0"

/* Error codes; every fallible function returns one (0 = success) and fills an icl_error. */
enum {
  ICL_OK = 0,
  ICL_EINVAL = 1,      /* bad argument or usage */
  ICL_EIO = 2,         /* file missing, unreadable, short write */
  ICL_EFORMAT = 3,     /* malformed input file */
  ICL_ENOMEM = 4,      /* host or device memory exhausted */
  ICL_EDEVICE = 5,     /* Vulkan or backend failure */
  ICL_EUNSUPPORTED = 6, /* valid but not supported (type, architecture, feature) */
  ICL_EINTR = 7         /* stopped on request (icl_run_opts.interrupt) */
};

/* Precision of a backend's arithmetic (icl_load_opts.precision). EXACT (the default): a row's output does not
 * depend on the other rows computed with it, so any chunking of the tokens gives bit-identical results (ref and CPU
 * backends). FAST: opt-in speed for decoding, e.g. int8 activations in single-row matmuls on the CPU. */
enum { ICL_PRECISION_EXACT = 0, ICL_PRECISION_FAST = 1 };

/* An error report: code plus a message that says what, where, and what was expected. */
typedef struct icl_error {
  int code;
  char msg[1024];
} icl_error;

/* Sets err (if non-NULL) to code and a printf-style message; returns code. */
int icl_error_set(icl_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefixes the message already in err with a printf-style context ("loading x: ..."); returns err->code. */
int icl_error_wrap(icl_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears err to ICL_OK with an empty message. */
void icl_error_clear(icl_error *err);

/* Returns a short name for an error code ("format error", ...). */
const char *icl_strerror(int code);

#include "icl/types.h"

#endif
