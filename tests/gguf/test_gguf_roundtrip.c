/* GGUF writer -> reader round trips: every value type, arrays, tensors of several types, files on disk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "testutil.h"

static icl_error err;

/* Bytes of random data for a tensor. */
static void *rand_bytes(size_t n, uint64_t seed) {
  uint8_t *p = malloc(n);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)t_rand_u64(&seed);
  return p;
}

static void add_scalars(icl_gguf_writer *w) {
  uint8_t u8 = 200;
  int8_t i8 = -100;
  uint16_t u16 = 60000;
  int16_t i16 = -30000;
  uint64_t u64 = (1ull << 63) + 5;
  int64_t i64 = -(1ll << 62);
  double f64 = 1e-300;
  CHECK(icl_gguf_w_scalar(w, "s.u8", ICL_GGUF_U8, &u8, &err) == 0);
  CHECK(icl_gguf_w_scalar(w, "s.i8", ICL_GGUF_I8, &i8, &err) == 0);
  CHECK(icl_gguf_w_scalar(w, "s.u16", ICL_GGUF_U16, &u16, &err) == 0);
  CHECK(icl_gguf_w_scalar(w, "s.i16", ICL_GGUF_I16, &i16, &err) == 0);
  CHECK(icl_gguf_w_u32(w, "s.u32", 4000000000u, &err) == 0);
  CHECK(icl_gguf_w_i32(w, "s.i32", -2000000000, &err) == 0);
  CHECK(icl_gguf_w_f32(w, "s.f32", 1.5f, &err) == 0);
  CHECK(icl_gguf_w_bool(w, "s.bool", 7, &err) == 0); /* any nonzero int is true */
  CHECK(icl_gguf_w_scalar(w, "s.u64", ICL_GGUF_U64, &u64, &err) == 0);
  CHECK(icl_gguf_w_scalar(w, "s.i64", ICL_GGUF_I64, &i64, &err) == 0);
  CHECK(icl_gguf_w_scalar(w, "s.f64", ICL_GGUF_F64, &f64, &err) == 0);
  CHECK(icl_gguf_w_str(w, "s.str", "h\xc3\xa9llo", &err) == 0);
  CHECK(icl_gguf_w_str(w, "s.empty", "", &err) == 0);
}

static void check_int(const icl_gguf *g, const char *key, int64_t want, int vtype) {
  int64_t i = icl_gguf_find_key(g, key), v = 0;
  CHECKF(i >= 0, "key %s", key);
  CHECKF((int)icl_gguf_kv_type(g, i) == vtype, "%s type %d", key, (int)icl_gguf_kv_type(g, i));
  CHECKF(icl_gguf_kv_int(g, i, &v) == 0 && v == want, "%s = %lld want %lld", key, (long long)v, (long long)want);
  CHECK(icl_gguf_kv_str(g, i, NULL) == NULL);
  CHECK(icl_gguf_arr_type(g, i) == -1);
}

