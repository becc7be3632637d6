/* Shape- and type-checking wrappers around the backend ops table. The forward pass calls these;
 * each checks its operands, fails with a message naming the op, the operand and the expected
 * versus actual shape, and otherwise calls be->ops->X (backends then trust the shapes). */
#ifndef ICL_OPS_H
#define ICL_OPS_H

#include "backend.h"

int icl_op_get_rows(icl_backend *be, const icl_dt *w, const icl_dt *ids, const icl_dt *out, icl_error *err);
int icl_op_matmul(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *y, icl_error *err);
/* y += x . w^T: the backend's matmul_add, or matmul into t (scratch shaped like y) then add(y, t) (same bits). */
int icl_op_matmul_add(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *t, const icl_dt *y,
                      icl_error *err);
/* y[i] = x . w[i]^T for i < count (1..ICL_MATMUL_GROUP_MAX): the backend's matmul_group, or count matmuls. */
int icl_op_matmul_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *y,
                        icl_error *err);
int icl_op_rms_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y, icl_error *err);
int icl_op_layer_norm(icl_backend *be, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps, const icl_dt *y,
                      icl_error *err);
int icl_op_rope(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
/* y = act(x . w_gate^T) * (x . w_up^T) (act ICL_GLU_SILU / GELU): the backend's matmul_glu, or matmul_group into
 * (y, u) then swiglu / geglu (same bits); u is scratch shaped like y. */
int icl_op_matmul_glu(icl_backend *be, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *x, const icl_dt *y,
                      const icl_dt *u, int act, icl_error *err);
/* rope of q and of k at the same positions: the backend's rope_pair, or rope twice (same bits). */
int icl_op_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *pos, int n_rot, float base,
                     int mode, icl_error *err);
/* y[i] = rms_norm(x, nw, eps) . w[i]^T: the backend's rms_matmul_group, or rms_norm into h then matmul_group (same
 * bits); h is scratch shaped like x, possibly left unwritten. */
int icl_op_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                            int count, const icl_dt *w, const icl_dt *y, icl_error *err);
/* y = act(n . w_gate^T) * (n . w_up^T), n = rms_norm(x, nw, eps): the backend's rms_matmul_glu, or rms_norm into h
 * then matmul_glu (same bits); h and u scratch. */
int icl_op_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_dt *nw, float eps, const icl_dt *h,
                          const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y, const icl_dt *u, int act,
                          icl_error *err);
/* y += rms_norm(x, w, eps): the backend's rms_norm_add, or rms_norm in place in x then add (same bits); x may be left
 * normed. */
int icl_op_rms_norm_add(icl_backend *be, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *y,
                        icl_error *err);
/* The post-norm add folded into the next norm's consumer: t = x + rms_norm(pa->o, pa->w, eps) into pa->t, then
 * rms_matmul_group of t: the backend's add_rms_matmul_group, or rms_norm(o) in place, add(x, o, t) then
 * rms_matmul_group (same bits); o may be left normed. */
int icl_op_add_rms_matmul_group(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                                const icl_dt *h, int count, const icl_dt *w, const icl_dt *y, icl_error *err);
/* likewise with rms_matmul_glu as the consumer (the backend's add_rms_matmul_glu). */
int icl_op_add_rms_matmul_glu(icl_backend *be, const icl_dt *x, const icl_post_add *pa, const icl_dt *nw, float eps,
                              const icl_dt *h, const icl_dt *w_gate, const icl_dt *w_up, const icl_dt *y,
                              const icl_dt *u, int act, icl_error *err);
/* per-head rms_norm of q (weight qw) and k (kw) in place, then rope of both: the backend's rms_rope_pair, or
 * rms_norm twice then rope_pair (same bits). */
int icl_op_rms_rope_pair(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *qw, const icl_dt *kw,
                         float eps, const icl_dt *pos, int n_rot, float base, int mode, icl_error *err);
