/* Host tensor files: .npy (version 1.0 written; 1.0-3.0 read) and safetensors, both written atomically
 * (temporary file in the same directory, then rename). Little-endian hosts only, as both formats are. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_read.h"
#include "file_tmp.h"
#include "icl/tensor.h"
#include "icl/types.h"
#include "tensor_ops.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tensor_io.c assumes a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define ST_MAX_HEADER (100u << 20) /* safetensors headers above 100 MiB are refused */

/* ---- atomic writes --------------------------------------------------------------------------------------- */

typedef struct tmpfile_t {
  FILE *f;
  char path[4096];
} tmpfile_t;

static int tmp_open(tmpfile_t *t, const char *path, icl_error *err) {
  int fd = icl_tmp_create(path, t->path, sizeof t->path, err);
  if (fd < 0) return ICL_EIO;
  t->f = fdopen(fd, "wb");
  if (t->f) return ICL_OK;
  close(fd), unlink(t->path);
  return icl_error_set(err, ICL_EIO, "%s: cannot create: %s", t->path, strerror(errno));
}

static int tmp_write(tmpfile_t *t, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, t->f) == n; }

/* Closes the temporary file and renames it over path; on any failure removes it. ok = 0 aborts. */
static int tmp_finish(tmpfile_t *t, const char *path, int ok, icl_error *err) {
  int e = 0;
  if (ok && (fflush(t->f) || fsync(fileno(t->f)))) ok = 0, e = errno;
  if (!ok && !e) e = errno;
  if (fclose(t->f) && ok) ok = 0, e = errno;
  if (ok && rename(t->path, path)) ok = 0, e = errno;
  if (ok) return ICL_OK;
  remove(t->path);
  return icl_error_set(err, ICL_EIO, "%s: write failed: %s", path, e ? strerror(e) : "short write");
}

/* ---- .npy ------------------------------------------------------------------------------------------------ */

/* Builds the v1.0 header (magic..padding..'\n'), total length a multiple of 64; returns its length. */
static size_t npy_header(const icl_tensor *t, char *buf, size_t cap) {
  char dict[256], dims[160] = "";
  for (int i = 0, k = 0; i < t->ndim; i++)
    k += snprintf(dims + k, sizeof dims - (size_t)k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  int k = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s%s), }", dims,
                   t->ndim == 1 ? "," : "");
  size_t total = (10 + (size_t)k + 1 + 63) / 64 * 64; /* magic, version, length, dict, '\n'; aligned */
  if (total > cap || total - 10 > 65535) return 0;
  size_t hl = total - 10;
  memcpy(buf, NPY_MAGIC, 6);
  buf[6] = 1, buf[7] = 0, buf[8] = (char)(hl & 0xff), buf[9] = (char)(hl >> 8);
  memcpy(buf + 10, dict, (size_t)k);
  memset(buf + 10 + k, ' ', hl - (size_t)k - 1);
  buf[total - 1] = '\n';
  return total;
}

int icl_tensor_save_npy(const icl_tensor *t, const char *path, icl_error *err) {
  char hdr[512];
  size_t hn = npy_header(t, hdr, sizeof hdr);
  if (!hn) return icl_error_set(err, ICL_EINVAL, "%s: npy header too long", path);
  tmpfile_t tf;
  int rc = tmp_open(&tf, path, err);
  if (rc) return rc;
  int ok = tmp_write(&tf, hdr, hn) && tmp_write(&tf, t->data, (size_t)t->numel * sizeof(float));
  return tmp_finish(&tf, path, ok, err);
}

/* Finds the key 'key' of a header dict and returns the text after its colon (spaces skipped), or NULL. Only
 * quoted strings in key position count: 'shape' inside another key's string value does not match. */
