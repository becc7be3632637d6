/* The backends the op table runs on (ref first: every other result is judged against it), and the
 * table's coverage listing (--list). */
#ifndef ICL_OPS_TARGETS_H
#define ICL_OPS_TARGETS_H

#include "icl/devices.h"
#include "ops_run.h"
#include "vk.h"

static int ot_vk_used;

static void ot_add_target(const char *name, icl_backend *be, int kind, int fast) {
  ot_target *t = &ot_targets[ot_n_targets++];
  *t = (ot_target){.be = be, .kind = kind, .fast = fast};
  snprintf(t->name, sizeof t->name, "%s", name);
  printf("target %s\n", t->name);
}

static int ot_wanted(const char *name, const char *only) { return !only || strstr(name, only) != NULL; }

/* CPU levels via ICL_CPU_SIMD: generic on 1 thread (the pool's inline path), avx2 on 3 (more
 * threads than a 2-core machine has cores: work claimed unevenly), avx512 (with VNNI) on 2. */
static void ot_open_cpu(const char *only) {
  static const char *levels[] = {"generic", "avx2", "avx512"};
  static const int threads[] = {1, 3, 2};
  for (int i = 0; i < 3; i++) {
    char name[64];
    snprintf(name, sizeof name, "cpu/%s (%d thread%s)", levels[i], threads[i], threads[i] > 1 ? "s" : "");
    if (!ot_wanted(name, only)) continue;
    setenv("ICL_CPU_SIMD", levels[i], 1);
    icl_error err;
    icl_backend *be;
    int rc = icl_cpu_backend_new(threads[i], &be, &err);
    CHECKF(rc == ICL_OK, "cpu backend %s: %s", levels[i], err.msg);
    if (rc) continue;
    if (strcmp(cpu_of(be)->k.name, levels[i]) != 0) {
      printf("cpu level %s: this CPU lacks it, not tested here\n", levels[i]);
      be->ops->destroy(be);
      continue;
    }
    ot_add_target(name, be, OT_CPU, 0);
    snprintf(name, sizeof name, "cpu/%s FAST (%d thread%s)", levels[i], threads[i], threads[i] > 1 ? "s" : "");
    ot_add_target(name, be, OT_CPU, 1);
  }
  unsetenv("ICL_CPU_SIMD");
}

/* Both Vulkan kernel families on the default device (ICL_VK_SHAPE decides at device creation); with
 * ot_vk_own (--own-family) only the family the device runs by default (vk/device.c: CPU devices the
 * cpu-shaped kernels, GPUs the gpu-shaped ones; ICL_VK_SHAPE, if set, still decides). */
static int ot_vk_own;

/* Opens one Vulkan target: the kernel family `shape` ("gpu" or "cpu"), or NULL for the one the device runs by
 * default, named after the family and the device; nothing when the name does not match only. */
static void ot_open_vk_shape(const char *shape, const char *only) {
  char name[64];
  snprintf(name, sizeof name, "vulkan/%s-shaped", shape ? shape : "");
  if (shape ? !ot_wanted(name, only) : !ot_wanted("vulkan/cpu-shaped", only) && !ot_wanted("vulkan/gpu-shaped", only))
    return;
  if (shape) setenv("ICL_VK_SHAPE", shape, 1);
  icl_error err;
  icl_backend *be;
  int rc = icl_vk_backend_new(-1, &be, &err);
  if (shape) CHECKF(rc == ICL_OK, "vulkan backend (%s-shaped kernels): %s", shape, err.msg);
  else CHECKF(rc == ICL_OK, "vulkan backend (the device's own kernel family): %s", err.msg);
  if (shape) unsetenv("ICL_VK_SHAPE");
  if (rc) return;
  const icl_device_info *d = icl_vk_backend_device(be);
  if (!shape) { /* the family vk/device.c chose */
    const char *env = getenv("ICL_VK_SHAPE");
    shape = (env && *env ? strcmp(env, "cpu") == 0 : strcmp(d->type, "cpu") == 0) ? "cpu" : "gpu";
  }
  snprintf(name, sizeof name, "vulkan/%s-shaped (%.30s)", shape, d->name);
  if (!ot_wanted(name, only)) {
    be->ops->destroy(be);
    return;
  }
  ot_add_target(name, be, OT_VK, 0);
  ot_vk_used = 1;
  /* FAST precision where the device gives it another several-token matmul (ICL_VK_MATMUL: intdot), judged with
   * the FAST tolerance; the other ops run as at EXACT */
  const char *fast = icl_vk_backend_matmul_path(be, ICL_PRECISION_FAST);
  if (strcmp(fast, "tiled") != 0) {
    snprintf(name, sizeof name, "vulkan/%s-shaped FAST %s (%.24s)", shape, fast, d->name);
    ot_add_target(name, be, OT_VK, 1);
  }
}

static void ot_open_vk(const char *only) {
  if (!t_vulkan_built()) {
    printf("vulkan: not built (-DICL_VULKAN=OFF), not tested here\n");
    return;
  }
  if (ot_vk_own) {
    printf("vulkan: the device's own kernel family only (--own-family)\n");
    ot_open_vk_shape(NULL, only);
    return;
  }
  ot_open_vk_shape("gpu", only);
  ot_open_vk_shape("cpu", only);
}

/* Opens ref and every target matching only (NULL = all); 0 when ref cannot be opened. */
static int ot_open_targets(const char *only) {
  icl_error err;
  icl_backend *be;
  int rc = icl_ref_backend_new(&be, &err);
  CHECKF(rc == ICL_OK, "ref backend: %s", err.msg);
  if (rc) return 0;
  ot_add_target("ref", be, OT_REF, 0);
  ot_open_cpu(only);
  ot_open_vk(only);
  return 1;
}

/* Destroys the targets (a FAST target shares its backend with the one before it), prints the
 * time each took and checks the Vulkan validation layer said nothing. */
static void ot_close_targets(void) {
  for (int i = 0; i < ot_n_targets; i++) {
    printf("%-44s %7.2f s in its runs\n", ot_targets[i].name, ot_targets[i].secs);
    if (!ot_targets[i].fast) ot_targets[i].be->ops->destroy(ot_targets[i].be);
  }
  if (ot_vk_used) {
    int msgs = icl_vk_validation_messages();
    CHECKF(msgs == 0, "%d Vulkan validation-layer messages", msgs);
    printf("vulkan validation messages: %d\n", msgs);
  }
}

/* --list: per entry, the op, its types and the shapes of each class (nothing is run). */
static void ot_list(const ot_entry *table, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const ot_entry *e = &table[k];
    printf("%-11s types:", e->op->name);
    if (!e->types) printf(" f32");
    for (const uint32_t *t = e->types; t && *t != ICL_TYPE_COUNT; t++) printf(" %s", icl_type_name(*t));
    printf("\n");
    for (size_t s = 0; s < e->n_shapes; s++) {
      ot_case c = {.e = e, .s = &e->shapes[s], .type = e->types ? e->types[0] : ICL_TYPE_F32};
      char buf[200];
      ot_case_name(&c, buf, sizeof buf);
      printf("    %s\n", strchr(strchr(buf, ' ') + 1, ' ') + 1);
    }
  }
}

#endif
