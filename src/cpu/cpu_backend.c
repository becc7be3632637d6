/* The native CPU backend: host-memory buffers, ops executed immediately on a persistent
 * thread pool, kernels chosen at run time for the CPU's SIMD level. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_features.h"
#include "cpu_internal.h"

const char *cpu_kernels_init(cpu_kernels *k, const char *want) {
  const char *env = getenv("ICL_CPU_SIMD");
  if (!want && env && *env) want = env;
  cpu_kernels_generic(k);
#if defined(__x86_64__) || defined(__i386__)
  cpu_x86_bits bits;
  cpu_x86_read(&bits, 0);
  cpu_x86_features f = cpu_x86_decide(&bits); /* CPUID flags the OS enables the state of (XCR0), not flags alone */
  int has2 = f.avx2, has512 = f.avx512 && f.avx512_vnni;
  /* a request above what the CPU has falls back to the best it does have */
  if (want && strcmp(want, "generic") == 0) return k->name;
  if (has512 && (!want || strcmp(want, "avx512") == 0)) {
    cpu_kernels_avx512(k);
    cpu_kernels_train_avx512(k);
    if (f.avx512_bf16) cpu_kernels_bf16_avx512(k);
  } else if (has2) {
    cpu_kernels_avx2(k);
  }
#else
  (void)want;
#endif
  return k->name;
}

void *cpu_scratch_get(cpu_scratch *s, size_t size) {
  if (s->size >= size) return s->p;
  size_t n = (size + 4095) & ~(size_t)4095;
  void *p = aligned_alloc(64, n);
  if (!p) return NULL;
  free(s->p);
  s->p = p;
  s->size = n;
  return p;
}

static int cpus(void);

/* ICL_THREADS when set (an integer 1..256, else an error), otherwise the CPUs this process may use. */
static int default_threads(int *out, icl_error *err) {
  const char *env = getenv("ICL_THREADS");
  if (env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (end == env || *end || v < 1 || v > 256)
      return icl_error_set(err, ICL_EINVAL, "ICL_THREADS='%s': expected an integer in 1..256", env);
    return *out = (int)v, ICL_OK;
  }
  *out = cpus();
  return ICL_OK;
}

