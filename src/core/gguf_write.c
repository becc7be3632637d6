/* GGUF writer: version 3, alignment 32 (or general.alignment), tensor data aligned and padded.
 * Values are encoded when added; saving streams header, pairs, infos and data through a sink. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_tmp.h"
#include "gguf_internal.h"
#include "icl/gguf.h"

typedef struct wkv {
  char *key;
  uint32_t type;
  uint8_t *val; /* [len] the value bytes as in the file (after the type) */
  size_t len;
} wkv;

typedef struct wtensor {
  char *name;
  uint32_t n_dims, type;
  int64_t ne[4];
  void *data; /* [nbytes] copy */
  size_t nbytes;
} wtensor;

struct icl_gguf_writer {
  wkv *kv;
  size_t n_kv, cap_kv;
  wtensor *t;
  size_t n_t, cap_t;
  uint32_t alignment;
};

/* Growable byte buffer used to encode values. */
typedef struct buf {
  uint8_t *p;
  size_t len, cap;
  int oom;
} buf;

static void buf_put(buf *b, const void *s, size_t n) {
  if (b->oom) return;
  if (b->cap - b->len < n) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n) {
      if (cap > SIZE_MAX / 2) {
        b->oom = 1;
        return;
      }
      cap *= 2;
    }
    uint8_t *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
}

static void put_le(buf *b, uint64_t v, size_t n) {
  uint8_t x[8];
  for (size_t k = 0; k < n; k++) x[k] = (uint8_t)(v >> (8 * k));
  buf_put(b, x, n);
}

static void put_str(buf *b, const char *s) {
  size_t n = strlen(s);
  put_le(b, n, 8);
  buf_put(b, s, n);
}

/* Appends n elements of a fixed-size type, converting host order to little-endian. */
static void put_elems(buf *b, uint32_t type, uint64_t n, const void *data) {
  size_t sz = icl_gguf_vtype_size(type);
  const uint8_t *p = data;
  for (uint64_t j = 0; j < n; j++) {
    uint64_t v = 0;
    if (sz == 1) v = p[j];
    else if (sz == 2) { uint16_t x; memcpy(&x, p + j * 2, 2); v = x; }
    else if (sz == 4) { uint32_t x; memcpy(&x, p + j * 4, 4); v = x; }
    else memcpy(&v, p + j * 8, 8);
    put_le(b, v, sz);
  }
}

/* ---- writer ---- */

icl_gguf_writer *icl_gguf_writer_new(void) {
  icl_gguf_writer *w = calloc(1, sizeof *w);
  if (w) w->alignment = ICL_GGUF_DEFAULT_ALIGNMENT;
  return w;
}

void icl_gguf_writer_free(icl_gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) {
    free(w->kv[i].key);
    free(w->kv[i].val);
  }
  for (size_t i = 0; i < w->n_t; i++) {
    free(w->t[i].name);
    free(w->t[i].data);
  }
  free(w->kv);
  free(w->t);
  free(w);
}

static int check_key(const icl_gguf_writer *w, const char *key, icl_error *err) {
  if (!w || !key || !*key) return icl_error_set(err, ICL_EINVAL, "gguf writer: empty key or NULL writer");
  for (size_t i = 0; i < w->n_kv; i++)
    if (!strcmp(w->kv[i].key, key)) return icl_error_set(err, ICL_EINVAL, "gguf writer: duplicate key '%s'", key);
  return ICL_OK;
}

/* Takes ownership of the encoded value in b. */
static int add_kv(icl_gguf_writer *w, const char *key, uint32_t type, buf *b, icl_error *err) {
  if (b->oom || (w->n_kv == w->cap_kv && w->cap_kv > SIZE_MAX / 2 / sizeof *w->kv)) goto nomem;
  if (w->n_kv == w->cap_kv) {
    size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
    wkv *kv = realloc(w->kv, cap * sizeof *kv);
    if (!kv) goto nomem;
    w->kv = kv;
    w->cap_kv = cap;
  }
  char *k = strdup(key);
  if (!k) goto nomem;
  w->kv[w->n_kv++] = (wkv){k, type, b->p, b->len};
  return ICL_OK;
nomem:
  free(b->p);
  return icl_error_set(err, ICL_ENOMEM, "gguf writer: out of memory adding '%s'", key);
}

static int check_bools(const char *key, uint64_t n, const void *data, icl_error *err) {
  const uint8_t *p = data;
  for (uint64_t j = 0; j < n; j++)
    if (p[j] > 1) return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': bool value %u (expected 0 or 1)", key, p[j]);
  return ICL_OK;
}

