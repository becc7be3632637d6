/* The Vulkan backend's work per decoded token and per prefill chunk, counted (icl_model_work_counts): dispatches,
 * barriers, submits, host waits. They are deterministic for a model shape, so they are pinned here for each
 * architecture as a fixed part plus a part per layer (from 2- and 4-layer tiny models): a fusion that silently
 * falls back, or an op that gains a dispatch, changes them and fails this test (issue 37; docs/vulkan.md). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct counts { long dispatches, barriers, submits, host_waits; } counts;

/* Work of one decoded token after a 6-token prompt, and of one 12-token prefill, on a tiny model of arch. */
static int measure(const char *arch, int n_layer, counts *dec, counts *pre) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-counts-%d-%s-%d.gguf", (int)getpid(), arch, n_layer);
  icl_tiny_spec sp = {.arch = arch, .wtype = ICL_TYPE_Q8_0, .seed = 3, .n_layer = n_layer};
  icl_error e = {0};
  icl_model *m = NULL;
  icl_load_opts lo = {.backend = "vulkan", .device = -1, .n_ctx = 32, .chunk = 16};
  int rc = icl_write_tiny_model(path, &sp, &e);
  if (!rc) rc = icl_model_load(path, &lo, &m, &e);
  unlink(path);
  CHECKF(rc == 0, "%s: %s", arch, e.msg);
  if (rc) return rc;
  int32_t toks[12] = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50};
  float logits[512];
  icl_session *s = NULL;
  icl_work_counts c[4];
  rc = icl_session_new(m, &s, &e);
  if (!rc) rc = icl_session_eval(s, toks, 6, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c[0], &e);
  if (!rc) rc = icl_session_eval(s, toks + 6, 1, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c[1], &e);
  if (!rc) icl_session_reset(s);
  if (!rc) rc = icl_model_work_counts(m, &c[2], &e);
  if (!rc) rc = icl_session_eval(s, toks, 12, logits, 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c[3], &e);
  CHECKF(rc == 0, "%s: %s", arch, e.msg);
  counts *out[2] = {dec, pre};
  for (int i = 0; i < 2; i++)
    *out[i] = (counts){(long)(c[2 * i + 1].dispatches - c[2 * i].dispatches),
                       (long)(c[2 * i + 1].barriers - c[2 * i].barriers),
                       (long)(c[2 * i + 1].submits - c[2 * i].submits),
                       (long)(c[2 * i + 1].host_waits - c[2 * i].host_waits)};
  icl_session_free(s);
  icl_model_free(m);
  return rc;
}

/* Pinned: dispatches and barriers as fixed + per layer, one submit and one host wait (the logits' read-back). */
typedef struct pin { const char *arch; long dec_fixed, dec_layer, dec_bar_fixed, dec_bar_layer, pre_fixed, pre_layer; } pin;

static void check_arch(const pin *p) {
  counts d2, p2, d4, p4;
  if (measure(p->arch, 2, &d2, &p2) || measure(p->arch, 4, &d4, &p4)) return;
  long dl = (d4.dispatches - d2.dispatches) / 2, df = d2.dispatches - 2 * dl;
  long bl = (d4.barriers - d2.barriers) / 2, bf = d2.barriers - 2 * bl;
  long pl = (p4.dispatches - p2.dispatches) / 2, pf = p2.dispatches - 2 * pl;
  printf("%-7s decoded token: dispatches %ld + %ld per layer, barriers %ld + %ld per layer, submits %ld, host waits "
         "%ld; 12-token prefill: dispatches %ld + %ld per layer\n", p->arch, df, dl, bf, bl, d2.submits,
         d2.host_waits, pf, pl);
  CHECKF(df == p->dec_fixed && dl == p->dec_layer, "%s: decode dispatches %ld + %ld/layer, pinned %ld + %ld", p->arch,
         df, dl, p->dec_fixed, p->dec_layer);
  CHECKF(bf == p->dec_bar_fixed && bl == p->dec_bar_layer, "%s: decode barriers %ld + %ld/layer, pinned %ld + %ld",
         p->arch, bf, bl, p->dec_bar_fixed, p->dec_bar_layer);
  CHECKF(pf == p->pre_fixed && pl == p->pre_layer, "%s: prefill dispatches %ld + %ld/layer, pinned %ld + %ld", p->arch,
         pf, pl, p->pre_fixed, p->pre_layer);
  CHECKF(d2.submits == 1 && d2.host_waits == 1 && d4.submits == 1 && p2.submits == 1,
         "%s: one submit and one host wait per token (got %ld, %ld)", p->arch, d2.submits, d2.host_waits);
}

int main(void) {
  if (!t_vulkan_built()) {
    printf("Vulkan support not built: nothing to count\n");
    return 77;
  }
  /* today's path (before issue 37's fusions; ICL_PROFILE=1 lists the ops): llama's 15 dispatches a layer are 2
   * rms_norm, 7 mat-vecs (q, k, v, o, gate, up, down), 2 RoPE, attention, swiglu and 2 residual adds; qwen2 adds
   * its 3 bias adds, gemma3 its q/k norms and 2 post-norms (geglu for swiglu) */
  static const pin PINS[] = {
      {"llama", 3, 15, 3, 11, 3, 15},
      {"qwen2", 3, 18, 3, 12, 3, 18},
      {"gemma3", 4, 19, 4, 14, 4, 19},
  };
  for (size_t i = 0; i < sizeof PINS / sizeof PINS[0]; i++) check_arch(&PINS[i]);
  return t_done();
}
