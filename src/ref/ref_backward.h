/* Float64 scalar references of the training ops, forward and backward: the oracle the CPU
 * backward kernels (src/train/train_ops*.c) are tested against, and the pieces finite-difference
 * checks differentiate. Layouts as in backend.h ([innermost, ...]); N = tokens = B*T, sequences
 * of T tokens one after another. Every backward ACCUMULATES into its gradient outputs (callers
 * zero them), and a NULL gradient output is skipped. */
#ifndef ICL_REF_BACKWARD_H
#define ICL_REF_BACKWARD_H

#include <stdint.h>

/* x[d, n] = E[d, ids[i]]; a negative id gives a zero row. */
void icl_refd_embed(const double *E, int64_t d, const int32_t *ids, int64_t n, double *x);
void icl_refd_embed_bwd(const int32_t *ids, const double *dx, int64_t d, int64_t n, double *dE);

/* y[R, n] = x[K, n] . W[K, R]^T + b (b [R] or NULL). */
void icl_refd_matmul(const double *W, const double *b, int64_t K, int64_t R, const double *x, int64_t n, double *y);
void icl_refd_matmul_bwd(const double *W, int64_t K, int64_t R, const double *x, int64_t n, const double *dy,
                         double *dW, double *db, double *dx);

/* LayerNorm (w, b [d]) and RMSNorm (w [d]) per row of d. */
void icl_refd_layer_norm(const double *x, const double *w, const double *b, int64_t d, int64_t n, double eps,
                         double *y);
void icl_refd_layer_norm_bwd(const double *x, const double *w, int64_t d, int64_t n, double eps, const double *dy,
                             double *dx, double *dw, double *db);
void icl_refd_rms_norm(const double *x, const double *w, int64_t d, int64_t n, double eps, double *y);
void icl_refd_rms_norm_bwd(const double *x, const double *w, int64_t d, int64_t n, double eps, const double *dy,
                           double *dx, double *dw);

/* Causal attention per sequence: q, k, v, z [hd, nh, T, B]; P [T(key), T(query), nh, B] or NULL. */
void icl_refd_attention(const double *q, const double *k, const double *v, int64_t hd, int64_t nh, int64_t T,
                        int64_t B, double scale, double *z, double *P);
void icl_refd_attention_bwd(const double *q, const double *k, const double *v, int64_t hd, int64_t nh, int64_t T,
                            int64_t B, double scale, const double *dz, double *dq, double *dk, double *dv);

/* Smeared key per head h: ks_j = s*k_j + (1-s)*k_{j-1} (j >= 1), ks_0 = k_0, s = sigmoid(alpha[h]). */
void icl_refd_smear(const double *k, const double *alpha, int64_t hd, int64_t nh, int64_t T, int64_t B, double *ks);
void icl_refd_smear_bwd(const double *k, const double *alpha, int64_t hd, int64_t nh, int64_t T, int64_t B,
                        const double *dks, double *dk, double *dalpha);

/* RoPE with NEOX pairing (dims i, i + n_rot/2) on x [hd, nh, T, B] at positions 0..T-1 of each
 * sequence, angle t * base^(-2i/n_rot); the backward rotates the gradient back. */
void icl_refd_rope(const double *x, int64_t hd, int64_t nh, int64_t T, int64_t B, int n_rot, double base, double *y);
void icl_refd_rope_bwd(const double *dy, int64_t hd, int64_t nh, int64_t T, int64_t B, int n_rot, double base,
                       double *dx);

/* Elementwise activations: gelu (tanh approximation) and relu. */
void icl_refd_gelu(const double *x, int64_t n, double *y);
void icl_refd_gelu_bwd(const double *x, int64_t n, const double *dy, double *dx);
void icl_refd_relu(const double *x, int64_t n, double *y);
void icl_refd_relu_bwd(const double *x, int64_t n, const double *dy, double *dx);

/* Softmax cross-entropy over rows of nv logits: loss = sum_i w_i * -log p_i[t_i] / sum_i w_i over
 * rows with t_i >= 0 (w = weights[i] or 1). Returns the loss (0 when nothing is scored);
 * dlogits (may be NULL) receives its gradient. */
double icl_refd_xent(const double *logits, int64_t nv, int64_t n, const int32_t *targets, const double *weights,
                     double *dlogits);

/* One optimizer step (icl_optim_args of backend.h, its constants given as doubles): AdamW (adam 1) or SGD with
 * momentum, in place on w, m1, m2 [n] from the gradient g [n]. */
void icl_refd_optim_update(double *w, const double *g, double *m1, double *m2, int64_t n, int adam, double lr,
                           double wd, double b1, double b2, double eps, double mom, double gscale, double c1, double c2);

#endif