static void check_scalars(const icl_gguf *g) {
  check_int(g, "s.u8", 200, ICL_GGUF_U8);
  check_int(g, "s.i8", -100, ICL_GGUF_I8);
  check_int(g, "s.u16", 60000, ICL_GGUF_U16);
  check_int(g, "s.i16", -30000, ICL_GGUF_I16);
  check_int(g, "s.u32", 4000000000ll, ICL_GGUF_U32);
  check_int(g, "s.i32", -2000000000ll, ICL_GGUF_I32);
  check_int(g, "s.bool", 1, ICL_GGUF_BOOL);
  check_int(g, "s.i64", -(1ll << 62), ICL_GGUF_I64);
  double d = 0;
  int64_t v = 0;
  CHECK(icl_gguf_get_float(g, "s.f32", &d, &err) == 0 && d == 1.5);
  CHECK(icl_gguf_get_float(g, "s.f64", &d, &err) == 0 && d == 1e-300);
  CHECK(icl_gguf_get_float(g, "s.i16", &d, &err) == 0 && d == -30000.0);
  CHECK(icl_gguf_get_float(g, "s.u64", &d, &err) == 0 && d == 9223372036854775813.0);
  /* u64 above INT64_MAX does not fit an int64: an error naming the key */
  CHECK(icl_gguf_get_int(g, "s.u64", &v, &err) == ICL_EFORMAT && strstr(err.msg, "s.u64"));
  CHECK(icl_gguf_get_int(g, "s.f32", &v, &err) == ICL_EFORMAT && strstr(err.msg, "f32"));
  CHECK(icl_gguf_get_float(g, "s.str", &d, &err) == ICL_EFORMAT && strstr(err.msg, "s.str"));
  CHECK(icl_gguf_get_int(g, "no.such", &v, &err) == ICL_EFORMAT && strstr(err.msg, "'no.such' is missing"));
  size_t len = 99;
  const char *s = icl_gguf_kv_str(g, icl_gguf_find_key(g, "s.str"), &len);
  CHECK(s && len == 6 && !strcmp(s, "h\xc3\xa9llo"));
  s = icl_gguf_get_str(g, "s.empty");
  CHECK(s && s[0] == '\0');
  CHECK(icl_gguf_get_str(g, "s.u8") == NULL && icl_gguf_get_str(g, "missing") == NULL);
}

static const int16_t I16S[] = {-1, 2, -3, 32767};
static const uint32_t U32S[] = {0, 1, 4294967295u};
static const int64_t I64S[] = {INT64_MIN, -1, INT64_MAX};
static const float F32S[] = {0.25f, -1e30f, 3.0f};
static const double F64S[] = {1.0 / 3.0, -2.5};
static const uint8_t BOOLS[] = {0, 1, 1};
static const char *const STRS[] = {"", "a", "multi\nline", "tab\there"};

