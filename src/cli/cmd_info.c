/* icl info MODEL.gguf [--tensors] [--json]: metadata, hyperparameters, tokenizer and tensor summary. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "icl/gguf.h"
#include "info_check.h"
#include "text_safe.h"

typedef struct info_opts {
  const char *path;
  int tensors, json, check;
} info_opts;

/* Hyperparameters shown first, in this order, when present under "<arch>.". */
static const char *const HPARAMS[] = {
    "context_length",        "embedding_length",        "block_count",
    "feed_forward_length",   "attention.head_count",    "attention.head_count_kv",
    "attention.key_length",  "attention.value_length",  "attention.layer_norm_rms_epsilon",
    "attention.layer_norm_epsilon", "rope.freq_base",   "rope.dimension_count",
    "attention.sliding_window", "vocab_size",
};
#define N_HPARAMS (sizeof HPARAMS / sizeof HPARAMS[0])

static void usage(FILE *f) {
  fprintf(f, "usage: icl info [--tensors] [--json] [--check] MODEL.gguf\n\n"
             "Prints the GGUF version, architecture, hyperparameters, tokenizer, vocabulary size\n"
             "and tensor counts and bytes by type.\n\n"
             "  --tensors   also list every tensor (name, type, shape, bytes, offset)\n"
             "  --json      print the same as JSON\n"
             "  --check     scan every tensor for NaN and Inf values (exit 2 naming them if any)\n");
}

/* Returns -1 to continue, else an exit status. */
static int parse_args(int argc, char **argv, info_opts *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--tensors")) o->tensors = 1;
    else if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--check")) o->check = 1;
    else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "icl info: unknown option '%s' (see icl info --help)\n", a);
      return 2;
    } else if (o->path) {
      fprintf(stderr, "icl info: more than one file given ('%s', '%s')\n", o->path, a);
      return 2;
    } else {
      o->path = a;
    }
  }
  if (!o->path) {
    fprintf(stderr, "icl info: missing MODEL.gguf (see icl info --help)\n");
    return 2;
  }
  return -1;
}

/* ---- value formatting ---- */

/* One scalar or array element of numeric type t as text. */
static void num_text(char *buf, size_t cap, int t, int64_t iv, double dv) {
  if ((t == ICL_GGUF_F32 || t == ICL_GGUF_F64) && fabs(dv) < 1e15 && dv == (double)(int64_t)dv)
    snprintf(buf, cap, "%.0f", dv); /* 1000000 rather than 1e+06 for rope bases */
  else if (t == ICL_GGUF_F32 || t == ICL_GGUF_F64) snprintf(buf, cap, "%g", dv);
  else if (t == ICL_GGUF_BOOL) snprintf(buf, cap, "%s", iv ? "true" : "false");
  else if (t == ICL_GGUF_U64 && dv > 9.2e18) snprintf(buf, cap, "%.0f", dv);
  else snprintf(buf, cap, "%" PRId64, iv);
}

static void scalar_text(const icl_gguf *g, int64_t i, char *buf, size_t cap) {
  int64_t iv = 0;
  double dv = 0;
  icl_gguf_kv_int(g, i, &iv);
  icl_gguf_kv_float(g, i, &dv);
  num_text(buf, cap, (int)icl_gguf_kv_type(g, i), iv, dv);
}

/* Arrays: "[n x type: first elements...]". */
static void array_text(const icl_gguf *g, int64_t i, char *buf, size_t cap) {
  int et = icl_gguf_arr_type(g, i);
  uint64_t n = icl_gguf_arr_len(g, i);
  size_t k = (size_t)snprintf(buf, cap, "[%" PRIu64 " x %s", n, icl_gguf_vtype_name(et));
  for (uint64_t j = 0; j < n && j < 8 && k + 40 < cap; j++) {
    char e[40] = "?";
    int64_t iv = 0;
    double dv = 0;
    size_t len = 0;
    const char *s = et == ICL_GGUF_STRING ? icl_gguf_arr_str(g, i, j, &len) : NULL;
    char safe[34];
    if (s) snprintf(e, sizeof e, "\"%s\"", icl_text_display(s, len, safe, sizeof safe));
    else if (et != ICL_GGUF_ARRAY) {
      icl_gguf_arr_int(g, i, j, &iv);
      icl_gguf_arr_float(g, i, j, &dv);
      num_text(e, sizeof e, et, iv, dv);
    }
    k += (size_t)snprintf(buf + k, cap - k, "%s%s", j ? ", " : ": ", e);
  }
  snprintf(buf + k, cap - k, "%s]", n > 8 ? ", ..." : "");
}