int icl_op_attention(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                     const icl_dt *mask, const icl_dt *out, const icl_dt *pattern, icl_error *err);
int icl_op_add(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int icl_op_mul(icl_backend *be, const icl_dt *a, const icl_dt *b, const icl_dt *y, icl_error *err);
int icl_op_scale(icl_backend *be, const icl_dt *x, float s, const icl_dt *y, icl_error *err);
int icl_op_silu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int icl_op_gelu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int icl_op_relu(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int icl_op_swiglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
int icl_op_geglu(icl_backend *be, const icl_dt *gate, const icl_dt *up, const icl_dt *y, icl_error *err);
int icl_op_softmax(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int icl_op_convert(icl_backend *be, const icl_dt *x, const icl_dt *y, icl_error *err);
int icl_op_argmax(icl_backend *be, const icl_dt *x, const icl_dt *out, icl_error *err);
int icl_op_lse_select(icl_backend *be, const icl_dt *x, const icl_dt *ids, const icl_dt *out, icl_error *err);
int icl_op_copy2d(icl_backend *be, const icl_dt *src, int64_t src_off, int64_t src_stride, const icl_dt *dst,
                  int64_t dst_off, int64_t dst_stride, int64_t rows, int64_t cols, icl_error *err);
int icl_op_fill2d(icl_backend *be, const icl_dt *dst, int64_t off, int64_t stride, int64_t rows, int64_t cols,
                  float value, icl_error *err);

/* Writes "[a, b, c, d]" (the view's ne) into buf; returns buf. */
const char *icl_dt_shape_str(const icl_dt *t, char *buf, size_t n);

/* Training entries (ops_train.c; backend.h "training" says what each computes): checked, then the backend's op,
 * or ICL_EUNSUPPORTED where the backend has none. */
/* attention_seqs: the backend's, or attention once per sequence (same bits). */
int icl_op_attention_seqs(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_attn_params *p,
                          const icl_dt *out, const icl_dt *pattern, icl_error *err);
int icl_op_matmul_bwd(icl_backend *be, const icl_dt *w, const icl_dt *x, const icl_dt *dy, const icl_dt *dw,
                      const icl_dt *dx, int write, icl_error *err);
/* matmul_bwd_group: the backend's, or count matmul_bwd calls in turn (same bits). */
int icl_op_matmul_bwd_group(icl_backend *be, int count, const icl_dt *w, const icl_dt *x, const icl_dt *dy,
                            const icl_dt *dw, const icl_dt *dx, int write, icl_error *err);
/* norm_fwd: y = layer_norm (rms 0) or rms_norm (rms 1) of x, and x's statistics [2, rows] for norm_bwd's
 * stats_in: the backend's, or the inference op then norm_bwd's statistics alone (same bits). */
int icl_op_norm_fwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, const icl_dt *b, float eps,
                    const icl_dt *y, const icl_dt *stats, icl_error *err);
/* norm_bwd: stats_in 1 reads stats as an earlier norm_bwd on the same x, w and eps wrote them (not recomputed). */
int icl_op_norm_bwd(icl_backend *be, int rms, const icl_dt *x, const icl_dt *w, float eps, const icl_dt *dy,
                    const icl_dt *dx, const icl_dt *dw, const icl_dt *db, const icl_dt *stats, int stats_in,
                    icl_error *err);
int icl_op_attention_bwd(icl_backend *be, const icl_dt *q, const icl_dt *k, const icl_dt *v, const icl_dt *P,
                         const icl_dt *dz, float scale, const icl_dt *dq, const icl_dt *dk, const icl_dt *dv,
                         icl_error *err);
int icl_op_rope_bwd(icl_backend *be, const icl_dt *x, const icl_dt *pos, int n_rot, float base, icl_error *err);
int icl_op_gelu_bwd(icl_backend *be, const icl_dt *x, const icl_dt *dy, const icl_dt *dx, icl_error *err);
int icl_op_relu_bwd(icl_backend *be, const icl_dt *y, const icl_dt *dy, const icl_dt *dx, icl_error *err);
int icl_op_embed(icl_backend *be, const icl_dt *e, const icl_dt *ids, const icl_dt *x, icl_error *err);
int icl_op_embed_bwd(icl_backend *be, const icl_dt *ids, const icl_dt *dx, const icl_dt *de, icl_error *err);
int icl_op_sum_rows(icl_backend *be, const icl_dt *src, const icl_dt *dst, icl_error *err);
int icl_op_smear(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *ks, icl_error *err);
int icl_op_smear_bwd(icl_backend *be, const icl_dt *k, const icl_dt *alpha, const icl_dt *dks, const icl_dt *dk,
                     const icl_dt *dalpha, icl_error *err);
int icl_op_xent(icl_backend *be, const icl_dt *logits, const icl_dt *targets, const icl_dt *weights,
                const icl_dt *probs, const icl_dt *dlogits, double *loss, icl_error *err);
/* run_split: the backend's, or the n items in turn on be itself. */
int icl_op_run_split(icl_backend *be, int n, icl_split_fn fn, void *ctx, icl_error *err);
int icl_op_optim_update(icl_backend *be, const icl_dt *w, const icl_dt *g, const icl_dt *m1, const icl_dt *m2,
                        const icl_optim_args *a, icl_error *err);

#endif
