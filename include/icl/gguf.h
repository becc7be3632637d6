/* GGUF reader (memory-mapped, validated before use) and writer. */
#ifndef ICL_GGUF_H
#define ICL_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "icl/icl.h"

/* GGUF metadata value types. */
typedef enum icl_gguf_vtype {
  ICL_GGUF_U8 = 0,
  ICL_GGUF_I8 = 1,
  ICL_GGUF_U16 = 2,
  ICL_GGUF_I16 = 3,
  ICL_GGUF_U32 = 4,
  ICL_GGUF_I32 = 5,
  ICL_GGUF_F32 = 6,
  ICL_GGUF_BOOL = 7,
  ICL_GGUF_STRING = 8,
  ICL_GGUF_ARRAY = 9,
  ICL_GGUF_U64 = 10,
  ICL_GGUF_I64 = 11,
  ICL_GGUF_F64 = 12
} icl_gguf_vtype;

typedef struct icl_gguf icl_gguf;

/* One tensor's description; data points into the mapping (aligned to the file's alignment). */
typedef struct icl_gguf_tensor {
  const char *name;   /* NUL-terminated copy */
  uint32_t n_dims;    /* 1..4 */
  int64_t ne[4];      /* ne[0] innermost (row width); unused dims are 1 */
  uint32_t type;      /* icl_type */
  uint64_t offset;    /* relative to the data section */
  size_t nbytes;      /* bytes of data */
  const void *data;   /* pointer into the mapped file */
} icl_gguf_tensor;

/* Maps and validates a GGUF file; on failure returns an error code and err names file, field, value. */
int icl_gguf_open(const char *path, icl_gguf **out, icl_error *err);

/* Parses and validates a GGUF image in memory (not copied; must outlive the handle); name is for messages. */
int icl_gguf_open_memory(const void *data, size_t size, const char *name, icl_gguf **out, icl_error *err);

/* Runs fn(ud, err), which reads g's mapped data, and returns its result, or ICL_EIO "changed while being read"
 * when the file was truncated (SIGBUS on the mapping) or rewritten meanwhile. Every reader of the mapping uses it. */
int icl_gguf_guarded(const icl_gguf *g, int (*fn)(void *ud, icl_error *err), void *ud, icl_error *err);

/* Unmaps and frees; NULL is allowed. */
void icl_gguf_close(icl_gguf *g);

/* File name given at open. */
const char *icl_gguf_name(const icl_gguf *g);

/* GGUF version (2 or 3). */
uint32_t icl_gguf_version(const icl_gguf *g);

/* Total size of the file in bytes. */
size_t icl_gguf_size(const icl_gguf *g);

/* Data alignment in bytes (general.alignment or 32). */
uint32_t icl_gguf_alignment(const icl_gguf *g);

/* Number of metadata key/value pairs. */
int64_t icl_gguf_n_kv(const icl_gguf *g);

/* Index of key, or -1 if absent. */
int64_t icl_gguf_find_key(const icl_gguf *g, const char *key);

/* Key of pair i (NUL-terminated). */
const char *icl_gguf_key(const icl_gguf *g, int64_t i);

/* Value type of pair i. */
icl_gguf_vtype icl_gguf_kv_type(const icl_gguf *g, int64_t i);

/* Reads pair i as an integer (any integer type or bool); returns ICL_EFORMAT on other types. */
int icl_gguf_kv_int(const icl_gguf *g, int64_t i, int64_t *out);

/* Reads pair i as a double (any numeric type); returns ICL_EFORMAT on other types. */
int icl_gguf_kv_float(const icl_gguf *g, int64_t i, double *out);

/* String value of pair i (NUL-terminated copy; len may be NULL), or NULL if not a string. */
const char *icl_gguf_kv_str(const icl_gguf *g, int64_t i, size_t *len);

/* Element type of array pair i, or -1 if pair i is not an array. */
int icl_gguf_arr_type(const icl_gguf *g, int64_t i);