static void value_text(const icl_gguf *g, int64_t i, char *buf, size_t cap) {
  int t = (int)icl_gguf_kv_type(g, i);
  size_t len = 0;
  const char *s = t == ICL_GGUF_STRING ? icl_gguf_kv_str(g, i, &len) : NULL;
  if (s) icl_text_display(s, len, buf, cap); /* untrusted metadata: no terminal escapes, valid UTF-8 */
  else if (t == ICL_GGUF_ARRAY) array_text(g, i, buf, cap);
  else scalar_text(g, i, buf, cap);
}

static cJSON *num_json(int t, int64_t iv, double dv) {
  if (t == ICL_GGUF_BOOL) return cJSON_CreateBool(iv != 0);
  if (t == ICL_GGUF_F32 || t == ICL_GGUF_F64 || t == ICL_GGUF_U64) return cJSON_CreateNumber(dv);
  return cJSON_CreateNumber((double)iv);
}

/* A JSON string of untrusted bytes: invalid UTF-8 becomes U+FFFD (JSON readers refuse it). */
static cJSON *json_str(const char *s, size_t len) {
  char *fixed = icl_utf8_fix(s ? s : "", s ? len : 0);
  cJSON *j = cJSON_CreateString(fixed ? fixed : "");
  free(fixed);
  return j;
}

static cJSON *value_json(const icl_gguf *g, int64_t i) {
  int t = (int)icl_gguf_kv_type(g, i);
  int64_t iv = 0;
  double dv = 0;
  size_t len = 0;
  if (t == ICL_GGUF_STRING) return json_str(icl_gguf_kv_str(g, i, &len), len);
  if (t != ICL_GGUF_ARRAY) {
    icl_gguf_kv_int(g, i, &iv);
    icl_gguf_kv_float(g, i, &dv);
    return num_json(t, iv, dv);
  }
  int et = icl_gguf_arr_type(g, i);
  cJSON *a = cJSON_CreateArray();
  for (uint64_t j = 0; j < icl_gguf_arr_len(g, i) && et != ICL_GGUF_ARRAY; j++) {
    if (et == ICL_GGUF_STRING) {
      size_t len = 0;
      const char *s = icl_gguf_arr_str(g, i, j, &len);
      cJSON_AddItemToArray(a, json_str(s, len));
      continue;
    }
    icl_gguf_arr_int(g, i, j, &iv);
    icl_gguf_arr_float(g, i, j, &dv);
    cJSON_AddItemToArray(a, num_json(et, iv, dv));
  }
  return a;
}

/* ---- hyperparameters: the known list first, then any other "<arch>." key in file order ---- */

static int is_listed(const char *suffix) {
  for (size_t k = 0; k < N_HPARAMS; k++)
    if (!strcmp(HPARAMS[k], suffix)) return 1;
  return 0;
}

/* Calls fn for each hyperparameter key index with its suffix. */
static void each_hparam(const icl_gguf *g, const char *arch, void (*fn)(const icl_gguf *, int64_t, const char *, void *),
                        void *ctx) {
  char key[256];
  size_t plen = strlen(arch);
  for (size_t k = 0; k < N_HPARAMS; k++) {
    snprintf(key, sizeof key, "%s.%s", arch, HPARAMS[k]);
    int64_t i = icl_gguf_find_key(g, key);
    if (i >= 0) fn(g, i, HPARAMS[k], ctx);
  }
  for (int64_t i = 0; i < icl_gguf_n_kv(g); i++) {
    const char *k = icl_gguf_key(g, i);
    if (!strncmp(k, arch, plen) && k[plen] == '.' && !is_listed(k + plen + 1)) fn(g, i, k + plen + 1, ctx);
  }
}

static void hparam_print(const icl_gguf *g, int64_t i, const char *suffix, void *ctx) {
  char v[512], label[300];
  (void)ctx;
  char key[256];
  value_text(g, i, v, sizeof v);
  snprintf(label, sizeof label, "%s:", icl_text_display(suffix, strlen(suffix), key, sizeof key));
  printf("  %-36s %s\n", label, v);
}

