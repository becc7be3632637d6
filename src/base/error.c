/* Error reports: code plus a formatted message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "icl/icl.h"

int icl_error_set(icl_error *err, int code, const char *fmt, ...) {
  if (!err) return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return code;
}

int icl_error_wrap(icl_error *err, const char *fmt, ...) {
  if (!err) return ICL_EINVAL;
  char prefix[512], old[sizeof err->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  /* prefix, then as much of the old message as fits */
  size_t n = strlen(prefix);
  if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
  memcpy(err->msg, prefix, n);
  memcpy(err->msg + n, ": ", 2);
  size_t rest = sizeof err->msg - n - 3, ol = strnlen(old, sizeof old);
  if (ol > rest) ol = rest;
  memcpy(err->msg + n + 2, old, ol);
  err->msg[n + 2 + ol] = '\0';
  return err->code;
}

void icl_error_clear(icl_error *err) {
  if (!err) return;
  err->code = ICL_OK;
  err->msg[0] = '\0';
}

const char *icl_strerror(int code) {
  switch (code) {
  case ICL_OK: return "ok";
  case ICL_EINVAL: return "invalid argument";
  case ICL_EIO: return "i/o error";
  case ICL_EFORMAT: return "format error";
  case ICL_ENOMEM: return "out of memory";
  case ICL_EDEVICE: return "device error";
  case ICL_EUNSUPPORTED: return "unsupported";
  case ICL_EINTR: return "interrupted";
  default: return "unknown error";
  }
}