static int cpus(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

/* ---- buffers ------------------------------------------------------------------------------ */

static int cpu_buf_alloc(icl_backend *be, size_t size, int usage, icl_buf **out, icl_error *err) {
  icl_buf *b = calloc(1, sizeof *b);
  /* 64-byte alignment for full-width vector loads; size rounded up as aligned_alloc requires; weights on huge
   * pages (cpu_mem.c) */
  size_t n = ((size ? size : 1) + 63) & ~(size_t)63;
  if (b) b->data = usage & ICL_BUF_WEIGHT ? cpu_mem_alloc(&cpu_of(be)->mem, n, &b->chunk) : aligned_alloc(64, n);
  if (!b || !b->data) {
    free(b);
    return icl_error_set(err, ICL_ENOMEM, "cpu: cannot allocate a buffer of %zu bytes", size);
  }
  b->size = size;
  b->usage = usage;
  *out = b;
  return ICL_OK;
}

static int cpu_buf_wrap(icl_backend *be, void *host, size_t size, icl_buf **out, icl_error *err) {
  (void)be;
  icl_buf *b = calloc(1, sizeof *b);
  if (!b) return icl_error_set(err, ICL_ENOMEM, "cpu: out of memory wrapping a host buffer");
  *b = (icl_buf){.data = host, .size = size, .wrapped = 1};
  *out = b;
  return ICL_OK;
}

static void cpu_buf_free(icl_backend *be, icl_buf *b) {
  if (!b) return;
  if (b->wrapped) {
    free(b);
    return;
  }
  cpu_xw_drop(cpu_of(be), b, 0, SIZE_MAX);
  cpu_mem_free(&cpu_of(be)->mem, b->data, b->chunk);
  free(b);
}

static int check_range(const char *what, const icl_buf *b, size_t off, size_t n, icl_error *err) {
  if (off > b->size || n > b->size - off)
    return icl_error_set(err, ICL_EINVAL, "cpu: %s of %zu bytes at offset %zu is outside the buffer of %zu bytes", what,
                         n, off, b->size);
  return ICL_OK;
}

static int cpu_write(icl_backend *be, icl_buf *b, size_t off, const void *src, size_t n, icl_error *err) {
  int rc = check_range("write", b, off, n, err);
  if (rc) return rc;
  cpu_xw_drop(cpu_of(be), b, off, n);
  memcpy((char *)b->data + off, src, n);
  return ICL_OK;
}

static int cpu_read(icl_backend *be, icl_buf *b, size_t off, void *dst, size_t n, icl_error *err) {
  (void)be;
  int rc = check_range("read", b, off, n, err);
  if (rc) return rc;
  memcpy(dst, (const char *)b->data + off, n);
  return ICL_OK;
}

/* Ops run to completion when called, so there is never anything to wait for. */
static int cpu_sync(icl_backend *be, icl_error *err) { (void)be; (void)err; return ICL_OK; }

static void cpu_destroy(icl_backend *be) {
  cpu_backend *cb = cpu_of(be);
  if (!cb) return;
  cpu_split_free(cb);
  cpu_pool_free(cb->pool);
  if (cb->scratch)
    for (int i = 0; i < cb->n_threads; i++) free(cb->scratch[i].p);
  free(cb->scratch);
  free(cb->shared.p);
  free(cb->panel.p);
  for (int i = 0; i < cb->n_xw; i++) cpu_mem_free(&cb->mem, cb->xw[i].tiles, cb->xw[i].chunk);
  for (int i = 0; i < CPU_ROPE_TABS; i++) free(cb->rope[i].mem.p);
  free(cb->xw);
  cpu_mem_release(&cb->mem);
  free(cb);
}

static const icl_backend_ops CPU_OPS = {
    .name = "cpu",
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_wrap = cpu_buf_wrap,
    .write = cpu_write,
    .read = cpu_read,
    .sync = cpu_sync,
    .destroy = cpu_destroy,
    .get_rows = cpu_get_rows,
    .matmul = cpu_matmul,
    .rms_norm = cpu_rms_norm,
    .layer_norm = cpu_layer_norm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .add = cpu_add,
    .mul = cpu_mul,
    .scale = cpu_scale,
    .silu = cpu_silu,
    .gelu = cpu_gelu,
    .relu = cpu_relu,
    .swiglu = cpu_swiglu,
    .geglu = cpu_geglu,
    .softmax = cpu_softmax,
    .convert = cpu_convert,
    .argmax = cpu_argmax,
    .lse_select = cpu_lse_select,
    .copy2d = cpu_copy2d,
    .fill2d = cpu_fill2d,
    .matmul_group = cpu_matmul_group,
    .attention_seqs = cpu_attention_seqs,
    .matmul_bwd = cpu_matmul_bwd,
    .matmul_bwd_group = cpu_matmul_bwd_group,
    .norm_fwd = cpu_norm_fwd,
    .norm_bwd = cpu_norm_bwd,
    .attention_bwd = cpu_attention_bwd,
    .rope_bwd = cpu_rope_bwd,
    .gelu_bwd = cpu_gelu_bwd,
    .relu_bwd = cpu_relu_bwd,
    .embed = cpu_embed,
    .embed_bwd = cpu_embed_bwd,
    .sum_rows = cpu_sum_rows,
    .smear = cpu_smear,
    .smear_bwd = cpu_smear_bwd,
    .xent = cpu_xent,
    .optim_update = cpu_optim_update,
    .run_split = cpu_run_split,
};

int icl_cpu_backend_new(int n_threads, icl_backend **out, icl_error *err) {
  *out = NULL;
  cpu_backend *cb = calloc(1, sizeof *cb);
  if (!cb) return icl_error_set(err, ICL_ENOMEM, "cpu: out of memory creating the backend");
  cb->be.ops = &CPU_OPS;
  cb->be.impl = cb;
  cb->be.is_cpu_device = 1;
  cb->be.exact_batch = 1;
  /* Gemma 3's 262144-row LM head: 128 positions per dequantized or repacked tile instead of 64 (at 64 the int8
   * repack was 11% of a FAST 1400-token all-logits forward, perf record of `icl bench model`) */
  cb->be.logits_chunk_bytes = (size_t)128 << 20;
  cb->n_threads = n_threads;
  if (n_threads <= 0 && default_threads(&cb->n_threads, err)) {
    free(cb);
    return ICL_EINVAL;
  }
  if (cb->n_threads > 256) cb->n_threads = 256;
  cpu_kernels_init(&cb->k, NULL);
  /* ICL_PRECISION_FAST only (exact precision always takes the tile path): int8 activations only for single-token
   * decode: on Gemma 3 they move logits by up to ~2 (tests/model/test_fixtures.c against the float64 reference),
   * too much for interpretability runs; every matmul of 2+ tokens is f32. ICL_CPU_TILE_MIN overrides it (1 = f32
   * everywhere; 32 = the speed crossover). */
  const char *tm = getenv("ICL_CPU_TILE_MIN");
  cb->tile_min_tokens = tm && atoi(tm) > 0 ? atoi(tm) : 2;
  /* FAST only: the int8 gemm (repacked weight tiles) from this many tokens; ICL_CPU_QGEMM_MIN overrides it
   * (a large value keeps FAST prefill on the f32 tiles) */
  const char *qm = getenv("ICL_CPU_QGEMM_MIN");
  cb->qgemm_min_tokens = qm && atoi(qm) > 0 ? atoi(qm) : 2;
  /* EXACT only: ICL_CPU_REPACK=0 dequantizes weight rows on every matmul instead of keeping repacked copies
   * (the same results, less memory, slower) */
  const char *rp = getenv("ICL_CPU_REPACK");
  cb->xw_off = rp && !strcmp(rp, "0");
  cpu_mem_init(&cb->mem);
  cb->pool = cpu_pool_new(cb->n_threads);
  if (cb->pool) cb->n_threads = cpu_pool_threads(cb->pool);
  cb->scratch = cb->pool ? calloc((size_t)cb->n_threads, sizeof *cb->scratch) : NULL;
  if (!cb->scratch) {
    cpu_destroy(&cb->be);
    return icl_error_set(err, ICL_ENOMEM, "cpu: cannot start %d threads", n_threads);
  }
  *out = &cb->be;
  return ICL_OK;
}

/* Name of the SIMD level and thread count, for logs and benchmarks. */
const char *icl_cpu_backend_describe(icl_backend *be, char *buf, size_t n) {
  cpu_backend *cb = cpu_of(be);
  snprintf(buf, n, "cpu (%s, %d threads)", cb->k.name, cb->n_threads);
  return buf;
}
