/* Hostile GGUF images: each corruption class fails with ICL_EFORMAT and a message naming the field. */
#include <stdlib.h>
#include <string.h>

#include "icl/gguf.h"
#include "testutil.h"

static icl_error err;
static uint8_t *base_img; /* [base_size] a valid image from the writer */
static size_t base_size;

/* ---- building the valid base image ---- */

static void build_base(void) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  float f[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  uint8_t q40[36] = {0}, q80[34] = {0}, u8s[3] = {1, 2, 3};
  const char *strs[2] = {"a", "bc"};
  int64_t ne_f[2] = {4, 3}, ne_q4[2] = {32, 2}, ne_q8[1] = {32};
  icl_gguf_w_str(w, "general.architecture", "llama", &err);
  icl_gguf_w_u32(w, "general.alignment", 32, &err);
  icl_gguf_w_arr(w, "test.u8s", ICL_GGUF_U8, 3, u8s, &err);
  icl_gguf_w_arr_str(w, "test.strs", 2, strs, &err);
  icl_gguf_w_bool(w, "test.flag", 1, &err);
  icl_gguf_w_f32(w, "test.ka", 0.5f, &err);
  icl_gguf_w_f32(w, "test.kb", 0.25f, &err);
  icl_gguf_w_tensor(w, "tok.weight", ICL_TYPE_F32, 2, ne_f, f, sizeof f, &err);
  icl_gguf_w_tensor(w, "blk.0.attn_q.weight", ICL_TYPE_Q4_0, 2, ne_q4, q40, sizeof q40, &err);
  icl_gguf_w_tensor(w, "out.weight", ICL_TYPE_Q8_0, 1, ne_q8, q80, sizeof q80, &err);
  void *p = NULL;
  CHECK(icl_gguf_writer_to_memory(w, &p, &base_size, &err) == 0);
  base_img = p;
  icl_gguf_writer_free(w);
}

/* ---- patching helpers ---- */

static uint8_t *copy_base(void) {
  uint8_t *p = malloc(base_size);
  memcpy(p, base_img, base_size);
  return p;
}

/* Offset just past the GGUF string holding s (its length prefix precedes it). */
static size_t after_str(const uint8_t *img, size_t size, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 8; i + n <= size; i++)
    if (!memcmp(img + i, s, n) && img[i - 8] == n) return i + n;
  fprintf(stderr, "string '%s' not in image\n", s);
  abort();
}

static void put_le(uint8_t *p, uint64_t v, size_t n) {
  for (size_t k = 0; k < n; k++) p[k] = (uint8_t)(v >> (8 * k));
}

static uint64_t get_le(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
  return v;
}

/* Opens img and expects code, with every needle in the message (NULL-terminated list). */
static void expect_fail_v(const uint8_t *img, size_t size, int code, const char *const *needles, const char *what) {
  icl_gguf *g = NULL;
  int rc = icl_gguf_open_memory(img, size, "bad.gguf", &g, &err);
  if (getenv("ICL_VERBOSE")) fprintf(stderr, "%-22s %s\n", what, err.msg);
  CHECKF(rc == code && g == NULL, "%s: rc %d (want %d) msg '%s'", what, rc, code, err.msg);
  CHECKF(strncmp(err.msg, "bad.gguf: ", 10) == 0, "%s: message does not name the file: '%s'", what, err.msg);
  CHECKF(strchr(err.msg, '\n') == NULL, "%s: message is not one line", what);
  for (int k = 0; needles[k]; k++)
    CHECKF(strstr(err.msg, needles[k]) != NULL, "%s: '%s' not in '%s'", what, needles[k], err.msg);
  icl_gguf_close(g);
}

#define EXPECT_FAIL(img, size, what, ...)                                                                   \
  do {                                                                                                      \
    const char *const nd_[] = {__VA_ARGS__, NULL};                                                          \
    expect_fail_v(img, size, ICL_EFORMAT, nd_, what);                                                       \
  } while (0)

/* Copies the base, writes v (n bytes) at off, expects a format error mentioning the needles. */
#define PATCH_FAIL(off, v, n, what, ...)                                                                    \
  do {                                                                                                      \
    uint8_t *c_ = copy_base();                                                                              \
    put_le(c_ + (off), (v), (n));                                                                           \
    EXPECT_FAIL(c_, base_size, what, __VA_ARGS__);                                                          \
    free(c_);                                                                                               \
  } while (0)

/* ---- the cases ---- */

static void test_base_valid(void) {
  icl_gguf *g = NULL;
  CHECKF(icl_gguf_open_memory(base_img, base_size, "base", &g, &err) == 0, "%s", err.msg);
  CHECK(g && icl_gguf_n_tensors(g) == 3 && icl_gguf_n_kv(g) == 7);
  icl_gguf_close(g);
}

