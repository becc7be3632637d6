/* Data of host tensors. Small buffers come from calloc. Large ones (all-position logits of a long run: 1400 x
 * 262,144 floats = 1.47 GB on Gemma 3) get a mapping of their own, and a freed one is kept for the next large
 * tensor that fits it: glibc unmaps a large block on free, so each run had the kernel fault in and zero its logits
 * afresh, page by page, 0.5-1.0 s of a 4.8 s Gemma 3 1400-token forward. A kept buffer's pages are handed back
 * lazily (MADV_FREE: the kernel takes them only under memory pressure, and reuse before then costs no fault); at
 * most two are kept, the most recently freed, and a large allocation that none of them fits unmaps them. Without
 * MADV_FREE, and under AddressSanitizer (whose redzones need malloc'd blocks), every size comes from calloc. */
#include "tensor_mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "asan.h"

#if ICL_ASAN
#define TENSOR_MEM_MAP 0
#else
#include <sys/mman.h>
#ifdef MADV_FREE
#define TENSOR_MEM_MAP 1
#else
#define TENSOR_MEM_MAP 0
#endif
#endif

#if TENSOR_MEM_MAP

#define HEADER ((size_t)4096) /* the mapping's node, before the data; keeps the data page-aligned */
#define KEEP 2

typedef struct node { /* at the start of each large mapping */
  size_t len;         /* of the whole mapping */
  struct node *next;  /* live list: mappings in use, so that a free can tell them from calloc'd blocks */
} node;

static node *live;   /* large buffers in use */
static node *kept[KEEP]; /* freed ones kept for reuse, kept[0] the most recently freed */
static atomic_flag lock = ATOMIC_FLAG_INIT;

static void lock_take(void) {
  while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
  }
}
static void lock_give(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

/* The smallest kept mapping of at least len bytes, wasting at most half of it, moved to the live list; NULL if none. */
static node *reuse_kept(size_t len) {
  int best = -1;
  for (int i = 0; i < KEEP; i++)
    if (kept[i] && kept[i]->len >= len && kept[i]->len / 2 <= len && (best < 0 || kept[i]->len < kept[best]->len))
      best = i;
  if (best < 0) return NULL;
  node *n = kept[best];
  for (int i = best; i < KEEP - 1; i++) kept[i] = kept[i + 1];
  kept[KEEP - 1] = NULL;
  n->next = live, live = n;
  return n;
}

float *tensor_mem_alloc(size_t bytes) {
  if (bytes < TENSOR_MEM_LARGE) return calloc(1, bytes);
  if (bytes > SIZE_MAX - 2 * HEADER) return NULL;
  size_t len = (bytes + HEADER + HEADER - 1) / HEADER * HEADER;
  lock_take();
  node *n = reuse_kept(len);
  lock_give();
  if (n) {
    memset((uint8_t *)n + HEADER, 0, bytes); /* the kept pages hold an old tensor (or zeros where the kernel took them) */
    return (float *)((uint8_t *)n + HEADER);
  }
  node *drop[KEEP]; /* none fits: the workload moved on, so the kept ones go before a new mapping adds to them */
  lock_take();
  for (int i = 0; i < KEEP; i++) drop[i] = kept[i], kept[i] = NULL;
  lock_give();
  for (int i = 0; i < KEEP; i++)
    if (drop[i]) munmap(drop[i], drop[i]->len);
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  n = p;
  n->len = len;
  lock_take();
  n->next = live, live = n;
  lock_give();
  return (float *)((uint8_t *)n + HEADER);
}

void tensor_mem_free(float *data) {
  if (!data) return;
  node *n = (node *)(void *)((uint8_t *)data - HEADER), **at;
  lock_take();
  for (at = &live; *at && *at != n; at = &(*at)->next) {
  }
  if (!*at) { /* not a large mapping (pointers are compared, never read) */
    lock_give();
    free(data);
    return;
  }
  *at = n->next;
  lock_give();
  madvise(data, n->len - HEADER, MADV_FREE); /* the node's page stays: it holds len */
  lock_take();
  node *drop = kept[KEEP - 1];
  for (int i = KEEP - 1; i > 0; i--) kept[i] = kept[i - 1];
  kept[0] = n;
  lock_give();
  if (drop) munmap(drop, drop->len);
}

int tensor_mem_cached(void) {
  int k = 0;
  lock_take();
  for (int i = 0; i < KEEP; i++) k += kept[i] != NULL;
  lock_give();
  return k;
}

#else

float *tensor_mem_alloc(size_t bytes) { return calloc(1, bytes); }

void tensor_mem_free(float *p) { free(p); }

int tensor_mem_cached(void) { return 0; }

#endif
