/* Host tensor files: .npy and safetensors round trips, the on-disk layouts checked byte by byte (npy header,
 * safetensors 8-byte length + JSON header parsed with cJSON), hostile files, and a few tensor operations. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/tensor.h"
#include "icl/types.h"
#include "tensor_ops.h"
#include "testutil.h"

static char dir[256];

static const char *tmp(const char *name) {
  static char buf[512];
  snprintf(buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

static icl_tensor *random_tensor(int ndim, const int64_t *shape, uint64_t seed) {
  icl_tensor *t = icl_tensor_new(ndim, shape);
  t_rand_fill(t->data, t->numel, seed, -3, 3);
  return t;
}

static int same(const icl_tensor *a, const icl_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || a->numel != b->numel) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return a->numel == 0 || !memcmp(a->data, b->data, (size_t)a->numel * 4);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  unsigned char *p = malloc(*n + 1);
  if (fread(p, 1, *n, f) != *n) *n = 0;
  fclose(f);
  p[*n] = 0;
  return p;
}

static void spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(p, 1, n, f);
  fclose(f);
}

/* No "*.tmp.*" file may be left in the directory. */
static int no_temporaries(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;
  while (d && (e = readdir(d))) found |= strstr(e->d_name, ".tmp.") != NULL;
  if (d) closedir(d);
  return !found;
}

static void test_npy(void) {
  int64_t shapes[4][4] = {{5}, {2, 3}, {2, 3, 4}, {2, 1, 3, 2}};
  for (int nd = 1; nd <= 4; nd++) {
    icl_tensor *t = random_tensor(nd, shapes[nd - 1], (uint64_t)nd), *back = NULL;
    icl_error err;
    CHECKF(icl_tensor_save_npy(t, tmp("a.npy"), &err) == ICL_OK, "%s", err.msg);
    CHECKF(icl_tensor_load_npy(tmp("a.npy"), &back, &err) == ICL_OK, "%s", err.msg);
    CHECK(same(t, back));
    icl_tensor_free(back);
    icl_tensor_free(t);
  }
  /* the layout: magic, version 1.0, header length, a dict, '\n', total a multiple of 64, then the data */
  int64_t shape[2] = {2, 3};
  icl_tensor *t = random_tensor(2, shape, 7);
  icl_error err;
  icl_tensor_save_npy(t, tmp("b.npy"), &err);
  size_t n;
  unsigned char *p = slurp(tmp("b.npy"), &n);
  size_t hl = p[8] | (size_t)p[9] << 8;
  CHECK(!memcmp(p, "\x93NUMPY", 6) && p[6] == 1 && p[7] == 0);
  CHECK((10 + hl) % 64 == 0 && p[10 + hl - 1] == '\n');
  CHECK(strstr((char *)p + 10, "'descr': '<f4'") && strstr((char *)p + 10, "'fortran_order': False") &&
        strstr((char *)p + 10, "'shape': (2, 3)"));
  CHECK(n == 10 + hl + 24 && !memcmp(p + 10 + hl, t->data, 24));
  free(p);
  /* 1-D shape is written "(5,)" and 0-D "()" */
  int64_t five = 5;
  icl_tensor *v = icl_tensor_new(1, &five), *s = icl_tensor_new(0, NULL), *back = NULL;
  icl_tensor_save_npy(v, tmp("c.npy"), &err);
  p = slurp(tmp("c.npy"), &n);
  CHECK(strstr((char *)p + 10, "'shape': (5,)") != NULL);
  free(p);
  icl_tensor_save_npy(s, tmp("d.npy"), &err);
  p = slurp(tmp("d.npy"), &n);
  hl = p[8] | (size_t)p[9] << 8;
  CHECK(strstr((char *)p + 10, "'shape': ()") != NULL && n == 10 + hl + 4);
  free(p);
  CHECK(icl_tensor_load_npy(tmp("d.npy"), &back, &err) == ICL_OK && back->ndim == 0 && back->numel == 1);
  icl_tensor_free(back);
  icl_tensor_free(v);
  icl_tensor_free(s);
  icl_tensor_free(t);
}

