/* icl_model_weight: every weight a tiny model has, read by GGUF name on each backend, equals the file's bytes
 * decoded by the scalar reference (icl_ref_dequant) exactly; a tied model's output.weight is its embedding; an
 * unknown name, a layer out of range and a tensor the architecture lacks are errors naming the weight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "icl/model.h"
#include "ref.h"
#include "testmodel.h"
#include "testutil.h"

static const char *NAMES[] = {"token_embd.weight", "output_norm.weight", "output.weight", "blk.%d.attn_norm.weight",
                              "blk.%d.attn_q.weight", "blk.%d.attn_k.weight", "blk.%d.attn_v.weight",
                              "blk.%d.attn_output.weight", "blk.%d.ffn_norm.weight", "blk.%d.ffn_gate.weight",
                              "blk.%d.ffn_up.weight", "blk.%d.ffn_down.weight", "blk.%d.attn_q.bias",
                              "blk.%d.attn_k_norm.weight", "blk.%d.post_attention_norm.weight",
                              "blk.%d.post_ffw_norm.weight"};

/* icl_model_weight_rows: chosen rows (out of order, repeated) equal those rows of the whole matrix; a row out of
 * range or an empty list is an error naming it. */
static void check_rows(icl_model *m, const char *arch, const char *backend, icl_error *e) {
  icl_tensor *all = NULL, *w = NULL;
  if (icl_model_weight(m, "blk.1.ffn_down.weight", &all, e)) {
    CHECKF(0, "%s on %s: %s", arch, backend, e->msg);
    return;
  }
  int64_t rows = all->shape[0], cols = all->shape[1], sel[4] = {rows - 1, 0, rows / 2, rows - 1};
  int rc = icl_model_weight_rows(m, "blk.1.ffn_down.weight", sel, 4, &w, e);
  CHECKF(rc == 0 && w->ndim == 2 && w->shape[0] == 4 && w->shape[1] == cols, "%s on %s: rows: %s", arch, backend,
         rc ? e->msg : "shape");
  for (int i = 0; !rc && i < 4; i++)
    CHECKF(!memcmp(w->data + i * cols, all->data + sel[i] * cols, (size_t)cols * 4), "%s on %s: row %lld differs",
           arch, backend, (long long)sel[i]);
  icl_tensor_free(w), w = NULL;
  int64_t bad[2] = {0, rows};
  CHECKF(icl_model_weight_rows(m, "blk.1.ffn_down.weight", bad, 2, &w, e) == ICL_EINVAL && !w &&
         strstr(e->msg, "out of range") && strstr(e->msg, "entry 2"), "%s: row past the end: %s", arch, e->msg);
  CHECK(icl_model_weight_rows(m, "blk.1.ffn_down.weight", bad, 0, &w, e) == ICL_EINVAL && !w);
  icl_tensor_free(all);
}

static void check_model(const char *arch, uint32_t wtype, const char *backend) {
  char path[256];
  snprintf(path, sizeof path, "/tmp/icl-weight-%d-%s.gguf", (int)getpid(), arch);
  icl_tiny_spec sp = {.arch = arch, .wtype = wtype, .seed = 11, .n_layer = 2};
  icl_error e = {0};
  icl_gguf *g = NULL;
  icl_model *m = NULL;
  icl_load_opts lo = {.backend = backend, .device = -1, .n_ctx = 16};
  int rc = icl_write_tiny_model(path, &sp, &e);
  if (!rc) rc = icl_gguf_open(path, &g, &e);
  if (!rc) rc = icl_model_load(path, &lo, &m, &e);
  CHECKF(rc == 0, "%s on %s: %s", arch, backend, e.msg);
  int n_checked = 0;
  for (int il = 0; !rc && il < 2; il++)
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
      if (il && !strchr(NAMES[i], '%')) continue;
      char nm[128];
      snprintf(nm, sizeof nm, NAMES[i], il);
      const icl_gguf_tensor *t = icl_gguf_find_tensor(g, nm);
      int tied = !t && !strcmp(nm, "output.weight");
      if (tied) t = icl_gguf_find_tensor(g, "token_embd.weight");
      icl_tensor *w = NULL;
      int wr = icl_model_weight(m, nm, &w, &e);
      if (!t) { /* a tensor this architecture has not */
        CHECKF(wr == ICL_EINVAL && strstr(e.msg, nm), "%s %s: absent weight gives %d '%s'", arch, nm, wr, e.msg);
        continue;
      }
      CHECKF(wr == 0, "%s on %s, %s: %s", arch, backend, nm, e.msg);
      if (wr) continue;
      int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
      float *want = malloc((size_t)n * sizeof *want);
      icl_ref_dequant(t->type, t->data, want, n);
      int vec = t->ne[1] * t->ne[2] * t->ne[3] == 1;
      CHECKF(w->numel == n && w->ndim == (vec ? 1 : 2) && w->shape[w->ndim - 1] == t->ne[0],
             "%s %s: shape [%lld ...] of %lld elements, expected %lld", arch, nm, (long long)w->shape[0],
             (long long)w->numel, (long long)n);
      CHECKF(w->numel == n && !memcmp(w->data, want, (size_t)n * 4), "%s on %s, %s (%s): values differ from the file",
             arch, backend, nm, icl_type_name(t->type));
      n_checked++;
      free(want);
      icl_tensor_free(w);
    }
  CHECKF(rc || n_checked >= 20, "%s: only %d weights checked", arch, n_checked);
  icl_tensor *w = NULL;
  if (!rc) {
    CHECK(icl_model_weight(m, "blk.2.attn_q.weight", &w, &e) == ICL_EINVAL && strstr(e.msg, "blk.2.attn_q.weight") &&
          strstr(e.msg, "0..1") && !w);
    CHECK(icl_model_weight(m, "blk.0.attn_q", &w, &e) == ICL_EINVAL && strstr(e.msg, "blk.0.attn_q") && !w);
    CHECK(icl_model_weight(m, "blk.-1.attn_q.weight", &w, &e) == ICL_EINVAL && !w);
    CHECK(icl_model_weight(m, "", &w, &e) == ICL_EINVAL && !w);
    check_rows(m, arch, backend, &e);
  }
  icl_model_free(m);
  icl_gguf_close(g);
  unlink(path);
}

int main(void) {
  const char *backends[] = {"ref", "cpu", "vulkan"};
  for (int b = 0; b < 3; b++) {
    if (!strcmp(backends[b], "vulkan") && !t_vulkan_built()) {
      printf("vulkan: not built (-DICL_VULKAN=OFF), not tested\n");
      continue;
    }
    check_model("llama", ICL_TYPE_Q8_0, backends[b]);
    check_model("qwen2", ICL_TYPE_Q4_1, backends[b]);
    check_model("gemma3", ICL_TYPE_F16, backends[b]);
  }
  return t_done();
}
