/* ICL_PROFILE=1: a timestamp before and after every dispatch, summed per op name and printed as
 * a table when the backend is destroyed. Dispatches beyond the query pool's size in one batch
 * are not timed (the table says how many were). */
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

#define MAX_QUERIES 8192

int vk_profile_init(vk_ctx *c, icl_error *err) {
  const char *p = getenv("ICL_PROFILE");
  if (!p || strcmp(p, "1") != 0) return ICL_OK;
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(c->phys, &props);
  if (props.limits.timestampPeriod <= 0) {
    fprintf(stderr, "icl: ICL_PROFILE=1 but '%s' has no compute timestamps\n", c->info.name);
    return ICL_OK;
  }
  VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qi.queryCount = MAX_QUERIES;
  VK_CHECK(vkCreateQueryPool(c->device, &qi, NULL, &c->query_pool));
  c->query_names = calloc(MAX_QUERIES / 2, sizeof *c->query_names);
  if (!c->query_names) return icl_error_set(err, ICL_ENOMEM, "out of memory");
  c->max_queries = MAX_QUERIES;
  c->profile = 1;
  c->period_ns = props.limits.timestampPeriod;
  return ICL_OK;
}

void vk_profile_begin(vk_ctx *c, const char *name) {
  if (!c->profile || c->n_queries + 2 > c->max_queries) {
    if (c->profile) c->untimed++;
    return;
  }
  if (c->n_queries == 0) vkCmdResetQueryPool(c->cmd, c->query_pool, 0, c->max_queries);
  c->query_names[c->n_queries / 2] = name;
  vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, c->query_pool, c->n_queries++);
}

void vk_profile_end(vk_ctx *c) {
  if (!c->profile || c->n_queries % 2 == 0) return;
  vkCmdWriteTimestamp(c->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->query_pool, c->n_queries++);
}

static vk_prof_op *prof_entry(vk_ctx *c, const char *name) {
  for (int i = 0; i < c->n_prof; i++)
    if (strcmp(c->prof[i].name, name) == 0) return &c->prof[i];
  if (c->n_prof == c->cap_prof) {
    int cap = c->cap_prof ? 2 * c->cap_prof : 32;
    vk_prof_op *p = realloc(c->prof, (size_t)cap * sizeof *p);
    if (!p) return NULL;
    c->prof = p;
    c->cap_prof = cap;
  }
  c->prof[c->n_prof] = (vk_prof_op){name, 0, 0};
  return &c->prof[c->n_prof++];
}

void vk_profile_collect(vk_ctx *c) {
  if (!c->profile || c->n_queries == 0) return;
  uint64_t *ts = calloc(c->n_queries, sizeof *ts);
  if (ts && vkGetQueryPoolResults(c->device, c->query_pool, 0, c->n_queries, c->n_queries * sizeof *ts, ts,
                                  sizeof *ts, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
    for (uint32_t q = 0; q + 1 < c->n_queries; q += 2) {
      vk_prof_op *e = prof_entry(c, c->query_names[q / 2]);
      if (!e) break;
      e->ms += (double)(ts[q + 1] - ts[q]) * c->period_ns * 1e-6;
      e->count++;
    }
  }
  free(ts);
  c->n_queries = 0;
}

static int by_time(const void *a, const void *b) {
  double x = ((const vk_prof_op *)a)->ms, y = ((const vk_prof_op *)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

void vk_profile_print(vk_ctx *c) {
  if (!c->profile || c->n_prof == 0) return;
  qsort(c->prof, (size_t)c->n_prof, sizeof *c->prof, by_time);
  double total = 0;
  for (int i = 0; i < c->n_prof; i++) total += c->prof[i].ms;
  fprintf(stderr, "\nicl profile (%s, GPU time per op)\n%-24s %10s %8s %10s %6s\n", c->info.name, "op", "total ms",
          "calls", "us/call", "%");
  for (int i = 0; i < c->n_prof; i++) {
    const vk_prof_op *e = &c->prof[i];
    fprintf(stderr, "%-24s %10.3f %8llu %10.1f %5.1f%%\n", e->name, e->ms, (unsigned long long)e->count,
            1e3 * e->ms / (double)e->count, total > 0 ? 100 * e->ms / total : 0);
  }
  fprintf(stderr, "%-24s %10.3f\n", "total", total);
  if (c->untimed) fprintf(stderr, "(%llu dispatches not timed: query pool full)\n", (unsigned long long)c->untimed);
}

void vk_profile_destroy(vk_ctx *c) {
  if (c->query_pool) vkDestroyQueryPool(c->device, c->query_pool, NULL);
  c->query_pool = VK_NULL_HANDLE;
  free(c->query_names);
  free(c->prof);
  c->query_names = NULL;
  c->prof = NULL;
  c->n_prof = c->cap_prof = 0;
  c->profile = 0;
}