/* End of the last tensor's data: every shorter image must fail, every longer one open. */
static size_t data_end(void) {
  icl_gguf *g = NULL;
  size_t end = 0;
  if (icl_gguf_open_memory(base_img, base_size, "base", &g, &err)) return base_size;
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    size_t e = (size_t)((const uint8_t *)t->data - base_img) + t->nbytes;
    if (e > end) end = e;
  }
  icl_gguf_close(g);
  return end;
}

static void test_truncation(void) {
  size_t end = data_end();
  int bad_ok = 0, bad_fail = 0, bad_msg = 0;
  for (size_t n = 0; n <= base_size; n++) {
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, base_img, n);
    icl_gguf *g = NULL;
    int rc = icl_gguf_open_memory(c, n, "bad.gguf", &g, &err);
    if (n < end) {
      bad_ok += rc != ICL_EFORMAT;
      /* the message names the file and the item and field being read */
      bad_msg += strncmp(err.msg, "bad.gguf: ", 10) != 0 ||
                 !(strstr(err.msg, "header: ") || strstr(err.msg, "kv ") || strstr(err.msg, "tensor "));
      if (rc != ICL_EFORMAT || bad_msg) fprintf(stderr, "truncated at %zu: rc %d: %s\n", n, rc, err.msg);
    } else {
      bad_fail += rc != ICL_OK;
    }
    icl_gguf_close(g);
    free(c);
  }
  CHECKF(bad_ok == 0, "%d truncations opened", bad_ok);
  CHECKF(bad_msg == 0, "%d truncation messages lack file or field", bad_msg);
  CHECKF(bad_fail == 0, "%d complete images failed", bad_fail);
  /* samples of the exact field named */
  EXPECT_FAIL(base_img, 6, "trunc version", "header", "version", "needs 4 bytes");
  EXPECT_FAIL(base_img, 20, "trunc kv_count", "kv_count");
  /* one kv and no tensors, so that the counts fit and the cut field itself fails */
  uint8_t *c = copy_base();
  put_le(c + 8, 0, 8);
  put_le(c + 16, 1, 8);
  size_t k = after_str(c, base_size, "general.architecture");
  EXPECT_FAIL(c, k + 2, "trunc value type", "kv 0 'general.architecture'", "value type", "needs 4 bytes");
  EXPECT_FAIL(c, k + 10, "trunc string", "kv 0 'general.architecture'", "string length", "needs 8 bytes");
  EXPECT_FAIL(c, k + 14, "trunc string bytes", "kv 0 'general.architecture'", "string length = 5 exceeds");
  free(c);
}

static void test_header(void) {
  PATCH_FAIL(0, 0x46554746, 4, "magic", "header", "magic", "expected 'GGUF'");
  PATCH_FAIL(4, 7, 4, "version 7", "header", "version = 7");
  PATCH_FAIL(8, 1ull << 40, 8, "huge tensor_count", "tensor_count = 1099511627776");
  PATCH_FAIL(16, 1ull << 63, 8, "huge kv_count", "kv_count = 9223372036854775808");
  PATCH_FAIL(16, UINT64_MAX, 8, "max kv_count", "kv_count");
  /* more kvs than present: the next "key" is tensor-info bytes, which fail somewhere named */
  PATCH_FAIL(16, 8, 8, "kv_count + 1", "tensor 0", "name length");
  uint8_t *c = copy_base();
  put_le(c + 4, 1, 4);
  const char *const v1[] = {"version 1", "not supported", NULL};
  expect_fail_v(c, base_size, ICL_EUNSUPPORTED, v1, "version 1");
  put_le(c + 4, 0x03000000u, 4);
  const char *const be[] = {"big-endian", NULL};
  expect_fail_v(c, base_size, ICL_EUNSUPPORTED, be, "big endian");
  free(c);
}