static void add_arrays(icl_gguf_writer *w) {
  CHECK(icl_gguf_w_arr(w, "a.i16", ICL_GGUF_I16, 4, I16S, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.u32", ICL_GGUF_U32, 3, U32S, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.i64", ICL_GGUF_I64, 3, I64S, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.f32", ICL_GGUF_F32, 3, F32S, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.f64", ICL_GGUF_F64, 2, F64S, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.bool", ICL_GGUF_BOOL, 3, BOOLS, &err) == 0);
  CHECK(icl_gguf_w_arr(w, "a.empty", ICL_GGUF_U32, 0, NULL, &err) == 0);
  CHECK(icl_gguf_w_arr_str(w, "a.str", 4, STRS, &err) == 0);
  CHECK(icl_gguf_w_arr_str(w, "a.str_empty", 0, NULL, &err) == 0);
}

static void check_num_arrays(const icl_gguf *g) {
  int64_t i = icl_gguf_find_key(g, "a.i16"), v = 0;
  double d = 0;
  CHECK(icl_gguf_kv_type(g, i) == ICL_GGUF_ARRAY && icl_gguf_arr_type(g, i) == ICL_GGUF_I16);
  CHECK(icl_gguf_arr_len(g, i) == 4 && !memcmp(icl_gguf_arr_data(g, i), I16S, sizeof I16S));
  CHECK(icl_gguf_arr_int(g, i, 0, &v) == 0 && v == -1);
  CHECK(icl_gguf_arr_int(g, i, 3, &v) == 0 && v == 32767);
  CHECK(icl_gguf_arr_int(g, i, 4, &v) == ICL_EFORMAT); /* out of range */
  CHECK(icl_gguf_kv_int(g, i, &v) == ICL_EFORMAT);     /* an array is not a scalar */
  i = icl_gguf_find_key(g, "a.u32");
  CHECK(icl_gguf_arr_int(g, i, 2, &v) == 0 && v == 4294967295ll);
  i = icl_gguf_find_key(g, "a.i64");
  CHECK(icl_gguf_arr_int(g, i, 0, &v) == 0 && v == INT64_MIN);
  CHECK(icl_gguf_arr_int(g, i, 2, &v) == 0 && v == INT64_MAX);
  i = icl_gguf_find_key(g, "a.f32");
  CHECK(icl_gguf_arr_float(g, i, 1, &d) == 0 && d == (double)-1e30f);
  CHECK(icl_gguf_arr_int(g, i, 1, &v) == ICL_EFORMAT);
  i = icl_gguf_find_key(g, "a.f64");
  CHECK(icl_gguf_arr_float(g, i, 0, &d) == 0 && d == 1.0 / 3.0);
  i = icl_gguf_find_key(g, "a.bool");
  CHECK(icl_gguf_arr_int(g, i, 1, &v) == 0 && v == 1 && icl_gguf_arr_int(g, i, 0, &v) == 0 && v == 0);
  i = icl_gguf_find_key(g, "a.empty");
  CHECK(icl_gguf_arr_type(g, i) == ICL_GGUF_U32 && icl_gguf_arr_len(g, i) == 0);
  CHECK(icl_gguf_arr_int(g, i, 0, &v) == ICL_EFORMAT);
}

static void check_str_arrays(const icl_gguf *g) {
  int64_t i = icl_gguf_find_key(g, "a.str");
  CHECK(icl_gguf_arr_type(g, i) == ICL_GGUF_STRING && icl_gguf_arr_len(g, i) == 4);
  CHECK(icl_gguf_arr_data(g, i) == NULL);
  for (uint64_t j = 0; j < 4; j++) {
    size_t len = 99;
    const char *s = icl_gguf_arr_str(g, i, j, &len);
    CHECKF(s && len == strlen(STRS[j]) && !strcmp(s, STRS[j]), "a.str[%llu]", (unsigned long long)j);
  }
  CHECK(icl_gguf_arr_str(g, i, 4, NULL) == NULL);
  int64_t v;
  CHECK(icl_gguf_arr_int(g, i, 0, &v) == ICL_EFORMAT);
  i = icl_gguf_find_key(g, "a.str_empty");
  CHECK(icl_gguf_arr_type(g, i) == ICL_GGUF_STRING && icl_gguf_arr_len(g, i) == 0);
  CHECK(icl_gguf_arr_str(g, i, 0, NULL) == NULL);
  CHECK(icl_gguf_arr_str(g, icl_gguf_find_key(g, "a.i16"), 0, NULL) == NULL);
}

typedef struct tspec {
  const char *name;
  uint32_t type, n_dims;
  int64_t ne[4];
} tspec;

static const tspec TENSORS[] = {
    {"t.f32", ICL_TYPE_F32, 2, {5, 3}},         {"t.f16", ICL_TYPE_F16, 1, {7}},
    {"t.q4_0", ICL_TYPE_Q4_0, 2, {64, 3}},      {"t.q8_0", ICL_TYPE_Q8_0, 3, {32, 2, 2}},
    {"t.q4_k", ICL_TYPE_Q4_K, 2, {256, 2}},     {"t.bf16", ICL_TYPE_BF16, 4, {3, 2, 2, 2}},
    {"t.q6_k", ICL_TYPE_Q6_K, 1, {256}},        {"t.q5_1", ICL_TYPE_Q5_1, 2, {576, 1}},
};
#define N_TENSORS (sizeof TENSORS / sizeof TENSORS[0])

static size_t tensor_bytes(const tspec *t) {
  int64_t rows = 1;
  for (uint32_t d = 1; d < t->n_dims; d++) rows *= t->ne[d];
  return icl_type_row_bytes(t->type, t->ne[0]) * (size_t)rows;
}

static void add_tensors(icl_gguf_writer *w) {
  for (size_t k = 0; k < N_TENSORS; k++) {
    size_t n = tensor_bytes(&TENSORS[k]);
    void *p = rand_bytes(n, 100 + k);
    CHECKF(icl_gguf_w_tensor(w, TENSORS[k].name, TENSORS[k].type, TENSORS[k].n_dims, TENSORS[k].ne, p, n, &err) == 0,
           "%s: %s", TENSORS[k].name, err.msg);
    free(p);
  }
}

static void check_tensors(const icl_gguf *g, const void *image, uint32_t align) {
  CHECK(icl_gguf_n_tensors(g) == (int64_t)N_TENSORS);
  for (size_t k = 0; k < N_TENSORS; k++) {
    const tspec *s = &TENSORS[k];
    const icl_gguf_tensor *t = icl_gguf_find_tensor(g, s->name);
    CHECKF(t && t == icl_gguf_tensor_at(g, (int64_t)k), "%s", s->name);
    if (!t) continue;
    size_t n = tensor_bytes(s);
    void *want = rand_bytes(n, 100 + k);
    CHECK(!strcmp(t->name, s->name) && t->type == s->type && t->n_dims == s->n_dims && t->nbytes == n);
    for (int d = 0; d < 4; d++) CHECK(t->ne[d] == (d < (int)s->n_dims ? s->ne[d] : 1));
    CHECK(t->offset % align == 0);
    /* relative to the image start; a file mapping is page aligned, so there the address itself */
    uintptr_t base = image ? (uintptr_t)image : 0;
    CHECK(((uintptr_t)t->data - base) % align == 0);
    CHECK(!memcmp(t->data, want, n));
    free(want);
  }
  CHECK(icl_gguf_find_tensor(g, "t.nope") == NULL && icl_gguf_tensor_at(g, (int64_t)N_TENSORS) == NULL);
}

static icl_gguf_writer *full_writer(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  CHECK(w != NULL);
  add_scalars(w);
  add_arrays(w);
  add_tensors(w);
  return w;
}

static void test_memory_roundtrip(void) {
  icl_gguf_writer *w = full_writer();
  void *img = NULL;
  size_t size = 0;
  icl_gguf *g = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &img, &size, &err) == 0 && size > 0);
  CHECK(size % 32 == 0); /* the last tensor is padded too */
  CHECKF(icl_gguf_open_memory(img, size, "mem.gguf", &g, &err) == 0, "%s", err.msg);
  if (g) {
    CHECK(icl_gguf_version(g) == 3 && icl_gguf_alignment(g) == 32 && icl_gguf_size(g) == size);
    CHECK(!strcmp(icl_gguf_name(g), "mem.gguf"));
    CHECK(icl_gguf_n_kv(g) == 13 + 9);
    CHECK(!strcmp(icl_gguf_key(g, 0), "s.u8") && icl_gguf_key(g, 22) == NULL);
    check_scalars(g);
    check_num_arrays(g);
    check_str_arrays(g);
    check_tensors(g, img, 32);
  }
  icl_gguf_close(g);
  free(img);
  icl_gguf_writer_free(w);
}

