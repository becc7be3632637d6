/* Checkpoints: the model as an icl-attn GGUF file (docs/gguf.md; all F32, written atomically by
 * icl's GGUF writer) with icl-train.* metadata, and the optimizer state (step, kind, a hash of the
 * weights it belongs to, both moment arenas) in a sidecar <path>.optim. Loading reads the configuration
 * through the reader icl.load uses (arch_attn.c) and accepts a sidecar only when its hash is the
 * loaded weights' hash.
 *
 * Overwriting a checkpoint never leaves a pair that does not load (docs/training.md): the new sidecar
 * goes to <path>.optim.next (atomically), then the GGUF file is renamed over <path>, then .next over
 * .optim. Killed before the GGUF rename: the old GGUF and the old .optim match; killed after it: the new
 * GGUF matches .optim.next, which the loader then takes. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arch_attn.h"
#include "file_tmp.h"
#include "icl/gguf.h"
#include "train_internal.h"

#define OPTIM_MAGIC "ICLOPT02"
#define STEP_MAX ((int64_t)1 << 62)

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

uint64_t tr_weights_hash(const icl_trainer *tr) {
  uint64_t h = 1469598103934665603ull;
  const uint32_t *w = (const uint32_t *)(const void *)tr->w;
  for (int64_t i = 0; i < tr->n_floats; i++) h = (h ^ w[i]) * 1099511628211ull;
  return h;
}

/* The sidecar's header: magic, then step, floats per moment arena, optimizer kind (-1 = none yet), weights hash. */
typedef struct optim_hdr {
  int64_t step, n_floats, kind;
  uint64_t hash;
} optim_hdr;

/* Writes the moments to final atomically (a temporary file, then rename). */
static int save_optim(const icl_trainer *tr, const char *final, icl_error *err) {
  char tmp[4200];
  int fd = icl_tmp_create(final, tmp, sizeof tmp, err);
  if (fd < 0) return ICL_EIO;
  FILE *f = fdopen(fd, "wb");
  if (!f) return close(fd), unlink(tmp), icl_error_set(err, ICL_EIO, "%s: cannot write: %s", final, strerror(errno));
  optim_hdr h = {tr->step, tr->n_floats, tr->opt_kind, tr_weights_hash(tr)};
  int ok = fwrite(OPTIM_MAGIC, 1, 8, f) == 8 && fwrite(&h, sizeof h, 1, f) == 1 &&
           fwrite(tr->m1, sizeof(float), (size_t)tr->n_floats, f) == (size_t)tr->n_floats &&
           fwrite(tr->m2, sizeof(float), (size_t)tr->n_floats, f) == (size_t)tr->n_floats;
  ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
  ok = fclose(f) == 0 && ok;
  if (ok && rename(tmp, final) == 0) return ICL_OK;
  int e = errno;
  unlink(tmp);
  return icl_error_set(err, ICL_EIO, "%s: cannot write the optimizer state: %s", final, strerror(e));
}

/* The first non-finite weight's parameter, or -1. */
static int first_nonfinite(const icl_trainer *tr, const float *arena) {
  for (int i = 0; i < tr->np; i++) {
    const float *w = arena + tr->p[i].off;
    for (int64_t j = 0, n = tr->p[i].ne[0] * tr->p[i].ne[1]; j < n; j++)
      if (!isfinite(w[j])) return i;
  }
  return -1;
}

int tr_ckpt_writer(const icl_trainer *tr, icl_gguf_writer **out, icl_error *err) {
  icl_gguf_writer *w = *out = icl_gguf_writer_new();
  if (!w) return icl_error_set(err, ICL_ENOMEM, "out of memory for the GGUF writer");
  int rc = put_keys(w, tr, err);
  for (int i = 0; !rc && i < tr->np; i++) {
    const tr_param *p = &tr->p[i];
    int64_t ne[2] = {p->ne[0], p->ne[1]};
    rc = icl_gguf_w_tensor(w, p->name, ICL_TYPE_F32, p->ne[1] > 1 ? 2 : 1, ne, tr_w(tr, i),
                           (size_t)(p->ne[0] * p->ne[1]) * sizeof(float), err);
  }
  return rc;
}

