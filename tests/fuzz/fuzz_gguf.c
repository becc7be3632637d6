/* libFuzzer target: parse arbitrary bytes as GGUF; on success touch every accessor and every
 * tensor byte range, so that any unchecked length or offset shows up under ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"

/* Checks an invariant; aborts so that libFuzzer records the input. */
#define MUST(c) do { if (!(c)) abort(); } while (0)

static void touch_array(const icl_gguf *g, int64_t i, volatile uint64_t *sink) {
  int et = icl_gguf_arr_type(g, i);
  uint64_t n = icl_gguf_arr_len(g, i);
  const uint8_t *p = icl_gguf_arr_data(g, i);
  MUST(et >= 0 && et <= 12);
  for (uint64_t j = 0; j <= n; j++) { /* j == n probes the out-of-range answer */
    int64_t v;
    double d;
    size_t len = 0;
    const char *s = icl_gguf_arr_str(g, i, j, &len);
    if (s) *sink += (uint8_t)s[len] + (len ? (uint8_t)s[0] : 0u); /* s[len] is the NUL */
    MUST(!s || (et == ICL_GGUF_STRING && j < n && s[len] == '\0'));
    *sink += (uint64_t)(icl_gguf_arr_int(g, i, j, &v) == 0) + (uint64_t)(icl_gguf_arr_float(g, i, j, &d) == 0);
  }
  if (p && n) *sink += p[0];
}

static void touch_kv(const icl_gguf *g, int64_t i, volatile uint64_t *sink) {
  const char *key = icl_gguf_key(g, i);
  MUST(key && icl_gguf_find_key(g, key) == i);
  int64_t v;
  double d;
  size_t len = 0;
  *sink += (uint64_t)icl_gguf_kv_type(g, i) + strlen(icl_gguf_vtype_name((int)icl_gguf_kv_type(g, i)));
  *sink += (uint64_t)(icl_gguf_kv_int(g, i, &v) == 0) + (uint64_t)(icl_gguf_kv_float(g, i, &d) == 0);
  const char *s = icl_gguf_kv_str(g, i, &len);
  if (s) *sink += (uint8_t)s[len] + (len ? (uint8_t)s[len - 1] : 0u);
  if (icl_gguf_kv_type(g, i) == ICL_GGUF_ARRAY) touch_array(g, i, sink);
  else MUST(icl_gguf_arr_type(g, i) == -1 && icl_gguf_arr_len(g, i) == 0);
}

static void touch_tensor(const icl_gguf *g, int64_t i, volatile uint64_t *sink) {
  const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
  MUST(t && icl_gguf_find_tensor(g, t->name) == t);
  MUST(t->n_dims >= 1 && t->n_dims <= 4 && icl_type_known(t->type) && t->nbytes > 0);
  MUST(t->offset % icl_gguf_alignment(g) == 0);
  const uint8_t *p = t->data;
  *sink += p[0] + p[t->nbytes - 1] + strlen(t->name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  icl_gguf *g = NULL;
  icl_error err;
  volatile uint64_t sink = 0;
  int rc = icl_gguf_open_memory(data, size, "fuzz", &g, &err);
  if (rc) {
    MUST(g == NULL && err.code == rc && err.msg[0] != '\0' && strchr(err.msg, '\n') == NULL);
    return 0;
  }
  MUST(icl_gguf_version(g) == 2 || icl_gguf_version(g) == 3);
  MUST(icl_gguf_size(g) == size);
  for (int64_t i = 0; i < icl_gguf_n_kv(g); i++) touch_kv(g, i, &sink);
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) touch_tensor(g, i, &sink);
  int64_t v;
  double d;
  icl_gguf_get_int(g, "general.alignment", &v, &err);
  icl_gguf_get_float(g, "general.architecture", &d, &err);
  sink += icl_gguf_get_str(g, "general.name") != NULL;
  MUST(icl_gguf_key(g, icl_gguf_n_kv(g)) == NULL && icl_gguf_tensor_at(g, -1) == NULL);
  icl_gguf_close(g);
  return 0;
}
