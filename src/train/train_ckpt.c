/* Checkpoints: the model as an icl-attn GGUF file (docs/gguf.md; all F32, written atomically by
 * icl's GGUF writer) with icl-train.* metadata, and the optimizer state (step, both moment
 * arenas) in a sidecar <path>.optim, also written to a temporary file and renamed. Loading reads
 * the configuration back from the GGUF keys and the presence of optional tensors. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "icl/gguf.h"
#include "train/train_internal.h"

#define OPTIM_MAGIC "ICLOPT01"

static const char *pos_name(int p) { return p == ICL_POS_LEARNED ? "learned" : p == ICL_POS_ROPE ? "rope" : "none"; }
static const char *norm_name(int n) { return n == ICL_NORM_LAYER ? "layer" : n == ICL_NORM_RMS ? "rms" : "none"; }

/* icl-train.config: every option of the configuration as a JSON object (for people and tools;
 * loading reads the icl-attn keys and the tensors present instead). */
static int put_config_json(icl_gguf_writer *w, const icl_attn_config *c, icl_error *err) {
  char js[1024];
  snprintf(js, sizeof js,
           "{\"layers\":%d,\"heads\":%d,\"d_model\":%d,\"d_head\":%d,\"ctx\":%d,\"vocab\":%d,\"inputs\":%d,"
           "\"input_proj\":%d,\"position\":\"%s\",\"norm\":\"%s\",\"eps\":%g,\"scale\":%d,\"w_o\":%d,"
           "\"qkv_bias\":%d,\"o_bias\":%d,\"smeared_key\":%d,\"d_ff\":%d,\"output\":\"%s\",\"classes\":%d,"
           "\"cls_hidden\":%d,\"out_bias\":%d,\"init_std\":%g,\"seed\":%llu}",
           c->n_layer, c->n_head, c->d_model, c->d_head, c->n_ctx, c->vocab, c->input_len, c->inp_proj,
           pos_name(c->position), norm_name(c->norm), (double)c->norm_eps, !c->no_scale,
           c->w_o, c->qkv_bias, c->o_bias, c->smeared_key, c->d_ff,
           c->output == ICL_OUT_CLASSIFIER ? "classifier" : "unembed", c->n_classes, c->cls_hidden, c->out_bias,
           (double)c->init_std, (unsigned long long)c->seed);
  return icl_gguf_w_str(w, "icl-train.config", js, err);
}

