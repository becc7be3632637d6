/* The CPU backend's weight memory (cpu_mem.c, huge-page chunks): buffers of many sizes, small ones carved from
 * shared chunks and large ones alone, are 64-byte aligned, do not overlap (each keeps its own pattern while the
 * others are written and freed in scrambled order), and chunks are reused or unmapped as buffers go. Under
 * AddressSanitizer (and with ICL_CPU_HUGEPAGES=0) the same checks run on plain aligned_alloc. */
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "testutil.h"

#define NB 300

/* Every byte, from the buffer's id and position. */
static void fill(uint8_t *p, size_t n, int id) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(id * 31 + i * 7 + (i >> 8));
}

static int intact(const uint8_t *p, size_t n, int id) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (uint8_t)(id * 31 + i * 7 + (i >> 8))) return 0;
  return 1;
}

static void run(const char *label) {
  cpu_mem m;
  int on = cpu_mem_init(&m);
  printf("%s: %s\n", label, on ? "chunks with huge pages requested" : "aligned_alloc");
  uint8_t *p[NB];
  size_t n[NB];
  cpu_chunk *c[NB];
  uint64_t s = 12345;
  for (int i = 0; i < NB; i++) {
    /* mostly layer-sized (1 B .. 1 MiB), every 37th one large enough for a chunk of its own (17 MiB) */
    n[i] = i % 37 == 36 ? ((size_t)17 << 20) + (size_t)i : 1 + (size_t)(t_rand_u64(&s) % ((size_t)1 << 20));
    p[i] = cpu_mem_alloc(&m, n[i], &c[i]);
    CHECKF(p[i] != NULL, "%s: allocation %d of %zu bytes failed", label, i, n[i]);
    CHECKF((uintptr_t)p[i] % 64 == 0, "%s: allocation %d is not 64-byte aligned", label, i);
    CHECKF(on || c[i] == NULL, "%s: a chunk without the arena", label);
    fill(p[i], n[i], i);
  }
  int live[NB], bad = 0, freed = 0;
  for (int i = 0; i < NB; i++) live[i] = 1;
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < NB / 3; k++) { /* free a third in scrambled order, then check the rest */
      int i = (int)(t_rand_u64(&s) % NB);
      if (!live[i]) continue;
      cpu_mem_free(&m, p[i], c[i]);
      live[i] = 0, freed++;
    }
    for (int i = 0; i < NB; i++) bad += live[i] && !intact(p[i], n[i], i);
    for (int i = 0; i < NB; i++) /* reallocate the freed ones: reused chunk space must not overlap live data */
      if (!live[i]) {
        p[i] = cpu_mem_alloc(&m, n[i], &c[i]);
        CHECKF(p[i] != NULL, "%s: reallocation %d failed", label, i);
        fill(p[i], n[i], i);
        live[i] = 1;
      }
    for (int i = 0; i < NB; i++) bad += !intact(p[i], n[i], i);
  }
  CHECKF(bad == 0, "%s: %d buffers lost their contents (overlap)", label, bad);
  printf("  %d buffers, %d freed and reallocated, every pattern intact\n", NB, freed);
  for (int i = 0; i < NB; i++) cpu_mem_free(&m, p[i], c[i]);
  int chunks = cpu_mem_chunks(&m);
  CHECKF(chunks <= 1, "%s: %d chunks left after every buffer was freed (at most the current one)", label, chunks);
  cpu_mem_release(&m);
  CHECK(m.chunks == NULL && m.cur == NULL);
}

int main(void) {
  unsetenv("ICL_CPU_HUGEPAGES");
  run("default");
  setenv("ICL_CPU_HUGEPAGES", "0", 1);
  run("ICL_CPU_HUGEPAGES=0");
  unsetenv("ICL_CPU_HUGEPAGES");
  return t_done();
}
