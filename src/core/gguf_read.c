/* GGUF reader: maps a file read-only and validates every field before anything uses it.
 * Hostile input must never crash, hang or allocate more than O(file size): every count and
 * length is checked against the bytes left before it is trusted. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file_read.h"
#include "gguf_internal.h"
#include "icl/gguf.h"
#include "sigbus_guard.h"

#define MAX_DEPTH 8          /* nesting levels of arrays of arrays */
#define MIN_KV_BYTES 13      /* key length u64 + value type u32 + one value byte */
#define MIN_TENSOR_BYTES 32  /* name length + n_dims + one dim + type + offset */
#define MIN_STRING_BYTES 8   /* the length prefix */
#define MIN_ARRAY_BYTES 12   /* element type + count */

/* One metadata pair. Strings live in the arena, numeric arrays stay in the file. */
typedef struct gkv {
  uint64_t key;   /* arena offset of the key */
  uint32_t type;  /* icl_gguf_vtype */
  uint32_t atype; /* arrays: element type */
  uint64_t n;     /* string length or array count */
  uint64_t val;   /* scalar bits; string: arena offset; numeric array: file offset */
  uint64_t *soff; /* string arrays: [n+1] arena offsets; element j spans soff[j]..soff[j+1]-1 */
} gkv;

/* Open-addressing hash table of indices + 1 (0 = empty). */
typedef struct htab {
  int64_t *slot;
  uint64_t mask;
} htab;

struct icl_gguf {
  char *name;
  const uint8_t *base; /* [size] the file image */
  size_t size;
  int mapped; /* base is our mmap */
  int fd;     /* the mapped file (-1 if none), kept to notice changes under the mapping */
  struct stat st; /* its size and times when mapped */
  uint32_t version, alignment;
  int64_t n_kv, n_tensors;
  gkv *kv;                   /* [n_kv] */
  icl_gguf_tensor *tensors;  /* [n_tensors] */
  uint64_t *tname;           /* [n_tensors] arena offsets of names, until names are resolved */
  char *arena;               /* NUL-terminated copies of keys, names and string values */
  size_t arena_len, arena_cap;
  htab keys, tnames;
  size_t data_off; /* start of the data section */
  uint64_t hseed;  /* hash seed, different per handle and process */
};

/* Parse cursor with the name of the item being read, for messages. */
typedef struct rd {
  icl_gguf *g;
  size_t pos;
  char where[200];
  icl_error *err;
} rd;

static const size_t VSIZE[ICL_GGUF_N_VTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const VNAME[ICL_GGUF_N_VTYPES] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};

size_t icl_gguf_vtype_size(uint32_t t) { return t < ICL_GGUF_N_VTYPES ? VSIZE[t] : 0; }

const char *icl_gguf_vtype_name(int t) { return t >= 0 && t < ICL_GGUF_N_VTYPES ? VNAME[t] : "?"; }

/* ---- errors ---- */

