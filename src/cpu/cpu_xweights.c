/* EXACT precision's repacked weights: each quantized weight view is repacked once (cpu_xtile_x86.h) on its first
 * EXACT matmul and kept until its bytes are written or its buffer freed. The copy costs about the weight's own
 * size again (more for 8-bit codes and 16-element scales, docs/cpu-backend.md) and saves every later matmul the
 * dequantize-and-transpose of its rows. Only buffers allocated as ICL_BUF_WEIGHT qualify: the backend sees
 * every change to those (ops->write; no op writes a quantized tensor). */
#include <stdlib.h>

#include "cpu_internal.h"

typedef struct xw_build {
  const cpu_kernels *k;
  uint32_t type;
  const uint8_t *w;
  size_t wrb, tbytes;
  int64_t K, rows;
  uint8_t *tiles;
} xw_build;

static void xw_build_item(void *arg, int64_t ti, int ith) {
  (void)ith;
  const xw_build *b = arg;
  int64_t r0 = ti * CPU_TILE_ROWS;
  int nr = b->rows - r0 < CPU_TILE_ROWS ? (int)(b->rows - r0) : CPU_TILE_ROWS;
  b->k->xpack[b->type](b->w + (size_t)r0 * b->wrb, b->wrb, nr, b->K, b->tiles + (size_t)ti * b->tbytes);
}

const uint8_t *cpu_xw_get(cpu_backend *cb, const icl_dt *w) {
  const cpu_kernels *k = &cb->k;
  uint32_t t = w->type;
  int64_t K = w->ne[0], rows = w->ne[1];
  if (cb->xw_off || t >= ICL_TYPE_COUNT || !k->xpack[t] || !k->xunpack[t] || !k->xgemm[t] ||
      !(w->buf->usage & ICL_BUF_WEIGHT) || K % 32)
    return NULL;
  for (int i = 0; i < cb->n_xw; i++) {
    const cpu_xw *e = &cb->xw[i];
    if (e->buf == w->buf && e->offset == w->offset && e->type == t && e->K == K && e->rows == rows)
      return e->tiles;
  }
  if (cb->n_xw == cb->cap_xw) {
    int cap = cb->cap_xw ? 2 * cb->cap_xw : 64;
    cpu_xw *nx = realloc(cb->xw, (size_t)cap * sizeof *nx);
    if (!nx) return NULL;
    cb->xw = nx;
    cb->cap_xw = cap;
  }
  int64_t n_tiles = (rows + CPU_TILE_ROWS - 1) / CPU_TILE_ROWS;
  size_t tbytes = cpu_xw_tile_bytes(t, K), bytes = (size_t)n_tiles * tbytes;
  xw_build b = {.k = k, .type = t, .w = (const uint8_t *)w->buf->data + w->offset,
                .wrb = icl_type_row_bytes(t, K), .tbytes = tbytes, .K = K, .rows = rows,
                .tiles = NULL};
  cpu_chunk *chunk;
  b.tiles = cpu_mem_alloc(&cb->mem, bytes, &chunk);
  if (!b.tiles) return NULL; /* the caller dequantizes rows instead: same results, slower */
  cpu_pool_for(cb->pool, n_tiles, xw_build_item, &b);
  cb->xw[cb->n_xw++] = (cpu_xw){.buf = w->buf, .offset = w->offset, .type = t, .K = K, .rows = rows, .tiles = b.tiles,
                                .chunk = chunk};
  return b.tiles;
}

void cpu_xw_drop(cpu_backend *cb, const icl_buf *b, size_t off, size_t n) {
  for (int i = 0; i < cb->n_xw;) {
    cpu_xw *e = &cb->xw[i];
    size_t lo = e->offset, hi = lo + icl_type_row_bytes(e->type, e->K) * (size_t)e->rows;
    if (e->buf == b && off < hi && (n == SIZE_MAX || off + n > lo)) {
      cpu_mem_free(&cb->mem, e->tiles, e->chunk);
      *e = cb->xw[--cb->n_xw];
    } else {
      i++;
    }
  }
}
