/* Types of the table-driven op test (test_backend_ops.c): an entry is {op, shape classes, types,
 * tolerances with their reasons}; an op definition says how to make its inputs, run it through the
 * src/ops.c wrappers and compute it in float64. Header-only: the test is one executable. */
#ifndef ICL_OPS_TABLE_H
#define ICL_OPS_TABLE_H

#include <stdint.h>
#include <stddef.h>

#include "backend.h"

enum { OT_MAX_IN = 8, OT_MAX_OUT = 4 };

#define N_(a) (sizeof(a) / sizeof((a)[0]))
#define SH(a) a, N_(a) /* a shape array and its length, for a table row */

/* A tolerance and why it is that size (printed on failure). */
typedef struct ot_tol {
  double v;
  const char *why;
} ot_tol;

/* Flag bit common to every op: the f32 views start 4 bytes off a 16-byte boundary (scalar kernels). */
#define OT_UNALIGNED 0x100

/* One shape of an op: cls is the class ("tiny", "odd", "tail", "tile", "model", "big"); n, f and
 * flags mean what the op's definition says (e.g. matmul: n = {K, rows, tokens}). "big" shapes are
 * dropped by --quick. */
typedef struct ot_shape {
  const char *cls;
  int64_t n[6];
  double f;
  int flags;
} ot_shape;

/* A host tensor: an input the generator filled, or the shape of an output. data NULL in an input
 * means "no operand" (the op gets a NULL view); alias >= 0 makes an output overwrite input alias. */
typedef struct ot_host {
  uint32_t type;
  int64_t ne[4];
  void *data;
  int alias;
} ot_host;

struct ot_entry;

/* One case: an entry's op on one shape and one type, with its inputs and parameters. */
typedef struct ot_case {
  const struct ot_entry *e;
  const ot_shape *s;
  uint32_t type;
  uint64_t seed;
  int n_in, n_out;
  ot_host in[OT_MAX_IN], out[OT_MAX_OUT];
  icl_attn_params attn;
  int64_t fast_rows; /* the token or query count that decides whether FAST precision takes another path */
} ot_case;

/* How an output is compared: NMSE on f32; exact (bit-identical to the reference, equal to the
 * float64 value); lse_select rows (selected entries exact, the last column |d| <= v + v/10 |ref|);
 * an attention pattern (NMSE, and zeros where the reference has zeros). */
enum { OT_NMSE, OT_EXACT, OT_LSE, OT_PATTERN };

typedef struct ot_op {
  const char *name;
  const char *dims;  /* names of the shape's n[] and f, comma-separated ("K,rows,tokens"), for messages */
  const char *flags; /* names of the shape's flag bits, comma-separated, bit 0 first ("w,in_place") */
  /* fills c->in, c->out and the parameters from c->s, c->type, c->seed; 0 when the shape does not
   * apply to the type (K not a whole number of blocks) */
  int (*gen)(ot_case *c);
  /* runs the op through the icl_op_* wrappers on views in[] (NULL for absent operands), out[] */
  int (*run)(icl_backend *be, const ot_case *c, const icl_dt *in[], const icl_dt *out[], icl_error *err);
  /* the float64 oracle: one double per output element */
  void (*oracle)(const ot_case *c, double *out[]);
  int cmp[OT_MAX_OUT];
  /* ICL_PRECISION_FAST takes another path on the CPU backend when c->fast_rows is below fast_max
   * (0: no other path; -1: below the backend's tile_min_tokens) */
  int64_t fast_max;
} ot_op;

/* Tolerances: the ref backend against the float64 oracle, the CPU levels and the Vulkan kernel
 * families against the ref backend's result, and the FAST-precision paths (the CPU's; Vulkan's intdot matmul). */
typedef struct ot_tols {
  ot_tol f64, cpu, vk, fast;
} ot_tols;

typedef struct ot_entry {
  const ot_op *op;
  const ot_shape *shapes;
  size_t n_shapes;
  const uint32_t *types; /* ICL_TYPE_COUNT-terminated; NULL = f32 */
  ot_tols tol;
} ot_entry;

#endif