/* general.alignment sets the writer's alignment and must be a u32 power of two. */
static int check_alignment(icl_gguf_writer *w, const char *key, icl_gguf_vtype type, const void *value,
                           icl_error *err) {
  if (strcmp(key, "general.alignment") != 0) return ICL_OK;
  uint32_t a = 0;
  if (type == ICL_GGUF_U32) memcpy(&a, value, 4);
  if (a == 0 || (a & (a - 1)))
    return icl_error_set(err, ICL_EINVAL, "gguf writer: general.alignment must be a u32 power of two");
  w->alignment = a;
  return ICL_OK;
}

int icl_gguf_w_scalar(icl_gguf_writer *w, const char *key, icl_gguf_vtype type, const void *value, icl_error *err) {
  int rc = check_key(w, key, err);
  if (rc) return rc;
  if (!value || icl_gguf_vtype_size(type) == 0)
    return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': type %d is not a fixed-size scalar", key, (int)type);
  if ((type == ICL_GGUF_BOOL && (rc = check_bools(key, 1, value, err))) ||
      (rc = check_alignment(w, key, type, value, err)))
    return rc;
  buf b = {0};
  put_elems(&b, type, 1, value);
  return add_kv(w, key, type, &b, err);
}

int icl_gguf_w_u32(icl_gguf_writer *w, const char *key, uint32_t v, icl_error *err) {
  return icl_gguf_w_scalar(w, key, ICL_GGUF_U32, &v, err);
}

int icl_gguf_w_i32(icl_gguf_writer *w, const char *key, int32_t v, icl_error *err) {
  return icl_gguf_w_scalar(w, key, ICL_GGUF_I32, &v, err);
}

int icl_gguf_w_f32(icl_gguf_writer *w, const char *key, float v, icl_error *err) {
  return icl_gguf_w_scalar(w, key, ICL_GGUF_F32, &v, err);
}

int icl_gguf_w_bool(icl_gguf_writer *w, const char *key, int v, icl_error *err) {
  uint8_t b = v ? 1 : 0;
  return icl_gguf_w_scalar(w, key, ICL_GGUF_BOOL, &b, err);
}

int icl_gguf_w_str(icl_gguf_writer *w, const char *key, const char *v, icl_error *err) {
  int rc = check_key(w, key, err);
  if (rc) return rc;
  if (!v) return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': NULL string", key);
  buf b = {0};
  put_str(&b, v);
  return add_kv(w, key, ICL_GGUF_STRING, &b, err);
}

int icl_gguf_w_arr(icl_gguf_writer *w, const char *key, icl_gguf_vtype elem_type, uint64_t n, const void *data,
                   icl_error *err) {
  int rc = check_key(w, key, err);
  if (rc) return rc;
  size_t sz = icl_gguf_vtype_size(elem_type);
  if (sz == 0 || (n && !data) || n > SIZE_MAX / sz)
    return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': bad numeric array (type %d, %llu elements)", key,
                         (int)elem_type, (unsigned long long)n);
  if (elem_type == ICL_GGUF_BOOL && (rc = check_bools(key, n, data, err))) return rc;
  buf b = {0};
  put_le(&b, (uint64_t)elem_type, 4);
  put_le(&b, n, 8);
  put_elems(&b, elem_type, n, data);
  return add_kv(w, key, ICL_GGUF_ARRAY, &b, err);
}

int icl_gguf_w_arr_str(icl_gguf_writer *w, const char *key, uint64_t n, const char *const *strs, icl_error *err) {
  int rc = check_key(w, key, err);
  if (rc) return rc;
  if (n && !strs) return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': NULL string array", key);
  for (uint64_t j = 0; j < n; j++)
    if (!strs[j]) return icl_error_set(err, ICL_EINVAL, "gguf writer: '%s': element %llu is NULL", key,
                                       (unsigned long long)j);
  buf b = {0};
  put_le(&b, ICL_GGUF_STRING, 4);
  put_le(&b, n, 8);
  for (uint64_t j = 0; j < n; j++) put_str(&b, strs[j]);
  return add_kv(w, key, ICL_GGUF_ARRAY, &b, err);
}