static int fail(rd *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(rd *r, const char *fmt, ...) {
  char m[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  return icl_error_set(r->err, ICL_EFORMAT, "%s: %s: %s", r->g->name, r->where, m);
}

static int oom(rd *r) { return icl_error_set(r->err, ICL_ENOMEM, "%s: %s: out of memory", r->g->name, r->where); }

/* Copies up to 60 bytes of a file string for a message; control bytes become '?'. */
static void printable(char *dst, size_t cap, const uint8_t *s, uint64_t len) {
  size_t n = len < 60 ? (size_t)len : 60, k = 0;
  for (size_t i = 0; i < n && k + 4 < cap; i++) dst[k++] = (s[i] < 0x20 || s[i] == 0x7f) ? '?' : (char)s[i];
  if (n < len && k + 4 < cap) k += (size_t)snprintf(dst + k, cap - k, "...");
  dst[k] = '\0';
}

/* Writes "what i 'name'" with the name made printable. */
static void label(char *dst, size_t cap, const char *what, int64_t i, const void *s, size_t len) {
  char nm[80];
  printable(nm, sizeof nm, s, len);
  snprintf(dst, cap, "%s %lld '%s'", what, (long long)i, nm);
}

static void set_where(rd *r, const char *what, int64_t i, const void *s, size_t len) {
  label(r->where, sizeof r->where, what, i, s, len);
}

/* ---- little-endian decoding ---- */

static uint64_t le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
  return v;
}

static int64_t sext(uint64_t b, unsigned bits) {
  uint64_t sign = 1ull << (bits - 1);
  uint64_t v = (b ^ sign) - sign; /* two's complement sign extension without UB */
  int64_t s;
  memcpy(&s, &v, 8);
  return s;
}

/* Integer value of raw bits of type t (integers and bool); ICL_EFORMAT otherwise. */
static int bits_int(uint32_t t, uint64_t b, int64_t *out) {
  switch (t) {
  case ICL_GGUF_U8: case ICL_GGUF_U16: case ICL_GGUF_U32: case ICL_GGUF_BOOL: *out = (int64_t)b; return ICL_OK;
  case ICL_GGUF_I8: *out = sext(b, 8); return ICL_OK;
  case ICL_GGUF_I16: *out = sext(b, 16); return ICL_OK;
  case ICL_GGUF_I32: *out = sext(b, 32); return ICL_OK;
  case ICL_GGUF_I64: *out = sext(b, 64); return ICL_OK;
  case ICL_GGUF_U64:
    if (b > (uint64_t)INT64_MAX) return ICL_EFORMAT;
    *out = (int64_t)b;
    return ICL_OK;
  default: return ICL_EFORMAT;
  }
}

/* Double value of raw bits of a numeric type t (not bool). */
static int bits_float(uint32_t t, uint64_t b, double *out) {
  if (t == ICL_GGUF_F32) {
    uint32_t u = (uint32_t)b;
    float f;
    memcpy(&f, &u, 4);
    *out = f;
    return ICL_OK;
  }
  if (t == ICL_GGUF_F64) {
    memcpy(out, &b, 8);
    return ICL_OK;
  }
  if (t == ICL_GGUF_U64) {
    *out = (double)b;
    return ICL_OK;
  }
  int64_t v;
  if (t == ICL_GGUF_BOOL || bits_int(t, b, &v)) return ICL_EFORMAT;
  *out = (double)v;
  return ICL_OK;
}

/* ---- cursor reads, each bounds-checked ---- */

static int need(rd *r, uint64_t n, const char *field) {
  size_t left = r->g->size - r->pos;
  if (n > left)
    return fail(r, "%s: needs %llu bytes at offset %zu but only %zu remain (truncated file?)", field,
                (unsigned long long)n, r->pos, left);
  return ICL_OK;
}

static size_t left(const rd *r) { return r->g->size - r->pos; }

static int get_uint(rd *r, size_t n, const char *field, uint64_t *v) {
  int rc = need(r, n, field);
  if (rc) return rc;
  *v = le(r->g->base + r->pos, n);
  r->pos += n;
  return ICL_OK;
}

static int get_u32(rd *r, const char *field, uint32_t *v) {
  uint64_t b;
  int rc = get_uint(r, 4, field, &b);
  *v = (uint32_t)b;
  return rc;
}

/* Reads a string header and skips its bytes; *off is their file offset. */
static int get_str(rd *r, const char *field, uint64_t *off, uint64_t *len) {
  int rc = get_uint(r, 8, field, len);
  if (rc) return rc;
  if (*len > left(r))
    return fail(r, "%s = %llu exceeds the %zu bytes left in the file", field, (unsigned long long)*len, left(r));
  *off = r->pos;
  r->pos += (size_t)*len;
  return ICL_OK;
}

/* ---- arena of NUL-terminated copies ---- */

static int arena_put(icl_gguf *g, const uint8_t *s, size_t len, uint64_t *off) {
  if (g->arena_cap - g->arena_len < len + 1) {
    size_t cap = g->arena_cap ? g->arena_cap : 4096;
    while (cap - g->arena_len < len + 1) {
      if (cap > SIZE_MAX / 2) return ICL_ENOMEM;
      cap *= 2;
    }
    char *a = realloc(g->arena, cap);
    if (!a) return ICL_ENOMEM;
    g->arena = a;
    g->arena_cap = cap;
  }
  memcpy(g->arena + g->arena_len, s, len);
  g->arena[g->arena_len + len] = '\0';
  *off = g->arena_len;
  g->arena_len += len + 1;
  return ICL_OK;
}

/* ---- hash tables ---- */

/* FNV-1a from a per-handle seed, then a final mix: colliding names cannot be crafted offline to
 * turn lookups quadratic. */
static uint64_t hash_str(uint64_t seed, const char *s) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

static int ht_init(htab *h, int64_t n) {
  uint64_t cap = 16;
  while (cap < (uint64_t)n * 2) cap *= 2;
  h->slot = calloc(cap, sizeof *h->slot);
  h->mask = cap - 1;
  return h->slot ? ICL_OK : ICL_ENOMEM;
}

typedef const char *(*name_fn)(const icl_gguf *g, int64_t i);

static const char *kv_name(const icl_gguf *g, int64_t i) { return g->arena + g->kv[i].key; }
static const char *tensor_name(const icl_gguf *g, int64_t i) { return g->arena + g->tname[i]; }

/* Slot where s is or would go. */
static uint64_t ht_probe(const icl_gguf *g, const htab *h, name_fn nm, const char *s) {
  uint64_t k = hash_str(g->hseed, s) & h->mask;
  while (h->slot[k] && strcmp(nm(g, h->slot[k] - 1), s) != 0) k = (k + 1) & h->mask;
  return k;
}

/* Inserts index i; returns -1, or the index already holding the same name. */
static int64_t ht_insert(const icl_gguf *g, htab *h, name_fn nm, int64_t i) {
  uint64_t k = ht_probe(g, h, nm, nm(g, i));
  if (h->slot[k]) return h->slot[k] - 1;
  h->slot[k] = i + 1;
  return -1;
}

static int64_t ht_find(const icl_gguf *g, const htab *h, name_fn nm, const char *s) {
  if (!h->slot || !s) return -1;
  return h->slot[ht_probe(g, h, nm, s)] - 1;
}

/* ---- values ---- */

static int check_bools(rd *r, const uint8_t *p, uint64_t n, const char *field) {
  for (uint64_t j = 0; j < n; j++)
    if (p[j] > 1) return fail(r, "%s: bool value %u (expected 0 or 1)", field, p[j]);
  return ICL_OK;
}

static int check_vtype(rd *r, uint32_t t, const char *field) {
  if (t >= ICL_GGUF_N_VTYPES) return fail(r, "%s %u is unknown (expected 0..12)", field, t);
  return ICL_OK;
}

/* Skips n packed fixed-size elements of type t, validating bools. */
static int skip_fixed(rd *r, uint32_t t, uint64_t n, const char *field) {
  size_t sz = VSIZE[t];
  if (n > left(r) / sz)
    return fail(r, "%s: %llu elements of %s need more than the %zu bytes left", field, (unsigned long long)n,
                VNAME[t], left(r));
  int rc = t == ICL_GGUF_BOOL ? check_bools(r, r->g->base + r->pos, n, field) : ICL_OK;
  r->pos += (size_t)(n * sz);
  return rc;
}

/* Reads an array header, checking the count against the smallest possible element size. */
static int get_array_head(rd *r, uint32_t *et, uint64_t *n) {
  int rc = get_u32(r, "array element type", et);
  if (!rc) rc = check_vtype(r, *et, "array element type");
  if (!rc) rc = get_uint(r, 8, "array count", n);
  if (rc) return rc;
  size_t min = *et == ICL_GGUF_STRING ? MIN_STRING_BYTES : *et == ICL_GGUF_ARRAY ? MIN_ARRAY_BYTES : VSIZE[*et];
  if (*n > left(r) / min)
    return fail(r, "array count = %llu of %s exceeds what the %zu bytes left can hold", (unsigned long long)*n,
                VNAME[*et], left(r));
  return ICL_OK;
}

/* Validates and skips one value of type t nested depth levels deep (nothing is stored). */
static int skip_value(rd *r, uint32_t t, int depth) {
  uint64_t off, len, n;
  uint32_t et;
  if (t == ICL_GGUF_STRING) return get_str(r, "nested string length", &off, &len);
  if (t != ICL_GGUF_ARRAY) return skip_fixed(r, t, 1, "nested value");
  if (depth >= MAX_DEPTH) return fail(r, "arrays nested deeper than %d levels", MAX_DEPTH);
  int rc = get_array_head(r, &et, &n);
  if (rc) return rc;
  if (et != ICL_GGUF_STRING && et != ICL_GGUF_ARRAY) return skip_fixed(r, et, n, "nested array");
  for (uint64_t j = 0; j < n && !rc; j++) rc = skip_value(r, et, depth + 1);
  return rc;
}

/* Copies the n strings of a string array into the arena. */
static int read_str_array(rd *r, gkv *kv) {
  kv->soff = malloc((size_t)(kv->n + 1) * sizeof *kv->soff);
  if (!kv->soff) return oom(r);
  for (uint64_t j = 0; j < kv->n; j++) {
    uint64_t off, len;
    char field[64];
    snprintf(field, sizeof field, "element %llu length", (unsigned long long)j);
    int rc = get_str(r, field, &off, &len);
    if (rc) return rc;
    if (arena_put(r->g, r->g->base + off, (size_t)len, &kv->soff[j])) return oom(r);
  }
  kv->soff[kv->n] = r->g->arena_len;
  return ICL_OK;
}

static int read_array(rd *r, gkv *kv) {
  int rc = get_array_head(r, &kv->atype, &kv->n);
  if (rc) return rc;
  if (kv->atype == ICL_GGUF_STRING) return read_str_array(r, kv);
  if (kv->atype == ICL_GGUF_ARRAY) { /* arrays of arrays: validated, not exposed */
    for (uint64_t j = 0; j < kv->n && !rc; j++) rc = skip_value(r, ICL_GGUF_ARRAY, 1);
    return rc;
  }
  kv->val = r->pos;
  return skip_fixed(r, kv->atype, kv->n, "array");
}

static int read_value(rd *r, gkv *kv) {
  if (kv->type == ICL_GGUF_ARRAY) return read_array(r, kv);
  if (kv->type == ICL_GGUF_STRING) {
    uint64_t off;
    int rc = get_str(r, "string length", &off, &kv->n);
    if (rc) return rc;
    return arena_put(r->g, r->g->base + off, (size_t)kv->n, &kv->val) ? oom(r) : ICL_OK;
  }
  size_t sz = VSIZE[kv->type];
  int rc = need(r, sz, VNAME[kv->type]);
  if (rc) return rc;
  kv->val = le(r->g->base + r->pos, sz);
  if (kv->type == ICL_GGUF_BOOL && kv->val > 1)
    return fail(r, "bool value %llu (expected 0 or 1)", (unsigned long long)kv->val);
  r->pos += sz;
  return ICL_OK;
}

/* Keys and tensor names: non-empty and without NUL bytes (they are looked up as C strings). */
static int check_name(rd *r, const char *what, uint64_t off, uint64_t len) {
  if (len == 0) return fail(r, "%s is empty", what);
  if (memchr(r->g->base + off, 0, (size_t)len)) return fail(r, "%s contains a NUL byte", what);
  return ICL_OK;
}

static int read_kv(rd *r, int64_t i) {
  icl_gguf *g = r->g;
  gkv *kv = &g->kv[i];
  uint64_t off, len;
  snprintf(r->where, sizeof r->where, "kv %lld", (long long)i);
  int rc = get_str(r, "key length", &off, &len);
  if (!rc) rc = check_name(r, "key", off, len);
  if (rc) return rc;
  set_where(r, "kv", i, g->base + off, (size_t)len);
  if (arena_put(g, g->base + off, (size_t)len, &kv->key)) return oom(r);
  int64_t dup = ht_insert(g, &g->keys, kv_name, i);
  if (dup >= 0) return fail(r, "duplicate key (also kv %lld)", (long long)dup);
  rc = get_u32(r, "value type", &kv->type);
  if (!rc) rc = check_vtype(r, kv->type, "value type");
  return rc ? rc : read_value(r, kv);
}

/* general.alignment: a u32 power of two when present. */
static int read_alignment(rd *r) {
  icl_gguf *g = r->g;
  int64_t i = ht_find(g, &g->keys, kv_name, "general.alignment");
  g->alignment = ICL_GGUF_DEFAULT_ALIGNMENT;
  if (i < 0) return ICL_OK;
  snprintf(r->where, sizeof r->where, "kv %lld 'general.alignment'", (long long)i);
  if (g->kv[i].type != ICL_GGUF_U32)
    return fail(r, "type %s (expected u32)", icl_gguf_vtype_name((int)g->kv[i].type));
  uint64_t a = g->kv[i].val;
  if (a == 0 || (a & (a - 1)))
    return fail(r, "value %llu is not a power of two (expected 1, 2, 4, ..., default 32)", (unsigned long long)a);
  g->alignment = (uint32_t)a;
  return ICL_OK;
}

/* ---- tensor infos ---- */

static int read_dims(rd *r, icl_gguf_tensor *t) {
  int rc = get_u32(r, "n_dims", &t->n_dims);
  if (rc) return rc;
  if (t->n_dims < 1 || t->n_dims > 4) return fail(r, "n_dims = %u (expected 1..4)", t->n_dims);
  int64_t prod = 1;
  for (uint32_t d = 0; d < 4; d++) {
    uint64_t v = 1;
    char field[16];
    snprintf(field, sizeof field, "dims[%u]", d);
    if (d < t->n_dims && (rc = get_uint(r, 8, field, &v))) return rc;
    if (v == 0 || v > (uint64_t)INT64_MAX)
      return fail(r, "%s = %llu (expected 1..%lld)", field, (unsigned long long)v, (long long)INT64_MAX);
    if ((int64_t)v > INT64_MAX / prod)
      return fail(r, "%s = %llu: element count overflows int64", field, (unsigned long long)v);
    prod *= (int64_t)v;
    t->ne[d] = (int64_t)v;
  }
  return ICL_OK;
}

/* Type id known, rows made of whole blocks, byte size without overflow. */
static int check_type(rd *r, icl_gguf_tensor *t) {
  if (!icl_type_known(t->type)) return fail(r, "type = %u is not a known tensor type", t->type);
  int64_t be = icl_type_block_elems(t->type);
  size_t bb = icl_type_block_bytes(t->type);
  if (t->ne[0] % be)
    return fail(r, "dims[0] = %lld is not a multiple of the %s block size %lld", (long long)t->ne[0],
                icl_type_name(t->type), (long long)be);
  uint64_t blocks = (uint64_t)(t->ne[0] / be), rows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
  if (blocks > SIZE_MAX / bb || rows > SIZE_MAX / (blocks * bb))
    return fail(r, "byte size of %s [%lld, %lld, %lld, %lld] overflows", icl_type_name(t->type),
                (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
  t->nbytes = (size_t)(rows * blocks * bb);
  return ICL_OK;
}

static int read_tensor(rd *r, int64_t i) {
  icl_gguf *g = r->g;
  icl_gguf_tensor *t = &g->tensors[i];
  uint64_t off, len;
  snprintf(r->where, sizeof r->where, "tensor %lld", (long long)i);
  int rc = get_str(r, "name length", &off, &len);
  if (!rc) rc = check_name(r, "name", off, len);
  if (rc) return rc;
  set_where(r, "tensor", i, g->base + off, (size_t)len);
  if (arena_put(g, g->base + off, (size_t)len, &g->tname[i])) return oom(r);
  int64_t dup = ht_insert(g, &g->tnames, tensor_name, i);
  if (dup >= 0) return fail(r, "duplicate tensor name (also tensor %lld)", (long long)dup);
  if ((rc = read_dims(r, t)) || (rc = get_u32(r, "type", &t->type)) || (rc = check_type(r, t))) return rc;
  if ((rc = get_uint(r, 8, "offset", &t->offset))) return rc;
  if (t->offset % g->alignment)
    return fail(r, "offset = %llu is not a multiple of the alignment %u", (unsigned long long)t->offset,
                g->alignment);
  return ICL_OK;
}

/* Data in bounds of the file; pointers set. */
static int place_tensor(rd *r, int64_t i) {
  icl_gguf *g = r->g;
  icl_gguf_tensor *t = &g->tensors[i];
  set_where(r, "tensor", i, t->name, strlen(t->name));
  size_t room = g->data_off <= g->size ? g->size - g->data_off : 0;
  if (t->offset > room || t->nbytes > room - t->offset)
    return fail(r, "data [%llu, +%zu) ends past the end of the file (data section at %zu, file %zu bytes)",
                (unsigned long long)t->offset, t->nbytes, g->data_off, g->size);
  t->data = g->base + g->data_off + t->offset;
  return ICL_OK;
}

typedef struct span {
  uint64_t off;
  int64_t i;
} span;

static int by_offset(const void *a, const void *b) {
  uint64_t x = ((const span *)a)->off, y = ((const span *)b)->off;
  return x < y ? -1 : x > y;
}

static int overlap_error(rd *r, const icl_gguf_tensor *a, int64_t ia, int64_t ib) {
  const icl_gguf_tensor *b = &r->g->tensors[ib];
  char other[120];
  set_where(r, "tensor", ib, b->name, strlen(b->name));
  label(other, sizeof other, "tensor", ia, a->name, strlen(a->name));
  return fail(r, "data at offset %llu overlaps %s (offset %llu, %zu bytes)", (unsigned long long)b->offset, other,
              (unsigned long long)a->offset, a->nbytes);
}

/* No two tensors share bytes. */
static int check_overlap(rd *r) {
  icl_gguf *g = r->g;
  if (g->n_tensors < 2) return ICL_OK;
  span *sp = malloc((size_t)g->n_tensors * sizeof *sp);
  if (!sp) return oom(r);
  for (int64_t i = 0; i < g->n_tensors; i++) sp[i] = (span){g->tensors[i].offset, i};
  qsort(sp, (size_t)g->n_tensors, sizeof *sp, by_offset);
  int rc = ICL_OK;
  for (int64_t k = 1; k < g->n_tensors && !rc; k++) {
    const icl_gguf_tensor *a = &g->tensors[sp[k - 1].i];
    if (sp[k].off < a->offset + a->nbytes) rc = overlap_error(r, a, sp[k - 1].i, sp[k].i);
  }
  free(sp);
  return rc;
}

/* ---- whole file ---- */

static int read_version(rd *r) {
  icl_gguf *g = r->g;
  int rc = get_u32(r, "version", &g->version);
  if (rc) return rc;
  if (g->version == 2 || g->version == 3) return ICL_OK;
  if (g->version == 1)
    return icl_error_set(r->err, ICL_EUNSUPPORTED,
                         "%s: header: GGUF version 1 is not supported (expected 2 or 3; re-convert the model)",
                         g->name);
  if (g->version == 0x02000000u || g->version == 0x03000000u)
    return icl_error_set(r->err, ICL_EUNSUPPORTED,
                         "%s: header: version bytes are big-endian (only little-endian GGUF is supported)",
                         g->name);
  return fail(r, "version = %u is unknown (expected 2 or 3)", g->version);
}

static int read_header(rd *r) {
  icl_gguf *g = r->g;
  uint64_t magic, nt, nkv;
  snprintf(r->where, sizeof r->where, "header");
  int rc = get_uint(r, 4, "magic", &magic);
  if (rc) return rc;
  if (magic != ICL_GGUF_MAGIC) {
    char m[16];
    printable(m, sizeof m, g->base, 4);
    return fail(r, "magic is '%s' (expected 'GGUF'; not a GGUF file)", m);
  }
  if ((rc = read_version(r)) || (rc = get_uint(r, 8, "tensor_count", &nt)) ||
      (rc = get_uint(r, 8, "kv_count", &nkv)))
    return rc;
  if (nkv > left(r) / MIN_KV_BYTES)
    return fail(r, "kv_count = %llu is more than the %zu bytes left can hold", (unsigned long long)nkv, left(r));
  if (nt > left(r) / MIN_TENSOR_BYTES)
    return fail(r, "tensor_count = %llu is more than the %zu bytes left can hold", (unsigned long long)nt,
                left(r));
  g->n_kv = (int64_t)nkv;
  g->n_tensors = (int64_t)nt;
  return ICL_OK;
}

static int alloc_tables(rd *r) {
  icl_gguf *g = r->g;
  g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
  g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
  g->tname = calloc((size_t)g->n_tensors + 1, sizeof *g->tname);
  if (!g->kv || !g->tensors || !g->tname || ht_init(&g->keys, g->n_kv) || ht_init(&g->tnames, g->n_tensors))
    return oom(r);
  return ICL_OK;
}

static int read_tensors(rd *r) {
  icl_gguf *g = r->g;
  int rc = ICL_OK;
  for (int64_t i = 0; i < g->n_tensors && !rc; i++) rc = read_tensor(r, i);
  if (rc) return rc;
  /* data section: end of infos rounded up; with no tensors it may lie past the end */
  g->data_off = r->pos + (g->alignment - r->pos % g->alignment) % g->alignment;
  for (int64_t i = 0; i < g->n_tensors; i++) g->tensors[i].name = tensor_name(g, i); /* arena is final */
  for (int64_t i = 0; i < g->n_tensors && !rc; i++) rc = place_tensor(r, i);
  return rc ? rc : check_overlap(r);
}

static int parse(icl_gguf *g, icl_error *err) {
  rd r = {.g = g, .pos = 0, .err = err};
  int rc = read_header(&r);
  if (!rc) rc = alloc_tables(&r);
  for (int64_t i = 0; i < g->n_kv && !rc; i++) rc = read_kv(&r, i);
  if (!rc) rc = read_alignment(&r);
  if (!rc) rc = read_tensors(&r);
  return rc;
}

/* ---- open / close ---- */

static icl_gguf *gguf_new(const char *name) {
  icl_gguf *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->fd = -1;
  g->hseed = ((uint64_t)(uintptr_t)g * 0x9e3779b97f4a7c15ull) ^ (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
  g->name = strdup(name ? name : "<memory>");
  if (!g->name) {
    free(g);
    return NULL;
  }
  return g;
}

static int parse_cb(void *g, icl_error *err) { return parse(g, err); }

static int finish_open(icl_gguf *g, icl_gguf **out, icl_error *err) {
  int rc = icl_gguf_guarded(g, parse_cb, g, err);
  if (rc) {
    icl_gguf_close(g);
    return rc;
  }
  free(g->tname); /* names now point into the arena through the tensors */
  g->tname = NULL;
  icl_error_clear(err);
  *out = g;
  return ICL_OK;
}

/* 1 if the mapped file's size, modification time or inode changed since it was mapped. */
static int file_changed(const icl_gguf *g) {
  struct stat now;
  if (fstat(g->fd, &now) != 0) return 1;
  return now.st_size != g->st.st_size || now.st_ino != g->st.st_ino || now.st_mtim.tv_sec != g->st.st_mtim.tv_sec ||
         now.st_mtim.tv_nsec != g->st.st_mtim.tv_nsec;
}

int icl_gguf_guarded(const icl_gguf *g, int (*fn)(void *ud, icl_error *err), void *ud, icl_error *err) {
  if (!g->mapped) return fn(ud, err);
  int rc = ICL_OK;
  int cut = icl_sigbus_guard(g->base, g->size, fn, ud, err, &rc);
  if (cut || file_changed(g))
    return icl_error_set(err, ICL_EIO, "%s: changed while being read (truncated or rewritten by another process)",
                         g->name);
  return rc;
}

int icl_gguf_open_memory(const void *data, size_t size, const char *name, icl_gguf **out, icl_error *err) {
  static const uint8_t empty[1];
  if (!out) return icl_error_set(err, ICL_EINVAL, "icl_gguf_open_memory: out is NULL");
  *out = NULL;
  if (!data && size) return icl_error_set(err, ICL_EINVAL, "icl_gguf_open_memory: data is NULL");
  icl_gguf *g = gguf_new(name);
  if (!g) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", name ? name : "<memory>");
  g->base = data ? data : empty;
  g->size = size;
  return finish_open(g, out, err);
}

/* Maps path read-only; an empty file maps to a static empty buffer. */
static int map_file(icl_gguf *g, const char *path, icl_error *err) {
  static const uint8_t empty[1];
  struct stat st;
  int fd = icl_file_open_read(path, &st, err), rc = ICL_OK;
  if (fd < 0) return ICL_EIO;
  if ((uint64_t)st.st_size > SIZE_MAX) rc = icl_error_set(err, ICL_EIO, "%s: too large to map", path);
  if (rc || st.st_size == 0) {
    close(fd);
    g->base = empty;
    return rc;
  }
  void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  if (p == MAP_FAILED) {
    close(fd);
    return icl_error_set(err, ICL_EIO, "%s: cannot map: %s", path, strerror(e));
  }
  g->fd = fd, g->st = st;
  g->base = p;
  g->size = (size_t)st.st_size;
  g->mapped = 1;
  return ICL_OK;
}

int icl_gguf_open(const char *path, icl_gguf **out, icl_error *err) {
  if (!out || !path) return icl_error_set(err, ICL_EINVAL, "icl_gguf_open: path or out is NULL");
  *out = NULL;
  icl_gguf *g = gguf_new(path);
  if (!g) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", path);
  int rc = map_file(g, path, err);
  if (rc) {
    icl_gguf_close(g);
    return rc;
  }
  return finish_open(g, out, err);
}

void icl_gguf_close(icl_gguf *g) {
  if (!g) return;
  if (g->mapped) munmap((void *)g->base, g->size);
  if (g->fd >= 0) close(g->fd);
  for (int64_t i = 0; g->kv && i < g->n_kv; i++) free(g->kv[i].soff);
  free(g->kv);
  free(g->tensors);
  free(g->tname);
  free(g->arena);
  free(g->keys.slot);
  free(g->tnames.slot);
  free(g->name);
  free(g);
}

/* ---- accessors ---- */

const char *icl_gguf_name(const icl_gguf *g) { return g->name; }
uint32_t icl_gguf_version(const icl_gguf *g) { return g->version; }
size_t icl_gguf_size(const icl_gguf *g) { return g->size; }
uint32_t icl_gguf_alignment(const icl_gguf *g) { return g->alignment; }
int64_t icl_gguf_n_kv(const icl_gguf *g) { return g->n_kv; }
int64_t icl_gguf_n_tensors(const icl_gguf *g) { return g->n_tensors; }

static const gkv *kv_at(const icl_gguf *g, int64_t i) { return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL; }

int64_t icl_gguf_find_key(const icl_gguf *g, const char *key) { return g ? ht_find(g, &g->keys, kv_name, key) : -1; }

const char *icl_gguf_key(const icl_gguf *g, int64_t i) {
  const gkv *kv = kv_at(g, i);
  return kv ? g->arena + kv->key : NULL;
}

icl_gguf_vtype icl_gguf_kv_type(const icl_gguf *g, int64_t i) {
  const gkv *kv = kv_at(g, i);
  return kv ? (icl_gguf_vtype)kv->type : (icl_gguf_vtype)-1;
}

int icl_gguf_kv_int(const icl_gguf *g, int64_t i, int64_t *out) {
  const gkv *kv = kv_at(g, i);
  return kv && out ? bits_int(kv->type, kv->val, out) : ICL_EFORMAT;
}

int icl_gguf_kv_float(const icl_gguf *g, int64_t i, double *out) {
  const gkv *kv = kv_at(g, i);
  return kv && out ? bits_float(kv->type, kv->val, out) : ICL_EFORMAT;
}

const char *icl_gguf_kv_str(const icl_gguf *g, int64_t i, size_t *len) {
  const gkv *kv = kv_at(g, i);
  if (!kv || kv->type != ICL_GGUF_STRING) return NULL;
  if (len) *len = (size_t)kv->n;
  return g->arena + kv->val;
}

static const gkv *arr_at(const icl_gguf *g, int64_t i) {
  const gkv *kv = kv_at(g, i);
  return kv && kv->type == ICL_GGUF_ARRAY ? kv : NULL;
}

int icl_gguf_arr_type(const icl_gguf *g, int64_t i) {
  const gkv *kv = arr_at(g, i);
  return kv ? (int)kv->atype : -1;
}

uint64_t icl_gguf_arr_len(const icl_gguf *g, int64_t i) {
  const gkv *kv = arr_at(g, i);
  return kv ? kv->n : 0;
}

/* Numeric (fixed-size) array kv, or NULL. */
static const gkv *num_arr(const icl_gguf *g, int64_t i) {
  const gkv *kv = arr_at(g, i);
  return kv && VSIZE[kv->atype] ? kv : NULL;
}

const void *icl_gguf_arr_data(const icl_gguf *g, int64_t i) {
  const gkv *kv = num_arr(g, i);
  return kv ? g->base + kv->val : NULL;
}

/* Raw bits of element j of a numeric array. */
static int arr_bits(const icl_gguf *g, int64_t i, uint64_t j, uint32_t *type, uint64_t *bits) {
  const gkv *kv = num_arr(g, i);
  if (!kv || j >= kv->n) return ICL_EFORMAT;
  size_t sz = VSIZE[kv->atype];
  *type = kv->atype;
  *bits = le(g->base + kv->val + j * sz, sz);
  return ICL_OK;
}

int icl_gguf_arr_int(const icl_gguf *g, int64_t i, uint64_t j, int64_t *out) {
  uint32_t t;
  uint64_t b;
  return out && !arr_bits(g, i, j, &t, &b) ? bits_int(t, b, out) : ICL_EFORMAT;
}

int icl_gguf_arr_float(const icl_gguf *g, int64_t i, uint64_t j, double *out) {
  uint32_t t;
  uint64_t b;
  return out && !arr_bits(g, i, j, &t, &b) ? bits_float(t, b, out) : ICL_EFORMAT;
}

const char *icl_gguf_arr_str(const icl_gguf *g, int64_t i, uint64_t j, size_t *len) {
  const gkv *kv = arr_at(g, i);
  if (!kv || kv->atype != ICL_GGUF_STRING || j >= kv->n) return NULL;
  if (len) *len = (size_t)(kv->soff[j + 1] - kv->soff[j] - 1);
  return g->arena + kv->soff[j];
}

/* Index of key or an error naming file and key. */
static int64_t need_key(const icl_gguf *g, const char *key, icl_error *err) {
  int64_t i = icl_gguf_find_key(g, key);
  if (i < 0) icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is missing", g->name, key);
  return i;
}

int icl_gguf_get_int(const icl_gguf *g, const char *key, int64_t *out, icl_error *err) {
  int64_t i = need_key(g, key, err);
  if (i < 0) return ICL_EFORMAT;
  if (icl_gguf_kv_int(g, i, out))
    return icl_error_set(err, ICL_EFORMAT, "%s: kv %lld '%s': type %s (expected an integer that fits int64)",
                         g->name, (long long)i, key, icl_gguf_vtype_name((int)g->kv[i].type));
  return ICL_OK;
}

int icl_gguf_get_float(const icl_gguf *g, const char *key, double *out, icl_error *err) {
  int64_t i = need_key(g, key, err);
  if (i < 0) return ICL_EFORMAT;
  if (icl_gguf_kv_float(g, i, out))
    return icl_error_set(err, ICL_EFORMAT, "%s: kv %lld '%s': type %s (expected a number)", g->name,
                         (long long)i, key, icl_gguf_vtype_name((int)g->kv[i].type));
  return ICL_OK;
}

const char *icl_gguf_get_str(const icl_gguf *g, const char *key) {
  return icl_gguf_kv_str(g, icl_gguf_find_key(g, key), NULL);
}

const icl_gguf_tensor *icl_gguf_tensor_at(const icl_gguf *g, int64_t i) {
  return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

static const char *tensor_name_final(const icl_gguf *g, int64_t i) { return g->tensors[i].name; }

const icl_gguf_tensor *icl_gguf_find_tensor(const icl_gguf *g, const char *name) {
  int64_t i = g ? ht_find(g, &g->tnames, tensor_name_final, name) : -1;
  return i >= 0 ? &g->tensors[i] : NULL;
}