int icl_trainer_save(const icl_trainer *tr, const char *path, icl_error *err) {
  char next[4200], side[4200];
  if (snprintf(next, sizeof next, "%s.optim.next", path) >= (int)sizeof next)
    return icl_error_set(err, ICL_EINVAL, "%s: path too long", path);
  snprintf(side, sizeof side, "%s.optim", path);
  int bad = first_nonfinite(tr, tr->w);
  if (bad >= 0)
    return icl_error_set(err, ICL_EINVAL, "%s: not saved: tensor %s has non-finite weights", path, tr->p[bad].name);
  icl_gguf_writer *w;
  int rc = tr_ckpt_writer(tr, &w, err);
  if (!rc) rc = save_optim(tr, next, err); /* the old pair stays loadable until the GGUF rename */
  if (rc) icl_error_wrap(err, "%s: cannot save the checkpoint", path);
  if (!rc) rc = icl_gguf_writer_save(w, path, err);
  if (!rc && rename(next, side) != 0)
    rc = icl_error_set(err, ICL_EIO, "%s: cannot rename %s to %s: %s", path, next, side, strerror(errno));
  icl_gguf_writer_free(w);
  return rc;
}

/* ---- loading ------------------------------------------------------------------------------------- */

static int has(const icl_gguf *g, const char *name) { return icl_gguf_find_tensor(g, name) != NULL; }

static int enum_of(const char *s, const char *a, const char *b) { return !strcmp(s, a) ? 1 : !strcmp(s, b) ? 2 : 0; }

/* Integer key in lo..hi (dflt when absent); a string, a float or a value out of range is an error naming it. */
static int key_int(const icl_gguf *g, const char *key, int64_t dflt, int64_t lo, int64_t hi, int64_t *out,
                   icl_error *err) {
  int64_t i = icl_gguf_find_key(g, key), v = dflt;
  if (i >= 0 && (icl_gguf_kv_type(g, i) == ICL_GGUF_BOOL || icl_gguf_kv_int(g, i, &v) != ICL_OK))
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' is a %s, expected an integer", icl_gguf_name(g), key,
                         icl_gguf_vtype_name(icl_gguf_kv_type(g, i)));
  if (v < lo || v > hi)
    return icl_error_set(err, ICL_EFORMAT, "%s: key '%s' = %lld, expected %lld..%lld", icl_gguf_name(g), key,
                         (long long)v, (long long)lo, (long long)hi);
  *out = v;
  return ICL_OK;
}

/* icl-train.seed and icl-train.init_std (what the trainer was built with; the weights come from the tensors). */
static int read_train_keys(const icl_gguf *g, icl_attn_config *c, icl_error *err) {
  int64_t seed, i = icl_gguf_find_key(g, "icl-train.init_std");
  int rc = key_int(g, "icl-train.seed", 0, 0, INT64_MAX, &seed, err);
  if (rc) return rc;
  c->seed = (uint64_t)seed;
  double std = 0.02;
  if (i >= 0 && (icl_gguf_kv_float(g, i, &std) != ICL_OK || !isfinite(std) || !(std > 0) || std > 100))
    return icl_error_set(err, ICL_EFORMAT, "%s: key 'icl-train.init_std' is not a finite number in (0, 100]",
                         icl_gguf_name(g));
  c->init_std = (float)std;
  return ICL_OK;
}

/* The attention scale the trainer can honour: 1/sqrt(d_head) (no_scale 0) or 1 (no_scale 1). */
static int read_scale(const icl_gguf *g, const icl_attn_file *f, icl_attn_config *c, icl_error *err) {
  double s = f->attn_scale, def = 1.0 / sqrt((double)f->d_head);
  if (fabs(s - def) <= 1e-6 * def) return c->no_scale = 0, ICL_OK;
  if (fabs(s - 1.0) <= 1e-6) return c->no_scale = 1, ICL_OK;
  return icl_error_set(err, ICL_EFORMAT, "%s: key 'icl-attn.attention.scale' = %g, the trainer supports 1/sqrt(d_head) "
                       "= %g or 1", icl_gguf_name(g), s, def);
}