static void hparam_json(const icl_gguf *g, int64_t i, const char *suffix, void *ctx) {
  char *key = icl_utf8_fix(suffix, strlen(suffix));
  if (key) cJSON_AddItemToObject((cJSON *)ctx, key, value_json(g, i));
  free(key);
}

/* ---- tensors ---- */

typedef struct type_stats {
  int64_t count[ICL_TYPE_COUNT];
  uint64_t bytes[ICL_TYPE_COUNT];
  uint64_t total;
} type_stats;

static void tensor_stats(const icl_gguf *g, type_stats *s) {
  memset(s, 0, sizeof *s);
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    s->count[t->type]++;
    s->bytes[t->type] += t->nbytes;
    s->total += t->nbytes;
  }
}

static void shape_text(const icl_gguf_tensor *t, char *buf, size_t cap) {
  size_t k = 0;
  for (uint32_t d = 0; d < t->n_dims && k < cap; d++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, d ? " x " : "", t->ne[d]);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_types(const type_stats *s, int64_t n) {
  printf("tensors:       %" PRId64 " (%.2f MiB, %" PRIu64 " bytes)\n", n, mib(s->total), s->total);
  for (int t = 0; t < ICL_TYPE_COUNT; t++)
    if (s->count[t])
      printf("  %-6s %6" PRId64 " tensors %12.2f MiB %14" PRIu64 " bytes\n", icl_type_name((uint32_t)t), s->count[t],
             mib(s->bytes[t]), s->bytes[t]);
}

static void print_tensor_table(const icl_gguf *g) {
  int w = 4;
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    int l = (int)strlen(icl_gguf_tensor_at(g, i)->name);
    if (l > w) w = l < 64 ? l : 64;
  }
  printf("\n%5s  %-*s  %-6s  %-24s %14s %14s\n", "#", w, "name", "type", "shape", "bytes", "offset");
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    char shape[128], name[256];
    shape_text(t, shape, sizeof shape);
    icl_text_display(t->name, strlen(t->name), name, sizeof name);
    printf("%5" PRId64 "  %-*s  %-6s  %-24s %14zu %14" PRIu64 "\n", i, w, name, icl_type_name(t->type), shape,
           t->nbytes, t->offset);
  }
}

/* ---- the two output forms ---- */

static int64_t vocab_size(const icl_gguf *g) {
  int64_t k = icl_gguf_find_key(g, "tokenizer.ggml.tokens");
  return k >= 0 && icl_gguf_arr_type(g, k) == ICL_GGUF_STRING ? (int64_t)icl_gguf_arr_len(g, k) : -1;
}

/* A metadata string made safe for a terminal (a few rotating buffers: several may appear in one printf). */
static const char *str_or(const icl_gguf *g, const char *key, const char *dflt) {
  static char bufs[4][512];
  static int next;
  const char *s = icl_gguf_get_str(g, key);
  if (!s) return dflt;
  char *b = bufs[next++ % 4];
  return icl_text_display(s, strlen(s), b, sizeof bufs[0]);
}

static void print_text(const icl_gguf *g, const info_opts *o) {
  const char *arch = icl_gguf_get_str(g, "general.architecture");
  type_stats s;
  tensor_stats(g, &s);
  printf("file:          %s\n", icl_gguf_name(g));
  printf("size:          %.2f MiB (%zu bytes)\n", mib(icl_gguf_size(g)), icl_gguf_size(g));
  printf("gguf version:  %u (alignment %u, %" PRId64 " keys)\n", icl_gguf_version(g), icl_gguf_alignment(g),
         icl_gguf_n_kv(g));
  printf("architecture:  %s\n", arch ? arch : "(none)");
  printf("name:          %s\n", str_or(g, "general.name", "(none)"));
  if (arch) {
    printf("hyperparameters:\n");
    each_hparam(g, arch, hparam_print, NULL);
  }
  printf("tokenizer:     %s (pre: %s)\n", str_or(g, "tokenizer.ggml.model", "(none)"),
         str_or(g, "tokenizer.ggml.pre", "(none)"));
  int64_t nv = vocab_size(g);
  if (nv >= 0) printf("vocabulary:    %" PRId64 " tokens\n", nv);
  else printf("vocabulary:    (none)\n");
  print_types(&s, icl_gguf_n_tensors(g));
  if (o->tensors) print_tensor_table(g);
}