/* Element count of array pair i (0 if not an array). */
uint64_t icl_gguf_arr_len(const icl_gguf *g, int64_t i);

/* Packed elements of a numeric array pair i (may be unaligned: read with memcpy), or NULL. */
const void *icl_gguf_arr_data(const icl_gguf *g, int64_t i);

/* Element j of array pair i as an integer / double; ICL_EFORMAT if not numeric or j out of range. */
int icl_gguf_arr_int(const icl_gguf *g, int64_t i, uint64_t j, int64_t *out);
int icl_gguf_arr_float(const icl_gguf *g, int64_t i, uint64_t j, double *out);

/* Element j of string array pair i (NUL-terminated copy; len may be NULL), or NULL. */
const char *icl_gguf_arr_str(const icl_gguf *g, int64_t i, uint64_t j, size_t *len);

/* Convenience by key: integer value; ICL_EFORMAT naming file and key if missing or of the wrong type. */
int icl_gguf_get_int(const icl_gguf *g, const char *key, int64_t *out, icl_error *err);

/* Convenience by key: float value; as icl_gguf_get_int. */
int icl_gguf_get_float(const icl_gguf *g, const char *key, double *out, icl_error *err);

/* Convenience by key: string value or NULL if missing or not a string. */
const char *icl_gguf_get_str(const icl_gguf *g, const char *key);

/* Number of tensors. */
int64_t icl_gguf_n_tensors(const icl_gguf *g);

/* Tensor i (0 <= i < n_tensors). */
const icl_gguf_tensor *icl_gguf_tensor_at(const icl_gguf *g, int64_t i);

/* Tensor by name, or NULL. */
const icl_gguf_tensor *icl_gguf_find_tensor(const icl_gguf *g, const char *name);

/* Name of a metadata value type ("u32", "string", ...). */
const char *icl_gguf_vtype_name(int t);

/* ---- writer ---- */

typedef struct icl_gguf_writer icl_gguf_writer;

/* Creates an empty writer (version 3, alignment 32); NULL on allocation failure. */
icl_gguf_writer *icl_gguf_writer_new(void);

/* Frees a writer; NULL is allowed. */
void icl_gguf_writer_free(icl_gguf_writer *w);

/* Adds a scalar key (value bytes as in the file: e.g. a uint32_t for ICL_GGUF_U32, one byte for BOOL). */
int icl_gguf_w_scalar(icl_gguf_writer *w, const char *key, icl_gguf_vtype type, const void *value, icl_error *err);

/* Typed helpers for common scalars. */
int icl_gguf_w_u32(icl_gguf_writer *w, const char *key, uint32_t v, icl_error *err);
int icl_gguf_w_i32(icl_gguf_writer *w, const char *key, int32_t v, icl_error *err);
int icl_gguf_w_f32(icl_gguf_writer *w, const char *key, float v, icl_error *err);
int icl_gguf_w_bool(icl_gguf_writer *w, const char *key, int v, icl_error *err);
int icl_gguf_w_str(icl_gguf_writer *w, const char *key, const char *v, icl_error *err);

/* Adds an array of n numeric elements of type elem_type, packed. */
int icl_gguf_w_arr(icl_gguf_writer *w, const char *key, icl_gguf_vtype elem_type, uint64_t n, const void *data, icl_error *err);

/* Adds an array of n strings. */
int icl_gguf_w_arr_str(icl_gguf_writer *w, const char *key, uint64_t n, const char *const *strs, icl_error *err);

/* Adds a tensor; data (nbytes = row bytes x rows) is copied. ne[0] innermost. */
int icl_gguf_w_tensor(icl_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                      const void *data, size_t nbytes, icl_error *err);

/* Writes the file atomically (temporary file, then rename). */
int icl_gguf_writer_save(const icl_gguf_writer *w, const char *path, icl_error *err);

/* Serializes into a malloc'd buffer (caller frees) — for tests and fuzz seeds. */
int icl_gguf_writer_to_memory(const icl_gguf_writer *w, void **data, size_t *size, icl_error *err);

#endif
