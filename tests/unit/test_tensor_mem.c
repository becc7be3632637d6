/* Host tensor data: large buffers are recycled (a freed one serves the next tensor that fits it, zeroed), at most
 * two kept, all dropped when a large one fits none; small ones and sanitizer builds use calloc. */
#include <stdlib.h>
#include <string.h>

#include "icl/tensor.h"
#include "tensor_mem.h"
#include "testutil.h"

#define L TENSOR_MEM_LARGE

static int all_zero(const float *p, size_t bytes) {
  for (size_t i = 0; i < bytes / sizeof(float); i++)
    if (p[i] != 0.0f) return 0;
  return 1;
}

/* Dirty every float of a buffer (what a forward leaves in its logits). */
static void fill(float *p, size_t bytes) {
  for (size_t i = 0; i < bytes / sizeof(float); i++) p[i] = (float)i + 1.0f;
}

static void test_zeroed(void) {
  size_t sizes[] = {4, 4096, L - 4, L, L + 12345 * 4};
  for (int k = 0; k < 5; k++) { /* twice each: the second time a large one comes back recycled */
    for (int rep = 0; rep < 2; rep++) {
      float *p = tensor_mem_alloc(sizes[k]);
      CHECKF(p && all_zero(p, sizes[k]), "size %zu, pass %d", sizes[k], rep);
      if (p) fill(p, sizes[k]);
      tensor_mem_free(p);
    }
  }
  tensor_mem_free(NULL);
}

static void test_recycled(void) {
  if (!tensor_mem_cached()) { /* test_zeroed freed large buffers: none kept means calloc for every size */
    printf("test_tensor_mem: large buffers are not recycled in this build (AddressSanitizer or no MADV_FREE): "
           "recycling checks not run\n");
    return;
  }
  /* a size none of test_zeroed's kept buffers fits: they are unmapped */
  float *a = tensor_mem_alloc(4 * L), *b = tensor_mem_alloc(4 * L);
  CHECK(a && b && a != b && tensor_mem_cached() == 0);
  fill(a, 4 * L);
  tensor_mem_free(a);
  tensor_mem_free(b); /* kept: b, a */
  CHECK(tensor_mem_cached() == 2);
  float *c = tensor_mem_alloc(4 * L);
  CHECK(c == b); /* the most recently freed of two that fit */
  float *d = tensor_mem_alloc(4 * L - 4096);
  CHECK(d == a && all_zero(d, 4 * L - 4096)); /* a was dirty: handed out zeroed */
  CHECK(tensor_mem_cached() == 0);
  tensor_mem_free(c);
  tensor_mem_free(d); /* kept: d, c */
  float *e = tensor_mem_alloc(3 * L);
  CHECK(e == d && tensor_mem_cached() == 1); /* 4L for 3L: within half */
  float *f = tensor_mem_alloc(L); /* c (4L) wastes more than half: a new mapping, and c is unmapped */
  CHECK(f && tensor_mem_cached() == 0);
  float *g = tensor_mem_alloc(2 * L);
  tensor_mem_free(e), tensor_mem_free(f), tensor_mem_free(g); /* kept: g, f; e unmapped */
  CHECK(tensor_mem_cached() == 2);
  float *h = tensor_mem_alloc(L);
  CHECK(h == f); /* the smallest that fits */
  tensor_mem_free(h);
}

/* icl_tensor_new/free go through it: a large tensor after a freed one of the same shape is zero. */
static void test_tensor(void) {
  int64_t shape[2] = {1400, 8192};
  for (int rep = 0; rep < 3; rep++) {
    icl_tensor *t = icl_tensor_new(2, shape);
    CHECK(t && all_zero(t->data, (size_t)t->numel * sizeof(float)));
    if (t) fill(t->data, (size_t)t->numel * sizeof(float));
    icl_tensor_free(t);
  }
}

int main(void) {
  test_zeroed();
  test_recycled();
  test_tensor();
  return t_done();
}