static cJSON *tensors_json(const icl_gguf *g) {
  cJSON *a = cJSON_CreateArray();
  for (int64_t i = 0; i < icl_gguf_n_tensors(g); i++) {
    const icl_gguf_tensor *t = icl_gguf_tensor_at(g, i);
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray();
    for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
    cJSON_AddItemToObject(o, "name", json_str(t->name, strlen(t->name)));
    cJSON_AddStringToObject(o, "type", icl_type_name(t->type));
    cJSON_AddItemToObject(o, "shape", shape);
    cJSON_AddNumberToObject(o, "bytes", (double)t->nbytes);
    cJSON_AddNumberToObject(o, "offset", (double)t->offset);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

static cJSON *types_json(const type_stats *s) {
  cJSON *o = cJSON_CreateObject();
  for (int t = 0; t < ICL_TYPE_COUNT; t++) {
    if (!s->count[t]) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "count", (double)s->count[t]);
    cJSON_AddNumberToObject(e, "bytes", (double)s->bytes[t]);
    cJSON_AddItemToObject(o, icl_type_name((uint32_t)t), e);
  }
  return o;
}

static void add_str_or_null(cJSON *o, const char *name, const char *s) {
  if (s) cJSON_AddItemToObject(o, name, json_str(s, strlen(s)));
  else cJSON_AddNullToObject(o, name);
}

static cJSON *info_json(const icl_gguf *g, const info_opts *o) {
  const char *arch = icl_gguf_get_str(g, "general.architecture");
  type_stats s;
  tensor_stats(g, &s);
  cJSON *j = cJSON_CreateObject(), *hp = cJSON_CreateObject(), *tok = cJSON_CreateObject();
  cJSON_AddItemToObject(j, "file", json_str(icl_gguf_name(g), strlen(icl_gguf_name(g))));
  cJSON_AddNumberToObject(j, "size", (double)icl_gguf_size(g));
  cJSON_AddNumberToObject(j, "version", icl_gguf_version(g));
  cJSON_AddNumberToObject(j, "alignment", icl_gguf_alignment(g));
  cJSON_AddNumberToObject(j, "n_kv", (double)icl_gguf_n_kv(g));
  add_str_or_null(j, "architecture", arch);
  add_str_or_null(j, "name", icl_gguf_get_str(g, "general.name"));
  if (arch) each_hparam(g, arch, hparam_json, hp);
  cJSON_AddItemToObject(j, "hparams", hp);
  add_str_or_null(tok, "model", icl_gguf_get_str(g, "tokenizer.ggml.model"));
  add_str_or_null(tok, "pre", icl_gguf_get_str(g, "tokenizer.ggml.pre"));
  cJSON_AddNumberToObject(tok, "vocab_size", (double)vocab_size(g));
  cJSON_AddItemToObject(j, "tokenizer", tok);
  cJSON_AddNumberToObject(j, "n_tensors", (double)icl_gguf_n_tensors(g));
  cJSON_AddNumberToObject(j, "tensor_bytes", (double)s.total);
  cJSON_AddItemToObject(j, "types", types_json(&s));
  if (o->tensors) cJSON_AddItemToObject(j, "tensors", tensors_json(g));
  return j;
}

static int print_json(const icl_gguf *g, const info_opts *o) {
  cJSON *j = info_json(g, o);
  char *s = j ? cJSON_Print(j) : NULL;
  cJSON_Delete(j);
  if (!s) {
    fprintf(stderr, "icl info: %s: out of memory building JSON\n", icl_gguf_name(g));
    return 1;
  }
  puts(s);
  cJSON_free(s);
  return 0;
}

int icl_cmd_info(int argc, char **argv) {
  info_opts o = {0};
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  icl_error err;
  icl_gguf *g = NULL;
  if (icl_gguf_open(o.path, &g, &err)) {
    fprintf(stderr, "icl info: %s\n", err.msg); /* the message starts with the file name */
    return err.code == ICL_ENOMEM ? 1 : 2;
  }
  rc = 0;
  if (o.check) {
    if ((rc = cli_info_check(g, &err))) fprintf(stderr, "icl info: %s\n", err.msg);
    rc = rc == ICL_ENOMEM ? 1 : rc ? 2 : 0;
  } else if (o.json) {
    rc = print_json(g, &o);
  } else {
    print_text(g, &o);
  }
  icl_gguf_close(g);
  return rc;
}