/* Shape and type valid; *expect = bytes of the data. */
static int check_tensor(const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne, size_t *expect,
                        icl_error *err) {
  if (n_dims < 1 || n_dims > 4 || !ne)
    return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': n_dims %u (expected 1..4)", name, n_dims);
  if (!icl_type_known(type))
    return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': unknown type %u", name, type);
  int64_t rows = 1, be = icl_type_block_elems(type);
  for (uint32_t d = 0; d < n_dims; d++) {
    if (ne[d] < 1 || (d > 0 && ne[d] > INT64_MAX / rows))
      return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': bad dims[%u] = %lld", name, d,
                           (long long)ne[d]);
    if (d > 0) rows *= ne[d];
  }
  if (ne[0] % be || rows > INT64_MAX / ne[0])
    return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': dims[0] = %lld not a multiple of %s block %lld",
                         name, (long long)ne[0], icl_type_name(type), (long long)be);
  size_t rb = icl_type_row_bytes(type, ne[0]);
  if ((uint64_t)rows > SIZE_MAX / rb)
    return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': too large", name);
  *expect = rb * (size_t)rows;
  return ICL_OK;
}

static int tensor_exists(const icl_gguf_writer *w, const char *name) {
  for (size_t i = 0; i < w->n_t; i++)
    if (!strcmp(w->t[i].name, name)) return 1;
  return 0;
}

static int grow_tensors(icl_gguf_writer *w) {
  if (w->n_t < w->cap_t) return ICL_OK;
  size_t cap = w->cap_t ? w->cap_t * 2 : 16;
  wtensor *t = realloc(w->t, cap * sizeof *t);
  if (!t) return ICL_ENOMEM;
  w->t = t;
  w->cap_t = cap;
  return ICL_OK;
}

int icl_gguf_w_tensor(icl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                      const void *data, size_t nbytes, icl_error *err) {
  if (!w || !name || !*name) return icl_error_set(err, ICL_EINVAL, "gguf writer: empty tensor name");
  if (tensor_exists(w, name)) return icl_error_set(err, ICL_EINVAL, "gguf writer: duplicate tensor '%s'", name);
  size_t expect = 0;
  int rc = check_tensor(name, type, n_dims, ne, &expect, err);
  if (rc) return rc;
  if (nbytes != expect || !data)
    return icl_error_set(err, ICL_EINVAL, "gguf writer: tensor '%s': %zu bytes of data (expected %zu)", name,
                         data ? nbytes : 0, expect);
  wtensor t = {.name = strdup(name), .n_dims = n_dims, .type = type, .ne = {1, 1, 1, 1}, .nbytes = nbytes};
  t.data = malloc(nbytes);
  if (!t.name || !t.data || grow_tensors(w)) {
    free(t.name);
    free(t.data);
    return icl_error_set(err, ICL_ENOMEM, "gguf writer: out of memory adding tensor '%s'", name);
  }
  memcpy(t.data, data, nbytes);
  for (uint32_t d = 0; d < n_dims; d++) t.ne[d] = ne[d];
  w->t[w->n_t++] = t;
  return ICL_OK;
}

/* ---- serialization through a sink ---- */

typedef struct sink {
  int (*put)(struct sink *s, const void *p, size_t n); /* 0 on success */
  uint8_t *mem;                                        /* memory sink: [cap] */
  size_t len, cap;
  int fd, err; /* file sink: descriptor and errno of a failed write */
  uint8_t pend[1 << 16];
  size_t npend;
} sink;

static size_t pad_to(uint64_t x, uint32_t a) { return (size_t)((a - x % a) % a); }

static int emit_le(sink *s, uint64_t v, size_t n) {
  uint8_t x[8];
  for (size_t k = 0; k < n; k++) x[k] = (uint8_t)(v >> (8 * k));
  return s->put(s, x, n);
}

static int emit_str(sink *s, const char *str) {
  size_t n = strlen(str);
  return emit_le(s, n, 8) || s->put(s, str, n);
}

static int emit_pad(sink *s, size_t n) {
  static const uint8_t zero[256];
  while (n) {
    size_t k = n < sizeof zero ? n : sizeof zero;
    if (s->put(s, zero, k)) return -1;
    n -= k;
  }
  return 0;
}

