/* Memory for weights and their repacked copies, carved from 2 MiB-aligned chunks that the kernel is asked to back
 * with transparent huge pages (madvise MADV_HUGEPAGE; Linux's default THP mode is "madvise", which gives none
 * otherwise). Decode streams every weight once per token: on 4 KiB pages that is a TLB miss every 4 KiB of the
 * stream; huge pages took FAST decode from 86 to 105 tok/s on Gemma 3 and 195 to 209 on SmolLM2 (alternating runs
 * with glibc's hugetlb tunable before this allocator). Weights are allocated at load and freed with the model, so a
 * chunk is carved front to back and unmapped when its last buffer goes; only the current chunk is reused.
 * ICL_CPU_HUGEPAGES=0 turns it off (plain aligned_alloc), as do builds under AddressSanitizer, whose redzones need
 * malloc'd buffers. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#include "asan.h"

#if ICL_ASAN
#define CPU_MEM_ARENA 0
#else
#include <sys/mman.h>
#ifdef MADV_HUGEPAGE
#define CPU_MEM_ARENA 1
#else
#define CPU_MEM_ARENA 0
#endif
#endif

#define HUGE_BYTES ((size_t)2 << 20)
#define CHUNK_BYTES ((size_t)32 << 20) /* buffers of half a chunk or more get a chunk of their own */

struct cpu_chunk {
  uint8_t *base;
  size_t size, used;
  int live; /* buffers carved from it and not freed */
  cpu_chunk *next;
};

int cpu_mem_init(cpu_mem *m) {
  const char *e = getenv("ICL_CPU_HUGEPAGES");
  m->on = CPU_MEM_ARENA && !(e && !strcmp(e, "0"));
  m->chunks = m->cur = NULL;
  return m->on;
}

#if CPU_MEM_ARENA
/* size bytes (a multiple of HUGE_BYTES) of zeroed memory at a HUGE_BYTES boundary, huge pages requested. */
static uint8_t *map_aligned(size_t size) {
  uint8_t *p = mmap(NULL, size + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  size_t lead = (HUGE_BYTES - (uintptr_t)p % HUGE_BYTES) % HUGE_BYTES;
  if (lead) munmap(p, lead);
  munmap(p + lead + size, HUGE_BYTES - lead);
  madvise(p + lead, size, MADV_HUGEPAGE); /* a request: without THP the pages are simply small */
  return p + lead;
}

static cpu_chunk *new_chunk(cpu_mem *m, size_t size) {
  cpu_chunk *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->size = (size + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
  c->base = map_aligned(c->size);
  if (!c->base) {
    free(c);
    return NULL;
  }
  c->next = m->chunks;
  m->chunks = c;
  return c;
}

static void drop_chunk(cpu_mem *m, cpu_chunk *c) {
  for (cpu_chunk **p = &m->chunks; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  munmap(c->base, c->size);
  free(c);
}
#endif

void *cpu_mem_alloc(cpu_mem *m, size_t size, cpu_chunk **chunk) {
  size_t n = ((size ? size : 1) + 63) & ~(size_t)63;
  *chunk = NULL;
  if (!m->on) return aligned_alloc(64, n);
#if CPU_MEM_ARENA
  cpu_chunk *c;
  if (n >= CHUNK_BYTES / 2) {
    c = new_chunk(m, n);
  } else {
    if (!m->cur || m->cur->size - m->cur->used < n) m->cur = new_chunk(m, CHUNK_BYTES);
    c = m->cur;
  }
  if (!c) return NULL;
  void *p = c->base + c->used;
  c->used += n;
  c->live++;
  *chunk = c;
  return p;
#else
  return NULL;
#endif
}

void cpu_mem_free(cpu_mem *m, void *p, cpu_chunk *chunk) {
  if (!chunk) {
    free(p);
    return;
  }
#if CPU_MEM_ARENA
  if (--chunk->live > 0) return;
  if (chunk == m->cur) chunk->used = 0; /* empty: carve it again */
  else drop_chunk(m, chunk);
#else
  (void)m;
#endif
}

int cpu_mem_chunks(const cpu_mem *m) {
  int n = 0;
#if CPU_MEM_ARENA
  for (const cpu_chunk *c = m->chunks; c; c = c->next) n++;
#else
  (void)m;
#endif
  return n;
}

void cpu_mem_release(cpu_mem *m) {
#if CPU_MEM_ARENA
  while (m->chunks) drop_chunk(m, m->chunks);
#endif
  m->cur = NULL;
}