static void test_alignment_64(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  CHECK(icl_gguf_w_u32(w, "general.alignment", 64, &err) == 0);
  add_tensors(w);
  void *img = NULL;
  size_t size = 0;
  icl_gguf *g = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &img, &size, &err) == 0);
  CHECKF(icl_gguf_open_memory(img, size, "a64", &g, &err) == 0, "%s", err.msg);
  if (g) {
    CHECK(icl_gguf_alignment(g) == 64);
    check_tensors(g, img, 64);
  }
  icl_gguf_close(g);
  free(img);
  icl_gguf_writer_free(w);
}

static void test_writer_rejects(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  float f[64] = {0};
  int64_t ne[4] = {64, 1, 1, 1}, bad[4] = {48, 1, 1, 1}, zero[4] = {4, 0, 1, 1};
  uint8_t two = 2;
  CHECK(icl_gguf_w_u32(w, "k", 1, &err) == 0);
  CHECK(icl_gguf_w_u32(w, "k", 2, &err) == ICL_EINVAL && strstr(err.msg, "duplicate key 'k'"));
  CHECK(icl_gguf_w_u32(w, "", 2, &err) == ICL_EINVAL);
  CHECK(icl_gguf_w_u32(w, "general.alignment", 3, &err) == ICL_EINVAL && strstr(err.msg, "power of two"));
  CHECK(icl_gguf_w_i32(w, "general.alignment", 32, &err) == ICL_EINVAL);
  CHECK(icl_gguf_w_scalar(w, "b", ICL_GGUF_BOOL, &two, &err) == ICL_EINVAL && strstr(err.msg, "bool value 2"));
  CHECK(icl_gguf_w_scalar(w, "s", ICL_GGUF_STRING, "x", &err) == ICL_EINVAL);
  CHECK(icl_gguf_w_arr(w, "arr", ICL_GGUF_ARRAY, 1, f, &err) == ICL_EINVAL);
  CHECK(icl_gguf_w_tensor(w, "t", ICL_TYPE_F32, 1, ne, f, sizeof f, &err) == 0);
  CHECK(icl_gguf_w_tensor(w, "t", ICL_TYPE_F32, 1, ne, f, sizeof f, &err) == ICL_EINVAL && strstr(err.msg, "'t'"));
  CHECK(icl_gguf_w_tensor(w, "u", ICL_TYPE_F32, 1, ne, f, 100, &err) == ICL_EINVAL && strstr(err.msg, "expected 256"));
  CHECK(icl_gguf_w_tensor(w, "u", ICL_TYPE_Q4_0, 1, bad, f, 18, &err) == ICL_EINVAL && strstr(err.msg, "dims[0]"));
  CHECK(icl_gguf_w_tensor(w, "u", ICL_TYPE_F32, 2, zero, f, 0, &err) == ICL_EINVAL && strstr(err.msg, "dims[1]"));
  CHECK(icl_gguf_w_tensor(w, "u", ICL_TYPE_F32, 5, ne, f, sizeof f, &err) == ICL_EINVAL && strstr(err.msg, "n_dims"));
  CHECK(icl_gguf_w_tensor(w, "u", 4, 1, ne, f, sizeof f, &err) == ICL_EINVAL && strstr(err.msg, "unknown type"));
  icl_gguf_writer_free(w);
}