static const char *npy_field(const char *h, const char *key) {
  size_t klen = strlen(key);
  int depth = 0, expect_key = 0;
  for (const char *p = h; *p; p++) {
    char c = *p;
    if (c == '\'' || c == '"') {
      const char *q = strchr(p + 1, c);
      if (!q) return NULL;
      if (expect_key && depth == 1 && (size_t)(q - p - 1) == klen && !strncmp(p + 1, key, klen)) {
        for (p = q + 1; *p == ' '; p++) {}
        if (*p++ != ':') return NULL;
        while (*p == ' ') p++;
        return p;
      }
      p = q, expect_key = 0;
    } else if (c == '{' || c == '(' || c == '[') {
      depth++, expect_key = c == '{' && depth == 1;
    } else if (c == '}' || c == ')' || c == ']') {
      depth--;
    } else if (c == ',' && depth == 1) {
      expect_key = 1;
    } else if (c != ' ') {
      expect_key = 0;
    }
  }
  return NULL;
}

/* Parses "(2, 3)", "(3,)", "()" into shape; returns the number of dims or -1. */
static int npy_shape(const char *p, int64_t *shape) {
  if (!p || *p++ != '(') return -1;
  int nd = 0;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') return nd;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || nd == ICL_TENSOR_MAXDIM) return nd == ICL_TENSOR_MAXDIM ? -2 : -1;
    shape[nd++] = v;
    p = end;
  }
}

typedef struct npy_info {
  int elsize; /* 2 (f2), 4 (f4), 8 (f8) */
  int ndim;
  int64_t shape[ICL_TENSOR_MAXDIM];
} npy_info;

static int npy_parse_header(const char *path, const char *h, npy_info *ni, icl_error *err) {
  const char *d = npy_field(h, "descr"), *fo = npy_field(h, "fortran_order");
  if (!d || !fo) return icl_error_set(err, ICL_EFORMAT, "%s: npy header lacks 'descr' or 'fortran_order'", path);
  if (!strncmp(d, "'<f4'", 5)) ni->elsize = 4;
  else if (!strncmp(d, "'<f8'", 5)) ni->elsize = 8;
  else if (!strncmp(d, "'<f2'", 5)) ni->elsize = 2;
  else
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: npy dtype %.8s not supported (expected '<f4', '<f8' or '<f2')",
                         path, d);
  ni->ndim = npy_shape(npy_field(h, "shape"), ni->shape);
  if (ni->ndim == -2)
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: more than %d dimensions", path, ICL_TENSOR_MAXDIM);
  if (ni->ndim < 0) return icl_error_set(err, ICL_EFORMAT, "%s: npy header has a malformed 'shape'", path);
  if (strncmp(fo, "False", 5) && ni->ndim > 1)
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: fortran_order arrays are not supported", path);
  return icl_tensor_check_shape(ni->ndim, ni->shape, path, err) ? ICL_EFORMAT : ICL_OK;
}

/* Reads n elements of size elsize into f32 data. */
static int read_f32(FILE *f, int elsize, float *data, int64_t n) {
  if (elsize == 4) return fread(data, 4, (size_t)n, f) == (size_t)n;
  for (int64_t i = 0; i < n; i++) {
    unsigned char b[8];
    if (fread(b, (size_t)elsize, 1, f) != 1) return 0;
    if (elsize == 8) {
      double v;
      memcpy(&v, b, 8);
      data[i] = (float)v;
    } else {
      data[i] = icl_f16_to_f32((uint16_t)(b[0] | b[1] << 8));
    }
  }
  return 1;
}

/* Bytes from the current position to the end of the file. */
static uint64_t file_rest(FILE *f) {
  long here = ftell(f), end = here;
  if (here >= 0 && !fseek(f, 0, SEEK_END)) end = ftell(f);
  fseek(f, here, SEEK_SET);
  return end > here ? (uint64_t)(end - here) : 0;
}