/* The configuration from the icl-attn reader icl.load uses, the presence of optional tensors, and icl-train.*. */
static int read_config(const icl_gguf *g, icl_attn_config *c, icl_error *err) {
  icl_attn_file f;
  int rc = icl_attn_file_read(g, &f, err);
  if (rc) return rc;
  const char *name = icl_gguf_name(g);
  if (f.n_out < 0) return icl_error_set(err, ICL_EFORMAT, "%s: no output.weight (a tied unembedding cannot be trained)", name);
  if (!strcmp(f.position, "rope") && f.rope_dims != f.d_head)
    return icl_error_set(err, ICL_EFORMAT, "%s: key 'icl-attn.rope.dimension_count' = %d, the trainer ropes all of "
                         "d_head = %d", name, f.rope_dims, f.d_head);
  *c = (icl_attn_config){.n_layer = f.n_layer, .n_head = f.n_head, .d_model = f.d_model, .d_head = f.d_head,
                         .n_ctx = f.n_ctx, .vocab = f.vocab, .input_len = f.input_len, .norm_eps = f.eps,
                         .smeared_key = f.smeared_key, .d_ff = f.d_ff, .cls_hidden = f.cls_hidden};
  c->norm = enum_of(f.norm, "layer", "rms"); /* ICL_NORM_LAYER 1, ICL_NORM_RMS 2, none 0 */
  c->position = enum_of(f.position, "learned", "rope");
  if (c->position == ICL_POS_ROPE) c->rope_base = f.rope_base;
  c->output = strcmp(f.output, "classifier") ? ICL_OUT_UNEMBED : ICL_OUT_CLASSIFIER;
  if (c->output == ICL_OUT_CLASSIFIER) c->n_classes = f.n_out;
  else if (f.n_out != f.vocab)
    return icl_error_set(err, ICL_EFORMAT, "%s: output.weight has %d rows, the vocabulary %d", name, f.n_out, f.vocab);
  c->inp_proj = has(g, "inp_proj.weight");
  c->w_o = has(g, "blk.0.attn_output.weight"), c->o_bias = has(g, "blk.0.attn_output.bias");
  c->qkv_bias = has(g, "blk.0.attn_q.bias"), c->out_bias = has(g, "output.bias");
  if ((rc = read_scale(g, &f, c, err))) return rc;
  return read_train_keys(g, c, err);
}

/* Copies every parameter from the file, checking shape, type and that each weight is finite. */
static int read_weights(icl_trainer *tr, const icl_gguf *g, icl_error *err) {
  if (icl_gguf_n_tensors(g) != tr->np)
    return icl_error_set(err, ICL_EFORMAT, "%s: %lld tensors, the model of its keys has %d", icl_gguf_name(g),
                         (long long)icl_gguf_n_tensors(g), tr->np);
  for (int i = 0; i < tr->np; i++) {
    const tr_param *p = &tr->p[i];
    const icl_gguf_tensor *t = icl_gguf_find_tensor(g, p->name);
    if (!t || t->type != ICL_TYPE_F32 || t->ne[0] != p->ne[0] || t->ne[1] != p->ne[1] || t->ne[2] != 1 || t->ne[3] != 1)
      return icl_error_set(err, ICL_EFORMAT, "%s: tensor %s missing or not F32 [%lld, %lld]", icl_gguf_name(g), p->name,
                           (long long)p->ne[0], (long long)p->ne[1]);
    memcpy(tr_w(tr, i), t->data, (size_t)(p->ne[0] * p->ne[1]) * sizeof(float));
  }
  int bad = first_nonfinite(tr, tr->w);
  if (bad >= 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: tensor %s has non-finite weights (NaN or Inf)", icl_gguf_name(g),
                         tr->p[bad].name);
  return ICL_OK;
}