static void test_kv_values(void) {
  size_t a = after_str(base_img, base_size, "general.architecture");
  PATCH_FAIL(a - 20 - 8, 1ull << 62, 8, "huge key length", "kv 0", "key length = 4611686018427387904");
  PATCH_FAIL(a - 20 - 8, 0, 8, "empty key", "kv 0", "key is empty");
  PATCH_FAIL(a - 3, 0, 1, "NUL in key", "kv 0", "NUL byte");
  PATCH_FAIL(a, 13, 4, "value type 13", "kv 0 'general.architecture'", "value type 13");
  PATCH_FAIL(a, 0xffffffffu, 4, "value type max", "value type 4294967295");
  PATCH_FAIL(a + 4, UINT64_MAX, 8, "huge string", "kv 0 'general.architecture'", "string length");
  size_t u = after_str(base_img, base_size, "test.u8s");
  PATCH_FAIL(u + 4, 99, 4, "array elem type", "kv 2 'test.u8s'", "array element type 99");
  PATCH_FAIL(u + 8, 1ull << 62, 8, "huge array count", "kv 2 'test.u8s'", "array count = 4611686018427387904");
  PATCH_FAIL(u + 8, 1000, 8, "array count > file", "kv 2 'test.u8s'", "array count = 1000");
  size_t s = after_str(base_img, base_size, "test.strs");
  PATCH_FAIL(s + 8, 1ull << 61, 8, "huge string array", "kv 3 'test.strs'", "array count");
  PATCH_FAIL(s + 8 + 8 + 8 + 1, UINT64_MAX, 8, "string elem length", "kv 3 'test.strs'", "element 1 length");
  size_t f = after_str(base_img, base_size, "test.flag");
  PATCH_FAIL(f + 4, 2, 1, "bool 2", "kv 4 'test.flag'", "bool value 2");
  size_t kb = after_str(base_img, base_size, "test.kb");
  PATCH_FAIL(kb - 1, 'a', 1, "duplicate key", "kv 6 'test.ka'", "duplicate key (also kv 5)");
}

static void test_alignment(void) {
  size_t a = after_str(base_img, base_size, "general.alignment");
  PATCH_FAIL(a + 4, 0, 4, "alignment 0", "kv 1 'general.alignment'", "value 0", "power of two");
  PATCH_FAIL(a + 4, 3, 4, "alignment 3", "kv 1 'general.alignment'", "value 3", "power of two");
  PATCH_FAIL(a, 5, 4, "alignment i32", "kv 1 'general.alignment'", "type i32 (expected u32)");
  PATCH_FAIL(a, 6, 4, "alignment f32", "kv 1 'general.alignment'", "type f32 (expected u32)");
  /* tensor offsets are 0, 64, 128: the second is no longer a multiple */
  PATCH_FAIL(a + 4, 1u << 31, 4, "alignment 2^31", "offset", "not a multiple of the alignment 2147483648");
}

/* Offsets of the fields of the tensor info named name. */
typedef struct tinfo {
  size_t n_dims, dims, type, offset;
} tinfo;

static tinfo find_tensor(const char *name) {
  tinfo t;
  t.n_dims = after_str(base_img, base_size, name);
  t.dims = t.n_dims + 4;
  t.type = t.dims + 8 * get_le(base_img + t.n_dims, 4);
  t.offset = t.type + 4;
  return t;
}

static void test_tensor_infos(void) {
  tinfo q = find_tensor("blk.0.attn_q.weight"), tok = find_tensor("tok.weight"), out = find_tensor("out.weight");
  const char *tq = "tensor 1 'blk.0.attn_q.weight'";
  PATCH_FAIL(q.n_dims - 19 - 8, 1ull << 60, 8, "huge name length", "tensor 1", "name length");
  PATCH_FAIL(q.n_dims, 0, 4, "n_dims 0", tq, "n_dims = 0 (expected 1..4)");
  PATCH_FAIL(q.n_dims, 5, 4, "n_dims 5", tq, "n_dims = 5");
  PATCH_FAIL(q.dims + 8, 0, 8, "dims 0", tq, "dims[1] = 0");
  PATCH_FAIL(q.dims, 0, 8, "dims[0] 0", tq, "dims[0] = 0");
  PATCH_FAIL(q.dims + 8, UINT64_MAX, 8, "dims > int64", tq, "dims[1] = 18446744073709551615");
  PATCH_FAIL(tok.dims + 8, 1ull << 62, 8, "dims product overflow", "tensor 0 'tok.weight'", "dims[1]", "overflows");
  PATCH_FAIL(q.dims, 48, 8, "ne0 not multiple", tq, "dims[0] = 48", "Q4_0 block size 32");
  PATCH_FAIL(q.type, 4, 4, "removed type 4", tq, "type = 4");
  PATCH_FAIL(q.type, 1000, 4, "type 1000", tq, "type = 1000");
  PATCH_FAIL(q.offset, get_le(base_img + q.offset, 8) + 1, 8, "misaligned", tq, "offset = 65", "alignment 32");
  PATCH_FAIL(q.offset, 1ull << 40, 8, "offset past end", tq, "past the end of the file");
  PATCH_FAIL(q.offset, UINT64_MAX - 31, 8, "offset near 2^64", tq, "past the end of the file");
  PATCH_FAIL(tok.dims + 8, 1ull << 40, 8, "size past end", "tensor 0 'tok.weight'", "past the end of the file");
  PATCH_FAIL(out.offset, 0, 8, "overlap", "tensor 2 'out.weight'", "overlaps tensor 0 'tok.weight'");
  PATCH_FAIL(out.n_dims - 10, 't' | 'o' << 8 | 'k' << 16, 3, "duplicate name", "tensor 2 'tok.weight'",
             "duplicate tensor name (also tensor 0)");
  PATCH_FAIL(q.n_dims - 5, 0, 1, "NUL in name", "tensor 1", "NUL byte");
}