static int npy_read(FILE *f, const char *path, icl_tensor **out, icl_error *err) {
  unsigned char pre[12];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, NPY_MAGIC, 6))
    return icl_error_set(err, ICL_EFORMAT, "%s: not a .npy file (bad magic)", path);
  if (pre[6] < 1 || pre[6] > 3) return icl_error_set(err, ICL_EUNSUPPORTED, "%s: npy version %d", path, pre[6]);
  size_t hl = pre[8] | (size_t)pre[9] << 8;
  if (pre[6] > 1) {
    if (fread(pre + 10, 1, 2, f) != 2) return icl_error_set(err, ICL_EFORMAT, "%s: truncated npy header", path);
    hl |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (hl > 65536) return icl_error_set(err, ICL_EFORMAT, "%s: npy header length %zu too large", path, hl);
  char *h = malloc(hl + 1);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: cannot allocate the npy header", path);
  npy_info ni;
  int rc = fread(h, 1, hl, f) == hl ? ICL_OK : icl_error_set(err, ICL_EFORMAT, "%s: truncated npy header", path);
  h[hl] = '\0';
  if (!rc) rc = npy_parse_header(path, h, &ni, err);
  free(h);
  if (rc) return rc;
  uint64_t want = (uint64_t)ni.elsize, have = file_rest(f);
  for (int i = 0; i < ni.ndim; i++)
    want = ni.shape[i] && want > have / (uint64_t)ni.shape[i] ? UINT64_MAX : want * (uint64_t)ni.shape[i];
  if (want > have)
    return icl_error_set(err, ICL_EFORMAT, "%s: truncated: the shape needs more data than the file's %llu bytes", path,
                         (unsigned long long)have);
  *out = icl_tensor_new(ni.ndim, ni.shape);
  if (!*out) return icl_error_set(err, ICL_ENOMEM, "%s: cannot allocate the tensor", path);
  if (read_f32(f, ni.elsize, (*out)->data, (*out)->numel)) return ICL_OK;
  icl_tensor_free(*out), *out = NULL;
  return icl_error_set(err, ICL_EIO, "%s: read failed", path);
}

int icl_tensor_load_npy(const char *path, icl_tensor **out, icl_error *err) {
  *out = NULL;
  FILE *f = icl_file_fopen_read(path, err);
  if (!f) return ICL_EIO;
  int rc = npy_read(f, path, out, err);
  fclose(f);
  return rc;
}

/* ---- safetensors ----------------------------------------------------------------------------------------- */

/* Builds the JSON header (padded with spaces to a multiple of 8); NULL on allocation failure. */
static char *st_header(int n, const char *const *names, const icl_tensor *const *ts, size_t *len) {
  cJSON *root = cJSON_CreateObject();
  uint64_t off = 0;
  for (int i = 0; root && i < n; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, names[i]), *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
    cJSON *offs = shape ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
    if (!offs || !cJSON_AddStringToObject(e, "dtype", "F32")) {
      cJSON_Delete(root);
      return NULL;
    }
    for (int d = 0; d < ts[i]->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ts[i]->shape[d]));
    uint64_t end = off + (uint64_t)ts[i]->numel * 4;
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
    off = end;
  }
  char *s = root ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!s) return NULL;
  size_t k = strlen(s), padded = (k + 7) / 8 * 8;
  char *p = realloc(s, padded + 1);
  if (!p) {
    free(s);
    return NULL;
  }
  memset(p + k, ' ', padded - k);
  p[padded] = '\0';
  *len = padded;
  return p;
}

static int st_check_names(const char *path, int n, const char *const *names, icl_error *err) {
  for (int i = 0; i < n; i++) {
    if (!names[i] || !names[i][0] || !strcmp(names[i], "__metadata__"))
      return icl_error_set(err, ICL_EINVAL, "%s: tensor %d has an empty or reserved name", path, i + 1);
    for (int j = 0; j < i; j++)
      if (!strcmp(names[i], names[j]))
        return icl_error_set(err, ICL_EINVAL, "%s: duplicate tensor name '%s'", path, names[i]);
  }
  return ICL_OK;
}

int icl_tensor_save_safetensors(const char *path, int n, const char *const *names, const icl_tensor *const *ts,
                                icl_error *err) {
  int rc = st_check_names(path, n, names, err);
  if (rc) return rc;
  size_t hl = 0;
  char *h = st_header(n, names, ts, &hl);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: cannot build the safetensors header", path);
  tmpfile_t tf;
  rc = tmp_open(&tf, path, err);
  if (rc) {
    free(h);
    return rc;
  }
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  int ok = tmp_write(&tf, le, 8) && tmp_write(&tf, h, hl);
  for (int i = 0; ok && i < n; i++) ok = tmp_write(&tf, ts[i]->data, (size_t)ts[i]->numel * sizeof(float));
  free(h);
  return tmp_finish(&tf, path, ok, err);
}

