/* What a user needs to recompute attention from hook_q / hook_k: RoPE style and bases, windows, score scale. */
#include <math.h>

#include "model_internal.h"

int icl_model_layer_info(const icl_model *m, int layer, icl_layer_info *out, icl_error *err) {
  if (layer < 0 || layer >= m->hp.n_layer)
    return icl_error_set(err, ICL_EINVAL, "layer %d out of range 0..%d", layer, m->hp.n_layer - 1);
  const icl_layer *L = &m->layers[layer];
  *out = (icl_layer_info){.rope_base = L->rope_base, .window = L->window,
                          .rope_neox = m->arch->rope_mode == ICL_ROPE_NEOX,
                          .attn_scale = m->feat.attn_scale}; /* what the forward multiplies q.k by */
  return ICL_OK;
}

int icl_model_window(const icl_model *m) { return m->arch->swa_period ? m->window : 0; }