/* Opens a sidecar for reading: 0 = absent, 1 = open in *f, or an error (unreadable, not a regular file). */
static int open_sidecar(const char *name, FILE **f, icl_error *err) {
  int fd = open(name, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a FIFO must not block the open */
  if (fd < 0 && errno == ENOENT) return 0;
  if (fd < 0) return -icl_error_set(err, ICL_EIO, "%s: cannot read the optimizer state: %s", name, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -icl_error_set(err, ICL_EIO, "%s: the optimizer state is not a regular file", name);
  }
  *f = fdopen(fd, "rb");
  if (!*f) return close(fd), -icl_error_set(err, ICL_ENOMEM, "%s: out of memory", name);
  return 1;
}

/* Reads the header of sidecar name; 0 absent, 1 read, < 0 error. */
static int read_hdr(const char *name, FILE **f, optim_hdr *h, icl_error *err) {
  int rc = open_sidecar(name, f, err);
  if (rc <= 0) return rc;
  char magic[8];
  if (fread(magic, 1, 8, *f) != 8 || fread(h, sizeof *h, 1, *f) != 1 || memcmp(magic, OPTIM_MAGIC, 8)) {
    fclose(*f);
    return -icl_error_set(err, ICL_EFORMAT, "%s: not an optimizer state (magic %s expected; a sidecar of an older "
                          "icl has no hash of its model: remove it to resume with fresh moments)", name, OPTIM_MAGIC);
  }
  return 1;
}

/* The moments of a matching sidecar: sizes, finite values (second moments >= 0). */
static int read_moments(icl_trainer *tr, FILE *f, const optim_hdr *h, const char *name, icl_error *err) {
  if (h->n_floats != tr->n_floats || h->kind < -1 || h->kind > ICL_OPTIM_SGD)
    return icl_error_set(err, ICL_EFORMAT, "%s: an optimizer state of %lld floats (kind %lld), the model has %lld",
                         name, (long long)h->n_floats, (long long)h->kind, (long long)tr->n_floats);
  size_t n = (size_t)tr->n_floats;
  if (fread(tr->m1, sizeof(float), n, f) != n || fread(tr->m2, sizeof(float), n, f) != n || fgetc(f) != EOF)
    return icl_error_set(err, ICL_EFORMAT, "%s: truncated or too long (two arenas of %lld floats expected)", name,
                         (long long)tr->n_floats);
  int bad = first_nonfinite(tr, tr->m1);
  if (bad < 0) bad = first_nonfinite(tr, tr->m2);
  for (int64_t i = 0; bad < 0 && i < tr->n_floats; i++)
    if (tr->m2[i] < 0) bad = 0;
  if (bad >= 0)
    return icl_error_set(err, ICL_EFORMAT, "%s: moments of tensor %s are non-finite or negative", name, tr->p[bad].name);
  tr->opt_kind = (int)h->kind;
  return ICL_OK;
}

/* The sidecar of the loaded weights: <path>.optim when its hash matches, else <path>.optim.next (a save killed
 * between its renames); absent: fresh moments. A sidecar of other weights or another step is an error. */
static int read_optim(icl_trainer *tr, const char *path, icl_error *err) {
  char name[4200], next[4200];
  snprintf(name, sizeof name, "%s.optim", path);
  snprintf(next, sizeof next, "%s.optim.next", path);
  uint64_t hash = tr_weights_hash(tr);
  optim_hdr h, hn;
  FILE *f = NULL, *fn = NULL;
  int a = read_hdr(name, &f, &h, err);
  if (a < 0) return -a;
  if (a && h.hash == hash && h.step == tr->step) {
    int rc = read_moments(tr, f, &h, name, err);
    return fclose(f), rc;
  }
  int b = read_hdr(next, &fn, &hn, err);
  if (b > 0 && hn.hash == hash && hn.step == tr->step) {
    if (f) fclose(f);
    int rc = read_moments(tr, fn, &hn, next, err);
    return fclose(fn), rc;
  }
  if (fn) fclose(fn);
  if (!a) return ICL_OK;
  fclose(f);
  if (h.hash != hash)
    return icl_error_set(err, ICL_EFORMAT, "%s: the optimizer state of other weights (step %lld), not of %s", name,
                         (long long)h.step, path);
  return icl_error_set(err, ICL_EFORMAT, "%s: state of step %lld beside a model of step %lld", name, (long long)h.step,
                       (long long)tr->step);
}

int icl_trainer_load(const char *path, int n_threads, icl_trainer **out, icl_error *err) {
  *out = NULL;
  icl_gguf *g;
  int rc = icl_gguf_open(path, &g, err);
  if (rc) return rc;
  icl_attn_config c;
  icl_trainer *tr = NULL;
  int64_t step = 0;
  rc = read_config(g, &c, err);
  if (!rc) rc = key_int(g, "icl-train.step", 0, 0, STEP_MAX, &step, err);
  if (!rc && (rc = icl_trainer_new(&c, n_threads, &tr, err))) icl_error_wrap(err, "%s", path);
  if (!rc) rc = read_weights(tr, g, err);
  if (!rc) tr->step = step;
  icl_gguf_close(g);
  if (!rc) rc = read_optim(tr, path, err);
  if (rc) icl_trainer_free(tr);
  else *out = tr;
  return rc;
}