static void test_version2(void) {
  icl_gguf_writer *w = full_writer();
  void *img = NULL;
  size_t size = 0;
  icl_gguf *g = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &img, &size, &err) == 0);
  ((uint8_t *)img)[4] = 2; /* v2 has the same layout as v3 */
  CHECKF(icl_gguf_open_memory(img, size, "v2", &g, &err) == 0, "%s", err.msg);
  CHECK(g && icl_gguf_version(g) == 2);
  if (g) check_tensors(g, img, 32);
  icl_gguf_close(g);
  free(img);
  icl_gguf_writer_free(w);
}

/* Reads a whole file into memory; NULL on failure. */
static void *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc((size_t)n + 1);
  *size = fread(p, 1, (size_t)n, f);
  fclose(f);
  return p;
}

static void test_files(void) {
  char path[256], tmp[300];
  snprintf(path, sizeof path, "/tmp/icl-gguf-test-%ld.gguf", (long)getpid());
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  icl_gguf_writer *w = full_writer();
  void *img = NULL, *disk = NULL;
  size_t size = 0, dsize = 0;
  icl_gguf *g = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &img, &size, &err) == 0);
  CHECKF(icl_gguf_writer_save(w, path, &err) == 0, "%s", err.msg);
  CHECK(access(tmp, F_OK) != 0); /* temporary renamed away */
  disk = slurp(path, &dsize);
  CHECK(disk && dsize == size && !memcmp(disk, img, size));
  CHECKF(icl_gguf_open(path, &g, &err) == 0, "%s", err.msg);
  if (g) {
    CHECK(!strcmp(icl_gguf_name(g), path) && icl_gguf_size(g) == size);
    check_scalars(g);
    check_str_arrays(g);
    check_tensors(g, NULL, 32);
  }
  icl_gguf_close(g);
  unlink(path);
  /* saving into a missing directory fails with EIO and leaves nothing behind */
  CHECK(icl_gguf_writer_save(w, "/tmp/icl-no-such-dir/x.gguf", &err) == ICL_EIO && strstr(err.msg, "icl-no-such-dir"));
  free(img);
  free(disk);
  icl_gguf_writer_free(w);
}

