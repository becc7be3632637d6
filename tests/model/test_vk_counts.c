/* The Vulkan backend's work per decoded token and per prefill chunk, counted (icl_model_work_counts): dispatches,
 * barriers, submits, host waits. They are deterministic for a model shape, so they are pinned here for each
 * architecture as a fixed part plus a part per layer (from 2- and 4-layer tiny models): a fusion that silently
 * falls back, or an op that gains a dispatch, changes them and fails this test (issue 37; docs/vulkan.md). Each is
 * measured with the fused ops and without them (ICL_VK_FUSION=0, the unfused sequence), and the two give the same
 * logits bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/model.h"
#include "testmodel.h"
#include "testutil.h"

typedef struct counts { long dispatches, barriers, submits, host_waits; } counts;

enum { VOCAB_MAX = 512 };

/* Work of one decoded token after a 6-token prompt, and of one 12-token prefill, on a tiny model of arch (attn_v of
 * vtype where not 0), with (fused 1) or without the fused ops; logits[0] and [1] receive the decoded token's and
 * the prefill's last logits. */
static int measure(const char *arch, uint32_t vtype, int n_layer, int fused, counts *dec, counts *pre,
                   float logits[2][VOCAB_MAX]) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-counts-%d-%s-%d.gguf", (int)getpid(), arch, n_layer);
  /* vtype: a v of another type beside Q5_0 q, k (Gemma 3 files' mix); else all Q8_0 */
  icl_tiny_spec sp = {.arch = arch, .wtype = vtype ? ICL_TYPE_Q5_0 : ICL_TYPE_Q8_0, .vtype = vtype, .seed = 3,
                      .n_layer = n_layer};
  icl_error e = {0};
  icl_model *m = NULL;
  icl_load_opts lo = {.backend = "vulkan", .device = -1, .n_ctx = 32, .chunk = 16};
  int rc = icl_write_tiny_model(path, &sp, &e);
  if (fused) unsetenv("ICL_VK_FUSION");
  else setenv("ICL_VK_FUSION", "0", 1);
  if (!rc) rc = icl_model_load(path, &lo, &m, &e);
  unsetenv("ICL_VK_FUSION");
  unlink(path);
  CHECKF(rc == 0, "%s: %s", arch, e.msg);
  if (rc) return rc;
  int32_t toks[12] = {1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50};
  CHECKF(rc || icl_model_hparams(m)->n_vocab <= VOCAB_MAX, "%s: vocabulary above %d", arch, VOCAB_MAX);
  icl_session *s = NULL;
  icl_work_counts c[4];
  rc = icl_session_new(m, &s, &e);
  if (!rc) rc = icl_session_eval(s, toks, 6, logits[0], 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c[0], &e);
  if (!rc) rc = icl_session_eval(s, toks + 6, 1, logits[0], 0, &e);
  if (!rc) rc = icl_model_work_counts(m, &c[1], &e);
  if (!rc) icl_session_reset(s);
  if (!rc) rc = icl_model_work_counts(m, &c[2], &e);
  if (!rc) rc = icl_session_eval(s, toks, 12, logits[1], 0, &e);
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
typedef struct pin {
  const char *arch;
  uint32_t vtype; /* 0, or attn_v's type in a model of Q5_0 matrices */
  int fused;
  long dec_fixed, dec_layer, dec_bar_fixed, dec_bar_layer, pre_fixed, pre_layer;
} pin;

static void check_arch(const pin *p) {
  counts d2, p2, d4, p4;
  static float lg[2][2][VOCAB_MAX], other[2][2][VOCAB_MAX]; /* [layers 2, 4][decode, prefill] */
  if (measure(p->arch, p->vtype, 2, p->fused, &d2, &p2, lg[0]) ||
      measure(p->arch, p->vtype, 4, p->fused, &d4, &p4, lg[1]))
    return;
  /* the other path on the same models: the same logits, bit for bit */
  counts ignore[4];
  if (measure(p->arch, p->vtype, 2, !p->fused, &ignore[0], &ignore[1], other[0]) ||
      measure(p->arch, p->vtype, 4, !p->fused, &ignore[2], &ignore[3], other[1]))
    return;
  CHECKF(memcmp(lg, other, sizeof lg) == 0, "%s: fused and unfused logits differ", p->arch);
  long dl = (d4.dispatches - d2.dispatches) / 2, df = d2.dispatches - 2 * dl;
  long bl = (d4.barriers - d2.barriers) / 2, bf = d2.barriers - 2 * bl;
  long pl = (p4.dispatches - p2.dispatches) / 2, pf = p2.dispatches - 2 * pl;
  printf("%s%s %s decoded token: dispatches %ld + %ld per layer, barriers %ld + %ld per layer, submits %ld, "
         "host waits %ld; 12-token prefill: dispatches %ld + %ld per layer\n",
         p->arch, p->vtype ? " (mixed v)" : "", p->fused ? "fused" : "unfused", df, dl, bf, bl, d2.submits,
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
  /* unfused (ICL_PROFILE=1 lists the ops): llama's 15 dispatches a layer are 2 rms_norm, 7 mat-vecs (q, k, v, o,
   * gate, up, down), 2 RoPE, attention, swiglu and 2 residual adds; qwen2 adds its 3 bias adds, gemma3 its q/k
   * norms and 2 post-norms (geglu for swiglu). Fused: the o and down mat-vecs add into the residual (matmul_add)
   * where nothing stands between them (gemma3's post-norms do), and a decoded token's q, k, v and gate, up are
   * one grouped mat-vec each (matmul_group), 3 dispatches fewer a layer; RoPE of q and k is one dispatch
   * (rope_pair), in prefill too; a decoded token's gate, up and activation are one dispatch (matmul_glu); a decoded
   * token's pre-attention and pre-FFN RMS norms are folded into the q/k/v group and the GLU (rms_matmul_group,
   * rms_matmul_glu), 2 fewer; gemma3's post-norms add into the residual (rms_norm_add), 2 fewer, and its q/k norms
   * are one dispatch with RoPE (rms_rope_pair), 2 fewer, both in prefill too; on a decoded token gemma3's post-norm
   * adds fold into the next norm's consumer (add_rms_matmul_glu, the next layer's add_rms_matmul_group), 2 fewer, but
   * the last layer's post-FFN add stays rms_norm_add: one more in the fixed part */
  static const pin PINS[] = {
      {"llama", 0, 0, 3, 15, 3, 11, 3, 15}, {"qwen2", 0, 0, 3, 18, 3, 12, 3, 18}, {"gemma3", 0, 0, 4, 19, 4, 14, 4, 19},
      {"llama", 0, 1, 3, 6, 3, 6, 3, 12},   {"qwen2", 0, 1, 3, 9, 3, 7, 3, 15},   {"gemma3", 0, 1, 5, 6, 5, 6, 4, 14},
      /* Gemma 3 files' Q5_0 q, k beside a Q8_0 v: still one grouped dispatch with the norms (a mixed-type variant) */
      {"gemma3", ICL_TYPE_Q8_0, 1, 5, 6, 5, 6, 4, 14},
  };
  for (size_t i = 0; i < sizeof PINS / sizeof PINS[0]; i++) check_arch(&PINS[i]);
  return t_done();
}