/* Builds a v1.0 npy file with the given dict and data bytes. */
static void write_npy(const char *path, const char *dict, const void *data, size_t n) {
  unsigned char buf[256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  size_t k = strlen(dict), total = (10 + k + 1 + 63) / 64 * 64;
  buf[8] = (unsigned char)(total - 10), buf[9] = 0;
  memset(buf + 10, ' ', total - 10);
  memcpy(buf + 10, dict, k);
  buf[total - 1] = '\n';
  FILE *f = fopen(path, "wb");
  fwrite(buf, 1, total, f);
  fwrite(data, 1, n, f);
  fclose(f);
}

static void test_npy_other_dtypes(void) {
  double d[3] = {1.5, -2.25, 1e3};
  uint16_t h[2] = {icl_f32_to_f16(0.5f), icl_f32_to_f16(-4.0f)};
  icl_tensor *t = NULL;
  icl_error err;
  write_npy(tmp("f8.npy"), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d, sizeof d);
  CHECKF(icl_tensor_load_npy(tmp("f8.npy"), &t, &err) == ICL_OK, "%s", err.msg);
  CHECK(t && t->numel == 3 && t->data[0] == 1.5f && t->data[1] == -2.25f && t->data[2] == 1000.0f);
  icl_tensor_free(t);
  write_npy(tmp("f2.npy"), "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }", h, sizeof h);
  CHECKF(icl_tensor_load_npy(tmp("f2.npy"), &t, &err) == ICL_OK, "%s", err.msg);
  CHECK(t && t->ndim == 2 && t->data[0] == 0.5f && t->data[1] == -4.0f);
  icl_tensor_free(t);
}

static void test_npy_hostile(void) {
  icl_tensor *t = (icl_tensor *)1;
  icl_error err;
  float x[4] = {0};
  CHECK(icl_tensor_load_npy(tmp("missing.npy"), &t, &err) == ICL_EIO && t == NULL && strstr(err.msg, "missing.npy"));
  spit(tmp("junk.npy"), "hello", 5);
  CHECK(icl_tensor_load_npy(tmp("junk.npy"), &t, &err) == ICL_EFORMAT && strstr(err.msg, "magic"));
  write_npy(tmp("i4.npy"), "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", x, sizeof x);
  CHECK(icl_tensor_load_npy(tmp("i4.npy"), &t, &err) == ICL_EUNSUPPORTED && strstr(err.msg, "<i4"));
  write_npy(tmp("short.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", x, sizeof x);
  CHECK(icl_tensor_load_npy(tmp("short.npy"), &t, &err) == ICL_EFORMAT && strstr(err.msg, "truncated"));
  write_npy(tmp("huge.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 100000000000), }",
            x, sizeof x);
  CHECK(icl_tensor_load_npy(tmp("huge.npy"), &t, &err) == ICL_EFORMAT);
  write_npy(tmp("5d.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1), }", x, 4);
  CHECK(icl_tensor_load_npy(tmp("5d.npy"), &t, &err) == ICL_EUNSUPPORTED);
  write_npy(tmp("fo.npy"), "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", x, sizeof x);
  CHECK(icl_tensor_load_npy(tmp("fo.npy"), &t, &err) == ICL_EUNSUPPORTED);
  write_npy(tmp("noshape.npy"), "{'descr': '<f4', 'fortran_order': False, }", x, sizeof x);
  CHECK(icl_tensor_load_npy(tmp("noshape.npy"), &t, &err) == ICL_EFORMAT);
  CHECK(t == NULL);
}

static void test_safetensors(void) {
  int64_t s1[2] = {3, 4}, s2[1] = {5}, s3[4] = {2, 2, 1, 3};
  icl_tensor *a = random_tensor(2, s1, 1), *b = random_tensor(1, s2, 2), *c = random_tensor(4, s3, 3);
  const char *names[3] = {"blocks.0.hook_resid_post", "b", "c"};
  const icl_tensor *ts[3] = {a, b, c};
  icl_error err;
  CHECKF(icl_tensor_save_safetensors(tmp("x.safetensors"), 3, names, ts, &err) == ICL_OK, "%s", err.msg);
  CHECK(no_temporaries());

  /* the layout by the spec: u64 LE header length, JSON header, data; offsets relative to the data start */
  size_t n;
  unsigned char *p = slurp(tmp("x.safetensors"), &n);
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++) hl |= (uint64_t)p[i] << (8 * i);
  CHECK(hl % 8 == 0 && 8 + hl + (12 + 5 + 12) * 4 == n);
  cJSON *h = cJSON_ParseWithLength((char *)p + 8, hl);
  CHECK(h && cJSON_IsObject(h) && cJSON_GetArraySize(h) == 3);
  uint64_t expect = 0;
  for (int i = 0; h && i < 3; i++) {
    cJSON *e = cJSON_GetObjectItemCaseSensitive(h, names[i]);
    cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    CHECK(cJSON_IsString(dt) && !strcmp(dt->valuestring, "F32"));
    CHECK(cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == ts[i]->ndim);
    for (int d = 0; sh && d < ts[i]->ndim; d++)
      CHECK(cJSON_GetArrayItem(sh, d)->valuedouble == (double)ts[i]->shape[d]);
    uint64_t b0 = (uint64_t)cJSON_GetArrayItem(of, 0)->valuedouble,
             e0 = (uint64_t)cJSON_GetArrayItem(of, 1)->valuedouble;
    CHECK(b0 == expect && e0 == b0 + (uint64_t)ts[i]->numel * 4);
    CHECK(!memcmp(p + 8 + hl + b0, ts[i]->data, (size_t)ts[i]->numel * 4));
    expect = e0;
  }
  cJSON_Delete(h);
  free(p);

  int k = 0;
  char **nm = NULL;
  icl_tensor **back = NULL;
  CHECKF(icl_tensor_load_safetensors(tmp("x.safetensors"), &k, &nm, &back, &err) == ICL_OK, "%s", err.msg);
  CHECK(k == 3);
  for (int i = 0; i < k; i++) {
    CHECK(!strcmp(nm[i], names[i]) && same(back[i], ts[i]));
    free(nm[i]);
    icl_tensor_free(back[i]);
  }
  free(nm);
  free(back);
  const char *dup[2] = {"x", "x"};
  CHECK(icl_tensor_save_safetensors(tmp("dup.safetensors"), 2, dup, ts, &err) == ICL_EINVAL &&
        strstr(err.msg, "duplicate"));
  CHECK(icl_tensor_save_safetensors("/nonexistent-dir/x.safetensors", 1, names, ts, &err) == ICL_EIO);
  icl_tensor_free(a);
  icl_tensor_free(b);
  icl_tensor_free(c);
}

/* Writes a safetensors file from a header string and data bytes. */
static void write_st(const char *path, const char *json, const void *data, size_t n) {
  uint64_t hl = strlen(json);
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
  FILE *f = fopen(path, "wb");
  fwrite(le, 1, 8, f);
  fwrite(json, 1, hl, f);
  fwrite(data, 1, n, f);
  fclose(f);
}

static void test_safetensors_foreign(void) {
  /* written by another tool: metadata, F16 and BF16 tensors, data in a different order */
  uint16_t d[4] = {icl_f32_to_bf16(2.0f), icl_f32_to_bf16(-1.0f), icl_f32_to_f16(0.25f), icl_f32_to_f16(3.0f)};
  write_st(tmp("f.safetensors"),
           "{\"__metadata__\":{\"format\":\"pt\"},\"half\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]},"
           "\"brain\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[0,4]}}",
           d, sizeof d);
  int k = 0;
  char **nm = NULL;
  icl_tensor **ts = NULL;
  icl_error err;
  CHECKF(icl_tensor_load_safetensors(tmp("f.safetensors"), &k, &nm, &ts, &err) == ICL_OK, "%s", err.msg);
  CHECK(k == 2 && !strcmp(nm[0], "half") && !strcmp(nm[1], "brain"));
  CHECK(k == 2 && ts[0]->data[0] == 0.25f && ts[0]->data[1] == 3.0f && ts[1]->ndim == 2 && ts[1]->data[1] == -1.0f);
  for (int i = 0; i < k; i++) free(nm[i]), icl_tensor_free(ts[i]);
  free(nm);
  free(ts);
}

static void test_safetensors_hostile(void) {
  int k = 5;
  char **nm = (char **)1;
  icl_tensor **ts = (icl_tensor **)1;
  icl_error err;
  float x[2] = {1, 2};
  struct {
    const char *name, *json;
    int code;
  } cases[] = {
      {"offsets past the end", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", ICL_EFORMAT},
      {"offsets and shape disagree", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", ICL_EFORMAT},
      {"reversed offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", ICL_EFORMAT},
      {"unsupported dtype", "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", ICL_EUNSUPPORTED},
      {"missing fields", "{\"a\":{\"dtype\":\"F32\"}}", ICL_EFORMAT},
      {"negative shape", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", ICL_EFORMAT},
      {"five dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", ICL_EUNSUPPORTED},
      {"not JSON", "{\"a\":", ICL_EFORMAT},
      {"not an object", "[1, 2]", ICL_EFORMAT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_st(tmp("h.safetensors"), cases[i].json, x, sizeof x);
    int rc = icl_tensor_load_safetensors(tmp("h.safetensors"), &k, &nm, &ts, &err);
    CHECKF(rc == cases[i].code, "%s: got %d (%s)", cases[i].name, rc, err.msg);
    CHECK(k == 0 && nm == NULL && ts == NULL);
  }
  unsigned char big[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  spit(tmp("len.safetensors"), big, 8);
  CHECK(icl_tensor_load_safetensors(tmp("len.safetensors"), &k, &nm, &ts, &err) == ICL_EFORMAT);
  spit(tmp("tiny.safetensors"), big, 3);
  CHECK(icl_tensor_load_safetensors(tmp("tiny.safetensors"), &k, &nm, &ts, &err) == ICL_EFORMAT);
  CHECK(icl_tensor_load_safetensors(tmp("none.safetensors"), &k, &nm, &ts, &err) == ICL_EIO);
}

static void test_ops(void) {
  int64_t s[2] = {2, 3};
  icl_tensor *a = icl_tensor_new(2, s), *r = NULL;
  for (int i = 0; i < 6; i++) a->data[i] = (float)(i + 1);
  icl_error err;
  CHECK(icl_tensor_reduce(a, 1, 0, ICL_RED_SUM, &r, &err) == ICL_OK && r->ndim == 1 && r->data[1] == 15);
  icl_tensor_free(r);
  CHECK(icl_tensor_transpose(a, 0, 1, &r, &err) == ICL_OK && r->shape[0] == 3 && r->data[1] == 4);
  icl_tensor_free(r);
  CHECK(icl_tensor_softmax(a, 1, 0, &r, &err) == ICL_OK && r->data[0] + r->data[1] + r->data[2] > 0.9999f);
  icl_tensor_free(r);
  r = NULL;
  CHECK(icl_tensor_slice(a, 1, 1, 4, &r, &err) == ICL_EINVAL && r == NULL);
  CHECK(icl_tensor_binop(a, a, ICL_BIN_MUL, &r, &err) == ICL_OK && r->data[5] == 36);
  icl_tensor_free(r);
  int64_t bad[1] = {2};
  icl_tensor *b = icl_tensor_new(1, bad);
  r = NULL;
  CHECK(icl_tensor_binop(a, b, ICL_BIN_ADD, &r, &err) == ICL_EINVAL && r == NULL && strstr(err.msg, "broadcast"));
  int64_t neg[1] = {-1};
  CHECK(icl_tensor_new(1, neg) == NULL && icl_tensor_new(5, s) == NULL);
  icl_tensor_free(b);
  icl_tensor_free(a);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/icl_test_tensor_io_%ld", (long)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  if (system(cmd)) return 1;
  test_npy();
  test_npy_other_dtypes();
  test_npy_hostile();
  test_safetensors();
  test_safetensors_foreign();
  test_safetensors_hostile();
  test_ops();
  CHECK(no_temporaries());
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  return t_done();
}