/* Reads an integer-valued JSON number >= 0 (exact below 2^53). */
static int json_u64(const cJSON *j, uint64_t *v) {
  if (!cJSON_IsNumber(j) || j->valuedouble < 0 || j->valuedouble > 9007199254740992.0) return 0;
  *v = (uint64_t)j->valuedouble;
  return (double)*v == j->valuedouble;
}

typedef struct st_entry {
  int elsize; /* 4 F32, 2 F16, 3 BF16 (2 bytes) */
  int ndim;
  int64_t shape[ICL_TENSOR_MAXDIM];
  uint64_t begin, end;
} st_entry;

static int st_parse_entry(const char *path, const cJSON *e, uint64_t data_len, st_entry *se, icl_error *err) {
  const char *name = e->string;
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2)
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' lacks dtype, shape or data_offsets", path, name);
  if (!strcmp(dt->valuestring, "F32")) se->elsize = 4;
  else if (!strcmp(dt->valuestring, "F16")) se->elsize = 2;
  else if (!strcmp(dt->valuestring, "BF16")) se->elsize = 3;
  else
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: tensor '%s' has dtype %s (F32, F16, BF16 supported)", path, name,
                         dt->valuestring);
  se->ndim = cJSON_GetArraySize(sh);
  if (se->ndim > ICL_TENSOR_MAXDIM)
    return icl_error_set(err, ICL_EUNSUPPORTED, "%s: tensor '%s' has %d dimensions (at most %d)", path, name, se->ndim,
                         ICL_TENSOR_MAXDIM);
  uint64_t numel = 1, v;
  for (int d = 0; d < se->ndim; d++) {
    if (!json_u64(cJSON_GetArrayItem(sh, d), &v) || (v && numel > (UINT64_MAX >> 4) / v))
      return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' has a bad shape", path, name);
    se->shape[d] = (int64_t)v, numel *= v;
  }
  if (icl_tensor_check_shape(se->ndim, se->shape, path, err)) return ICL_EFORMAT;
  if (!json_u64(cJSON_GetArrayItem(of, 0), &se->begin) || !json_u64(cJSON_GetArrayItem(of, 1), &se->end) ||
      se->begin > se->end || se->end > data_len || se->end - se->begin != numel * (se->elsize == 4 ? 4 : 2))
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s' has data_offsets that do not fit its shape or the file",
                         path, name);
  return ICL_OK;
}

static int st_read_entry(FILE *f, const char *path, const char *name, long data_start, const st_entry *se,
                         icl_tensor **out, icl_error *err) {
  *out = icl_tensor_new(se->ndim, se->shape);
  if (!*out) return icl_error_set(err, ICL_ENOMEM, "%s: cannot allocate tensor '%s'", path, name);
  int ok = fseek(f, data_start + (long)se->begin, SEEK_SET) == 0;
  if (ok && se->elsize == 4) ok = read_f32(f, 4, (*out)->data, (*out)->numel);
  for (int64_t i = 0; ok && se->elsize != 4 && i < (*out)->numel; i++) {
    unsigned char b[2];
    ok = fread(b, 2, 1, f) == 1;
    uint16_t h = (uint16_t)(b[0] | b[1] << 8);
    (*out)->data[i] = se->elsize == 2 ? icl_f16_to_f32(h) : icl_bf16_to_f32(h);
  }
  if (ok) return ICL_OK;
  icl_tensor_free(*out), *out = NULL;
  return icl_error_set(err, ICL_EFORMAT, "%s: tensor '%s': truncated data", path, name);
}