/* Header, pairs, tensor infos, padding, then each tensor's data padded to the alignment. */
static int emit(const icl_gguf_writer *w, sink *s) {
  uint64_t pos = 0; /* running offset within the data section */
  if (emit_le(s, ICL_GGUF_MAGIC, 4) || emit_le(s, 3, 4) || emit_le(s, w->n_t, 8) || emit_le(s, w->n_kv, 8)) return -1;
  for (size_t i = 0; i < w->n_kv; i++)
    if (emit_str(s, w->kv[i].key) || emit_le(s, w->kv[i].type, 4) || s->put(s, w->kv[i].val, w->kv[i].len)) return -1;
  for (size_t i = 0; i < w->n_t; i++) {
    const wtensor *t = &w->t[i];
    if (emit_str(s, t->name) || emit_le(s, t->n_dims, 4)) return -1;
    for (uint32_t d = 0; d < t->n_dims; d++)
      if (emit_le(s, (uint64_t)t->ne[d], 8)) return -1;
    if (emit_le(s, t->type, 4) || emit_le(s, pos, 8)) return -1;
    pos += t->nbytes + pad_to(t->nbytes, w->alignment);
  }
  if (w->n_t && emit_pad(s, pad_to(s->len, w->alignment))) return -1;
  for (size_t i = 0; i < w->n_t; i++)
    if (s->put(s, w->t[i].data, w->t[i].nbytes) || emit_pad(s, pad_to(w->t[i].nbytes, w->alignment))) return -1;
  return 0;
}

static int count_put(sink *s, const void *p, size_t n) {
  (void)p;
  if (n > SIZE_MAX - s->len) return -1;
  s->len += n;
  return 0;
}

static int mem_put(sink *s, const void *p, size_t n) {
  if (n > s->cap - s->len) return -1;
  if (n) memcpy(s->mem + s->len, p, n);
  s->len += n;
  return 0;
}

static int fd_flush(sink *s) {
  size_t done = 0;
  while (done < s->npend) {
    ssize_t k = write(s->fd, s->pend + done, s->npend - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      s->err = k < 0 ? errno : EIO;
      return -1;
    }
    done += (size_t)k;
  }
  s->npend = 0;
  return 0;
}

/* Buffers small pieces; len counts all bytes so far (the emitter pads by it). */
static int fd_put(sink *s, const void *p, size_t n) {
  const uint8_t *q = p;
  s->len += n;
  while (n) {
    size_t k = sizeof s->pend - s->npend;
    if (k > n) k = n;
    memcpy(s->pend + s->npend, q, k);
    s->npend += k;
    q += k;
    n -= k;
    if (s->npend == sizeof s->pend && fd_flush(s)) return -1;
  }
  return 0;
}

int icl_gguf_writer_to_memory(const icl_gguf_writer *w, void **data, size_t *size, icl_error *err) {
  if (!w || !data || !size) return icl_error_set(err, ICL_EINVAL, "gguf writer: NULL argument");
  *data = NULL;
  *size = 0;
  sink *s = calloc(1, sizeof *s);
  if (!s) return icl_error_set(err, ICL_ENOMEM, "gguf writer: out of memory");
  s->put = count_put;
  int rc = emit(w, s) ? icl_error_set(err, ICL_ENOMEM, "gguf writer: file too large") : ICL_OK;
  if (!rc) {
    s->cap = s->len;
    s->len = 0;
    s->put = mem_put;
    s->mem = malloc(s->cap ? s->cap : 1);
    if (!s->mem) rc = icl_error_set(err, ICL_ENOMEM, "gguf writer: out of memory (%zu bytes)", s->cap);
  }
  if (!rc && emit(w, s)) rc = icl_error_set(err, ICL_EINVAL, "gguf writer: internal size mismatch");
  if (!rc) {
    *data = s->mem;
    *size = s->len;
  } else {
    free(s->mem);
  }
  free(s);
  return rc;
}

/* Best effort: makes the rename durable. */
static void sync_dir(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) + (slash == path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

/* Writes everything to fd and syncs it; returns 0 or an errno. */
static int write_all(const icl_gguf_writer *w, int fd) {
  sink *s = calloc(1, sizeof *s);
  if (!s) return ENOMEM;
  s->put = fd_put;
  s->fd = fd;
  int e = 0;
  if (emit(w, s) || fd_flush(s)) e = s->err ? s->err : EIO;
  else if (fsync(fd) != 0) e = errno;
  free(s);
  return e;
}

int icl_gguf_writer_save(const icl_gguf_writer *w, const char *path, icl_error *err) {
  if (!w || !path) return icl_error_set(err, ICL_EINVAL, "gguf writer: NULL argument");
  char tmp[4096];
  int fd = icl_tmp_create(path, tmp, sizeof tmp, err); /* also removes orphans of killed writers */
  if (fd < 0) return ICL_EIO;
  int e = write_all(w, fd);
  if (close(fd) != 0 && !e) e = errno;
  if (!e && rename(tmp, path) != 0) e = errno;
  if (e) {
    unlink(tmp);
    return icl_error_set(err, ICL_EIO, "%s: write failed: %s", path, strerror(e));
  }
  sync_dir(path);
  return ICL_OK;
}