/* The icl-attn.* hyperparameters and icl-train.* metadata. */
static int put_keys(icl_gguf_writer *w, const icl_trainer *tr, icl_error *err) {
  const icl_attn_config *c = &tr->cfg;
  uint64_t seed = c->seed, step = (uint64_t)tr->step;
  int rc = icl_gguf_w_str(w, "general.architecture", "icl-attn", err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.context_length", (uint32_t)c->n_ctx, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.embedding_length", (uint32_t)c->d_model, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.block_count", (uint32_t)c->n_layer, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.attention.head_count", (uint32_t)c->n_head, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.attention.key_length", (uint32_t)c->d_head, err);
  if (!rc) rc = icl_gguf_w_f32(w, "icl-attn.attention.scale", tr_attn_scale(tr), err);
  if (!rc) rc = icl_gguf_w_str(w, "icl-attn.norm", norm_name(c->norm), err);
  if (!rc) rc = icl_gguf_w_f32(w, "icl-attn.attention.layer_norm_epsilon", c->norm_eps, err);
  if (!rc) rc = icl_gguf_w_str(w, "icl-attn.position", pos_name(c->position), err);
  if (!rc && c->position == ICL_POS_ROPE) rc = icl_gguf_w_f32(w, "icl-attn.rope.freq_base", c->rope_base, err);
  if (!rc && c->position == ICL_POS_ROPE) rc = icl_gguf_w_u32(w, "icl-attn.rope.dimension_count", (uint32_t)c->d_head, err);
  if (!rc) rc = icl_gguf_w_bool(w, "icl-attn.smeared_key", c->smeared_key, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.vocab_size", (uint32_t)c->vocab, err);
  if (!rc) rc = icl_gguf_w_u32(w, "icl-attn.input_length", (uint32_t)c->input_len, err);
  if (!rc) rc = icl_gguf_w_str(w, "icl-attn.output", c->output == ICL_OUT_CLASSIFIER ? "classifier" : "unembed", err);
  if (!rc && c->output == ICL_OUT_CLASSIFIER)
    rc = icl_gguf_w_u32(w, "icl-attn.classifier.hidden_count", (uint32_t)c->cls_hidden, err);
  if (!rc) rc = icl_gguf_w_scalar(w, "icl-train.step", ICL_GGUF_U64, &step, err);
  if (!rc) rc = icl_gguf_w_scalar(w, "icl-train.seed", ICL_GGUF_U64, &seed, err);
  if (!rc) rc = icl_gguf_w_f32(w, "icl-train.init_std", c->init_std, err);
  if (!rc) rc = icl_gguf_w_f32(w, "icl-train.loss", (float)tr->loss, err);
  if (!rc) rc = put_config_json(w, c, err);
  return rc;
}

/* Writes n floats (the moments) to path atomically, after a header of magic, step and count. */
static int save_optim(const icl_trainer *tr, const char *path, icl_error *err) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.optim.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
    return icl_error_set(err, ICL_EINVAL, "%s: path too long", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return icl_error_set(err, ICL_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  int64_t hdr[2] = {tr->step, tr->n_floats};
  int ok = fwrite(OPTIM_MAGIC, 1, 8, f) == 8 && fwrite(hdr, sizeof hdr, 1, f) == 1 &&
           fwrite(tr->m1, sizeof(float), (size_t)tr->n_floats, f) == (size_t)tr->n_floats &&
           fwrite(tr->m2, sizeof(float), (size_t)tr->n_floats, f) == (size_t)tr->n_floats;
  ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  char final[4096];
  snprintf(final, sizeof final, "%s.optim", path);
  if (ok && rename(tmp, final) == 0) return ICL_OK;
  int e = errno;
  unlink(tmp);
  return icl_error_set(err, ICL_EIO, "%s: cannot write the optimizer state: %s", final, strerror(e));
}

int icl_trainer_save(const icl_trainer *tr, const char *path, icl_error *err) {
  icl_gguf_writer *w = icl_gguf_writer_new();
  if (!w) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory for the writer", path);
  int rc = put_keys(w, tr, err);
  for (int i = 0; !rc && i < tr->np; i++) {
    const tr_param *p = &tr->p[i];
    int64_t ne[2] = {p->ne[0], p->ne[1]};
    rc = icl_gguf_w_tensor(w, p->name, ICL_TYPE_F32, p->ne[1] > 1 ? 2 : 1, ne, tr_w(tr, i),
                           (size_t)(p->ne[0] * p->ne[1]) * sizeof(float), err);
  }
  if (!rc) rc = save_optim(tr, path, err); /* sidecar first: a model file never lacks its state */
  if (!rc) rc = icl_gguf_writer_save(w, path, err);
  icl_gguf_writer_free(w);
  return rc;
}

/* ---- loading ------------------------------------------------------------------------------------- */

static int64_t key_int(const icl_gguf *g, const char *key, int64_t dflt) {
  int64_t i = icl_gguf_find_key(g, key), v;
  return i >= 0 && icl_gguf_kv_int(g, i, &v) == ICL_OK ? v : dflt;
}
static double key_float(const icl_gguf *g, const char *key, double dflt) {
  int64_t i = icl_gguf_find_key(g, key);
  double v;
  return i >= 0 && icl_gguf_kv_float(g, i, &v) == ICL_OK ? v : dflt;
}
static int key_is(const icl_gguf *g, const char *key, const char *want) {
  const char *s = icl_gguf_get_str(g, key);
  return s && !strcmp(s, want);
}
static int has(const icl_gguf *g, const char *name) { return icl_gguf_find_tensor(g, name) != NULL; }

/* The configuration as written by put_keys and the tensors present. */
static int read_config(const icl_gguf *g, icl_attn_config *c, icl_error *err) {
  if (!key_is(g, "general.architecture", "icl-attn"))
    return icl_error_set(err, ICL_EFORMAT, "%s: general.architecture is not icl-attn", icl_gguf_name(g));
  *c = (icl_attn_config){.n_ctx = (int)key_int(g, "icl-attn.context_length", 0),
                         .d_model = (int)key_int(g, "icl-attn.embedding_length", 0),
                         .n_layer = (int)key_int(g, "icl-attn.block_count", 0),
                         .n_head = (int)key_int(g, "icl-attn.attention.head_count", 0),
                         .d_head = (int)key_int(g, "icl-attn.attention.key_length", 0),
                         .vocab = (int)key_int(g, "icl-attn.vocab_size", 0),
                         .input_len = (int)key_int(g, "icl-attn.input_length", 0),
                         .norm_eps = (float)key_float(g, "icl-attn.attention.layer_norm_epsilon", 1e-5),
                         .smeared_key = (int)key_int(g, "icl-attn.smeared_key", 0),
                         .cls_hidden = (int)key_int(g, "icl-attn.classifier.hidden_count", 0),
                         .seed = (uint64_t)key_int(g, "icl-train.seed", 0),
                         .init_std = (float)key_float(g, "icl-train.init_std", 0.02)};
  c->norm = key_is(g, "icl-attn.norm", "layer") ? ICL_NORM_LAYER : key_is(g, "icl-attn.norm", "rms") ? ICL_NORM_RMS : ICL_NORM_NONE;
  c->position = key_is(g, "icl-attn.position", "learned") ? ICL_POS_LEARNED
                : key_is(g, "icl-attn.position", "rope") ? ICL_POS_ROPE : ICL_POS_NONE;
  if (c->position == ICL_POS_ROPE) c->rope_base = (float)key_float(g, "icl-attn.rope.freq_base", 10000.0);
  c->output = key_is(g, "icl-attn.output", "classifier") ? ICL_OUT_CLASSIFIER : ICL_OUT_UNEMBED;
  c->no_scale = c->d_head > 0 && fabs(key_float(g, "icl-attn.attention.scale", 0) - 1.0 / sqrt(c->d_head)) > 1e-6;
  c->inp_proj = has(g, "inp_proj.weight");
  c->w_o = has(g, "blk.0.attn_output.weight"), c->o_bias = has(g, "blk.0.attn_output.bias");
  c->qkv_bias = has(g, "blk.0.attn_q.bias"), c->out_bias = has(g, "output.bias");
  const icl_gguf_tensor *up = icl_gguf_find_tensor(g, "blk.0.ffn_up.weight"), *out = icl_gguf_find_tensor(g, "output.weight");
  c->d_ff = up ? (int)up->ne[1] : 0;
  if (!out) return icl_error_set(err, ICL_EFORMAT, "%s: no output.weight", icl_gguf_name(g));
  if (c->output == ICL_OUT_CLASSIFIER) c->n_classes = (int)out->ne[1];
  return ICL_OK;
}

/* Copies every parameter from the file, checking shape and type. */
static int read_weights(icl_trainer *tr, const icl_gguf *g, icl_error *err) {
  for (int i = 0; i < tr->np; i++) {
    const tr_param *p = &tr->p[i];
    const icl_gguf_tensor *t = icl_gguf_find_tensor(g, p->name);
    if (!t || t->type != ICL_TYPE_F32 || t->ne[0] != p->ne[0] || t->ne[1] != p->ne[1])
      return icl_error_set(err, ICL_EFORMAT, "%s: tensor %s missing or not F32 [%lld, %lld]", icl_gguf_name(g), p->name,
                           (long long)p->ne[0], (long long)p->ne[1]);
    memcpy(tr_w(tr, i), t->data, (size_t)(p->ne[0] * p->ne[1]) * sizeof(float));
  }
  return ICL_OK;
}

/* Reads the sidecar when present (absent: fresh moments, the step from the GGUF). */
static int read_optim(icl_trainer *tr, const char *path, icl_error *err) {
  char name[4096];
  snprintf(name, sizeof name, "%s.optim", path);
  FILE *f = fopen(name, "rb");
  if (!f) return ICL_OK;
  char magic[8];
  int64_t hdr[2];
  int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, OPTIM_MAGIC, 8) && fread(hdr, sizeof hdr, 1, f) == 1 &&
           hdr[1] == tr->n_floats && fread(tr->m1, sizeof(float), (size_t)hdr[1], f) == (size_t)hdr[1] &&
           fread(tr->m2, sizeof(float), (size_t)hdr[1], f) == (size_t)hdr[1];
  fclose(f);
  if (!ok) return icl_error_set(err, ICL_EFORMAT, "%s: not an optimizer state of %lld floats", name, (long long)tr->n_floats);
  if (hdr[0] != tr->step)
    return icl_error_set(err, ICL_EFORMAT, "%s: state of step %lld beside a model of step %lld", name, (long long)hdr[0],
                         (long long)tr->step);
  return ICL_OK;
}

int icl_trainer_load(const char *path, int n_threads, icl_trainer **out, icl_error *err) {
  *out = NULL;
  icl_gguf *g;
  int rc = icl_gguf_open(path, &g, err);
  if (rc) return rc;
  icl_attn_config c;
  icl_trainer *tr = NULL;
  rc = read_config(g, &c, err);
  if (!rc) rc = icl_trainer_new(&c, n_threads, &tr, err);
  if (!rc) rc = read_weights(tr, g, err);
  if (!rc) tr->step = key_int(g, "icl-train.step", 0);
  icl_gguf_close(g);
  if (!rc) rc = read_optim(tr, path, err);
  if (rc) icl_trainer_free(tr);
  else *out = tr;
  return rc;
}