/* Reads the 8-byte length and the JSON header; data_len is what follows it in the file. */
static int st_read_header(FILE *f, const char *path, cJSON **root, long *data_start, uint64_t *data_len,
                          icl_error *err) {
  unsigned char le[8];
  uint64_t hl = 0;
  if (fseek(f, 0, SEEK_END)) return icl_error_set(err, ICL_EIO, "%s: cannot seek", path);
  long size = ftell(f);
  rewind(f);
  if (size < 8 || fread(le, 1, 8, f) != 8)
    return icl_error_set(err, ICL_EFORMAT, "%s: too short for safetensors", path);
  for (int i = 0; i < 8; i++) hl |= (uint64_t)le[i] << (8 * i);
  if (hl > ST_MAX_HEADER || hl > (uint64_t)size - 8)
    return icl_error_set(err, ICL_EFORMAT, "%s: safetensors header length %llu does not fit the file (%ld bytes)",
                         path, (unsigned long long)hl, size);
  char *h = malloc(hl + 1);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: cannot allocate the header", path);
  int ok = fread(h, 1, hl, f) == hl;
  *root = ok ? cJSON_ParseWithLength(h, hl) : NULL;
  free(h);
  if (!*root || !cJSON_IsObject(*root)) {
    cJSON_Delete(*root), *root = NULL;
    return icl_error_set(err, ICL_EFORMAT, "%s: safetensors header is not a JSON object", path);
  }
  *data_start = (long)(8 + hl);
  *data_len = (uint64_t)size - 8 - hl;
  return ICL_OK;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The saver refuses empty and duplicate names; so does the loader (a duplicate would shadow a tensor). Sorted,
 * so that a header of a million entries is checked in O(n log n). */
static int st_check_loaded_names(const char *path, const cJSON *root, int cap, icl_error *err) {
  const char **v = malloc(((size_t)cap + 1) * sizeof *v);
  if (!v) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", path);
  int n = 0, rc = ICL_OK;
  for (const cJSON *e = root->child; e && n < cap; e = e->next) v[n++] = e->string;
  qsort(v, (size_t)n, sizeof *v, cmp_names);
  if (n && !v[0][0]) rc = icl_error_set(err, ICL_EFORMAT, "%s: a tensor has an empty name", path);
  for (int i = 1; !rc && i < n; i++)
    if (!strcmp(v[i - 1], v[i])) rc = icl_error_set(err, ICL_EFORMAT, "%s: tensor name '%s' appears twice", path, v[i]);
  free(v);
  return rc;
}

static void st_free_lists(int n, char **names, icl_tensor **ts) {
  for (int i = 0; i < n; i++) {
    free(names ? names[i] : NULL);
    icl_tensor_free(ts ? ts[i] : NULL);
  }
  free(names);
  free(ts);
}

static int st_read_all(FILE *f, const char *path, int *n, char ***names, icl_tensor ***ts, icl_error *err) {
  cJSON *root = NULL;
  long ds = 0;
  uint64_t dl = 0;
  int rc = st_read_header(f, path, &root, &ds, &dl, err), k = 0;
  if (rc) return rc;
  int cap = cJSON_GetArraySize(root);
  char **nm = calloc((size_t)cap + 1, sizeof *nm);
  icl_tensor **tv = calloc((size_t)cap + 1, sizeof *tv);
  if (!nm || !tv) rc = icl_error_set(err, ICL_ENOMEM, "%s: cannot allocate the tensor list", path);
  if (!rc) rc = st_check_loaded_names(path, root, cap, err);
  for (const cJSON *e = root->child; !rc && e; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) continue;
    st_entry se;
    rc = st_parse_entry(path, e, dl, &se, err);
    if (!rc) rc = st_read_entry(f, path, e->string, ds, &se, &tv[k], err);
    if (!rc && !(nm[k] = strdup(e->string))) rc = icl_error_set(err, ICL_ENOMEM, "%s: out of memory", path);
    k += !rc;
    if (rc) icl_tensor_free(tv[k]), tv[k] = NULL;
  }
  cJSON_Delete(root);
  if (rc) {
    st_free_lists(k, nm, tv);
    return rc;
  }
  *n = k, *names = nm, *ts = tv;
  return ICL_OK;
}

int icl_tensor_load_safetensors(const char *path, int *n, char ***names, icl_tensor ***ts, icl_error *err) {
  *n = 0, *names = NULL, *ts = NULL;
  FILE *f = icl_file_fopen_read(path, err);
  if (!f) return ICL_EIO;
  int rc = st_read_all(f, path, n, names, ts, err);
  fclose(f);
  return rc;
}
