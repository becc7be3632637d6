/* The trainer's current weights as a loaded model: the checkpoint image icl_trainer_save would write, built in
 * memory and bound by icl_model_load's own icl-attn reader (model_attn.c, arch_attn.c) on a CPU backend, so
 * net:run has the captures, interventions and logits of m:run through the same forward and hooks. Cached until the
 * weights change (a step, or a caller taking a writable pointer to them). */
#include <stdio.h>
#include <stdlib.h>

#include "model_load.h"
#include "train_internal.h"

void tr_run_model_drop(icl_trainer *tr) {
  icl_model_free(tr->run_model);
  tr->run_model = NULL;
}

/* Binds the image: the CPU backend (EXACT precision, the trainer's thread count), all n_ctx positions. */
static int bind_image(icl_trainer *tr, const void *img, size_t size, icl_error *err) {
  char name[96];
  snprintf(name, sizeof name, "net (step %lld)", (long long)tr->step);
  icl_gguf *g = NULL;
  int rc = icl_gguf_open_memory(img, size, name, &g, err);
  icl_load_opts o = {.backend = "cpu", .device = -1, .n_threads = tr->n_threads, .n_ctx = tr->cfg.n_ctx};
  if (!rc) rc = icl_model_load_gguf(g, &o, &tr->run_model, err);
  icl_gguf_close(g);
  return rc;
}

int icl_trainer_model(icl_trainer *tr, icl_model **out, icl_error *err) {
  *out = NULL;
  if (!tr->run_model) {
    icl_gguf_writer *w = NULL;
    void *img = NULL;
    size_t size = 0;
    int rc = tr_ckpt_writer(tr, &w, err);
    if (!rc) rc = icl_gguf_writer_to_memory(w, &img, &size, err);
    icl_gguf_writer_free(w);
    if (!rc) rc = bind_image(tr, img, size, err);
    free(img);
    if (rc) return icl_error_wrap(err, "net: binding the current weights as a model");
  }
  *out = tr->run_model;
  return ICL_OK;
}