/* ---- raw images for nesting (the writer cannot make nested arrays) ---- */

typedef struct raw {
  uint8_t b[4096];
  size_t n;
} raw;

static void r_le(raw *r, uint64_t v, size_t k) {
  put_le(r->b + r->n, v, k);
  r->n += k;
}

static void r_str(raw *r, const char *s) {
  r_le(r, strlen(s), 8);
  memcpy(r->b + r->n, s, strlen(s));
  r->n += strlen(s);
}

/* One kv holding arrays nested `levels` deep, innermost a u16 array [7, 8]. */
static void nested(raw *r, int levels) {
  r->n = 0;
  r_le(r, 0x46554747u, 4);
  r_le(r, 3, 4);
  r_le(r, 0, 8);
  r_le(r, 1, 8);
  r_str(r, "deep");
  r_le(r, 9, 4);
  for (int l = 1; l < levels; l++) {
    r_le(r, 9, 4); /* elements are arrays */
    r_le(r, 1, 8); /* one of them */
  }
  r_le(r, 2, 4);
  r_le(r, 2, 8);
  r_le(r, 7, 2);
  r_le(r, 8, 2);
}

static void test_nesting(void) {
  raw r;
  icl_gguf *g = NULL;
  int64_t v;
  nested(&r, 8);
  CHECKF(icl_gguf_open_memory(r.b, r.n, "deep8", &g, &err) == 0, "%s", err.msg);
  if (g) { /* arrays of arrays are validated but not exposed */
    CHECK(icl_gguf_arr_type(g, 0) == ICL_GGUF_ARRAY && icl_gguf_arr_len(g, 0) == 1);
    CHECK(icl_gguf_arr_data(g, 0) == NULL && icl_gguf_arr_int(g, 0, 0, &v) == ICL_EFORMAT);
    CHECK(icl_gguf_arr_str(g, 0, 0, NULL) == NULL);
  }
  icl_gguf_close(g);
  nested(&r, 9);
  EXPECT_FAIL(r.b, r.n, "deep 9", "kv 0 'deep'", "nested deeper than 8");
  nested(&r, 200);
  EXPECT_FAIL(r.b, r.n, "deep 200", "kv 0 'deep'", "nested deeper than 8");
  nested(&r, 2);
  put_le(r.b + r.n - 16, 7, 4); /* inner array of 2 bools: bytes 07 00 */
  EXPECT_FAIL(r.b, r.n, "nested bool", "kv 0 'deep'", "bool value 7");
  nested(&r, 3);
  put_le(r.b + r.n - 4 - 8, 1ull << 62, 8); /* innermost count */
  EXPECT_FAIL(r.b, r.n, "nested huge count", "kv 0 'deep'", "array count");
}

/* Deterministic random corruptions: never crash, and errors always carry a message. */
static void test_random_mutations(void) {
  uint64_t seed = 12345;
  int no_msg = 0, opened = 0;
  for (int it = 0; it < 20000; it++) {
    uint8_t *c = copy_base();
    int flips = 1 + (int)(t_rand_u64(&seed) % 4);
    for (int k = 0; k < flips; k++) {
      size_t at = (size_t)(t_rand_u64(&seed) % base_size);
      c[at] = (it & 1) ? (uint8_t)t_rand_u64(&seed) : (uint8_t)(c[at] ^ (1u << (t_rand_u64(&seed) % 8)));
    }
    icl_gguf *g = NULL;
    int rc = icl_gguf_open_memory(c, base_size, "mut", &g, &err);
    if (rc) no_msg += err.msg[0] == '\0' || g != NULL;
    else opened++;
    icl_gguf_close(g);
    free(c);
  }
  CHECKF(no_msg == 0, "%d failures without message", no_msg);
  CHECK(opened > 0 && opened < 20000); /* both outcomes happen */
}

int main(void) {
  build_base();
  test_base_valid();
  test_truncation();
  test_header();
  test_kv_values();
  test_alignment();
  test_tensor_infos();
  test_nesting();
  test_random_mutations();
  free(base_img);
  return t_done();
}