static void test_open_errors(void) {
  icl_gguf *g = (icl_gguf *)&err; /* must be reset to NULL */
  CHECK(icl_gguf_open("/tmp/icl-definitely-missing.gguf", &g, &err) == ICL_EIO && g == NULL);
  CHECK(strstr(err.msg, "/tmp/icl-definitely-missing.gguf") && strstr(err.msg, "No such file"));
  CHECK(icl_gguf_open("/tmp", &g, &err) == ICL_EIO && strstr(err.msg, "not a regular file"));
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-gguf-empty-%ld.gguf", (long)getpid());
  FILE *f = fopen(path, "wb");
  if (f) fclose(f);
  CHECK(icl_gguf_open(path, &g, &err) == ICL_EFORMAT && strstr(err.msg, path) && strstr(err.msg, "magic"));
  unlink(path);
}

/* Many tensors and a vocabulary-sized string array: lookups by name stay exact. */
static void test_scale(void) {
  enum { NT = 3000, NV = 262144 };
  icl_gguf_writer *w = icl_gguf_writer_new();
  float one = 1.0f;
  int64_t ne[1] = {1};
  char name[64];
  for (int i = 0; i < NT; i++) {
    snprintf(name, sizeof name, "blk.%d.w", i);
    one = (float)i;
    icl_gguf_w_tensor(w, name, ICL_TYPE_F32, 1, ne, &one, 4, &err);
  }
  char **v = malloc(NV * sizeof *v);
  for (int i = 0; i < NV; i++) {
    v[i] = malloc(16);
    snprintf(v[i], 16, "tok%d", i);
  }
  CHECK(icl_gguf_w_arr_str(w, "tokenizer.ggml.tokens", NV, (const char *const *)v, &err) == 0);
  void *img = NULL;
  size_t size = 0;
  icl_gguf *g = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &img, &size, &err) == 0);
  CHECKF(icl_gguf_open_memory(img, size, "scale", &g, &err) == 0, "%s", err.msg);
  int bad = 0;
  for (int i = 0; g && i < NT; i++) {
    snprintf(name, sizeof name, "blk.%d.w", i);
    const icl_gguf_tensor *t = icl_gguf_find_tensor(g, name);
    float x = -1;
    if (t) memcpy(&x, t->data, 4);
    bad += !t || t != icl_gguf_tensor_at(g, i) || x != (float)i;
  }
  CHECK(bad == 0);
  int64_t k = g ? icl_gguf_find_key(g, "tokenizer.ggml.tokens") : -1;
  bad = 0;
  for (int i = 0; g && i < NV; i++) {
    const char *s = icl_gguf_arr_str(g, k, (uint64_t)i, NULL);
    bad += !s || strcmp(s, v[i]);
  }
  CHECK(k >= 0 && icl_gguf_arr_len(g, k) == NV && bad == 0);
  icl_gguf_close(g);
  for (int i = 0; i < NV; i++) free(v[i]);
  free(v);
  free(img);
  icl_gguf_writer_free(w);
}

int main(void) {
  test_memory_roundtrip();
  test_alignment_64();
  test_writer_rejects();
  test_version2();
  test_files();
  test_open_errors();
  test_scale();
  return t_done();
}
