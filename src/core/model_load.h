/* Loading a model from an open GGUF image (owner: model.c), for callers that build the image themselves: the
 * trainer binds its current weights this way (src/train/train_run.c). */
#ifndef ICL_MODEL_LOAD_H
#define ICL_MODEL_LOAD_H

#include "icl/gguf.h"
#include "icl/model.h"

/* icl_model_load of an open GGUF image (a file or memory); the image may be closed afterwards (the model copies
 * what it keeps). */
int icl_model_load_gguf(const icl_gguf *g, const icl_load_opts *opts, icl_model **out, icl_error *err);

#endif
