/* Float64 references of the training ops (see ref_backward.h): plain loops, the textbook
 * derivative of each forward, no threads. */
#include <math.h>
#include <stdlib.h>

#include "ref_backward.h"

void icl_refd_embed(const double *E, int64_t d, const int32_t *ids, int64_t n, double *x) {
  for (int64_t i = 0; i < n; i++)
    for (int64_t c = 0; c < d; c++) x[i * d + c] = ids[i] >= 0 ? E[ids[i] * d + c] : 0.0;
}

void icl_refd_embed_bwd(const int32_t *ids, const double *dx, int64_t d, int64_t n, double *dE) {
  for (int64_t i = 0; i < n; i++)
    if (ids[i] >= 0)
      for (int64_t c = 0; c < d; c++) dE[ids[i] * d + c] += dx[i * d + c];
}

void icl_refd_matmul(const double *W, const double *b, int64_t K, int64_t R, const double *x, int64_t n, double *y) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t r = 0; r < R; r++) {
      double s = b ? b[r] : 0.0;
      for (int64_t c = 0; c < K; c++) s += W[r * K + c] * x[t * K + c];
      y[t * R + r] = s;
    }
}

void icl_refd_matmul_bwd(const double *W, int64_t K, int64_t R, const double *x, int64_t n, const double *dy,
                         double *dW, double *db, double *dx) {
  for (int64_t t = 0; t < n; t++)
    for (int64_t r = 0; r < R; r++) {
      double g = dy[t * R + r];
      if (db) db[r] += g;
      for (int64_t c = 0; c < K; c++) {
        if (dW) dW[r * K + c] += g * x[t * K + c];
        if (dx) dx[t * K + c] += g * W[r * K + c];
      }
    }
}

/* Mean and 1/sqrt(var + eps) of one row. */
static void row_stats(const double *x, int64_t d, double eps, double *mean, double *rstd) {
  double m = 0.0, v = 0.0;
  for (int64_t c = 0; c < d; c++) m += x[c];
  m /= (double)d;
  for (int64_t c = 0; c < d; c++) v += (x[c] - m) * (x[c] - m);
  *mean = m;
  *rstd = 1.0 / sqrt(v / (double)d + eps);
}

void icl_refd_layer_norm(const double *x, const double *w, const double *b, int64_t d, int64_t n, double eps,
                         double *y) {
  for (int64_t t = 0; t < n; t++) {
    double m, r;
    row_stats(x + t * d, d, eps, &m, &r);
    for (int64_t c = 0; c < d; c++) y[t * d + c] = (x[t * d + c] - m) * r * (w ? w[c] : 1.0) + (b ? b[c] : 0.0);
  }
}

void icl_refd_layer_norm_bwd(const double *x, const double *w, int64_t d, int64_t n, double eps, const double *dy,
                             double *dx, double *dw, double *db) {
  for (int64_t t = 0; t < n; t++) {
    const double *xr = x + t * d, *g = dy + t * d;
    double m, r, mg = 0.0, mgx = 0.0;
    row_stats(xr, d, eps, &m, &r);
    for (int64_t c = 0; c < d; c++) {
      double gh = g[c] * (w ? w[c] : 1.0), xh = (xr[c] - m) * r;
      mg += gh;
      mgx += gh * xh;
      if (dw) dw[c] += g[c] * xh;
      if (db) db[c] += g[c];
    }
    mg /= (double)d;
    mgx /= (double)d;
    for (int64_t c = 0; c < d; c++)
      if (dx) dx[t * d + c] += r * (g[c] * (w ? w[c] : 1.0) - mg - (xr[c] - m) * r * mgx);
  }
}

static double rms_rstd(const double *x, int64_t d, double eps) {
  double s = 0.0;
  for (int64_t c = 0; c < d; c++) s += x[c] * x[c];
  return 1.0 / sqrt(s / (double)d + eps);
}

void icl_refd_rms_norm(const double *x, const double *w, int64_t d, int64_t n, double eps, double *y) {
  for (int64_t t = 0; t < n; t++) {
    double r = rms_rstd(x + t * d, d, eps);
    for (int64_t c = 0; c < d; c++) y[t * d + c] = x[t * d + c] * r * (w ? w[c] : 1.0);
  }
}

void icl_refd_rms_norm_bwd(const double *x, const double *w, int64_t d, int64_t n, double eps, const double *dy,
                           double *dx, double *dw) {
  for (int64_t t = 0; t < n; t++) {
    const double *xr = x + t * d, *g = dy + t * d;
    double r = rms_rstd(xr, d, eps), s = 0.0;
    for (int64_t c = 0; c < d; c++) {
      s += g[c] * (w ? w[c] : 1.0) * xr[c];
      if (dw) dw[c] += g[c] * xr[c] * r;
    }
    for (int64_t c = 0; c < d; c++)
      if (dx) dx[t * d + c] += r * g[c] * (w ? w[c] : 1.0) - xr[c] * r * r * r * s / (double)d;
  }
}

/* Offset of row (token t of sequence b, head h) in a [hd, nh, T, B] tensor. */
static int64_t at(int64_t hd, int64_t nh, int64_t T, int64_t b, int64_t t, int64_t h) {
  return ((b * T + t) * nh + h) * hd;
}

static double dotd(const double *a, const double *b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

/* Softmaxed causal scores of query i (keys 0..i) into p[0..i]. */
static void attn_probs(const double *q, const double *k, int64_t hd, int64_t nh, int64_t T, int64_t b, int64_t h,
                       int64_t i, double scale, double *p) {
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j <= i; j++) {
    p[j] = scale * dotd(q + at(hd, nh, T, b, i, h), k + at(hd, nh, T, b, j, h), hd);
    if (p[j] > mx) mx = p[j];
  }
  for (int64_t j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
  for (int64_t j = 0; j <= i; j++) p[j] /= sum;
}

void icl_refd_attention(const double *q, const double *k, const double *v, int64_t hd, int64_t nh, int64_t T,
                        int64_t B, double scale, double *z, double *P) {
  double *p = malloc((size_t)T * sizeof *p);
  if (!p) abort();
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < nh; h++)
      for (int64_t i = 0; i < T; i++) {
        attn_probs(q, k, hd, nh, T, b, h, i, scale, p);
        double *zr = z + at(hd, nh, T, b, i, h);
        for (int64_t e = 0; e < hd; e++) zr[e] = 0.0;
        for (int64_t j = 0; j <= i; j++)
          for (int64_t e = 0; e < hd; e++) zr[e] += p[j] * v[at(hd, nh, T, b, j, h) + e];
        if (P)
          for (int64_t j = 0; j < T; j++) P[((b * nh + h) * T + i) * T + j] = j <= i ? p[j] : 0.0;
      }
  free(p);
}

/* One query row of the attention backward: dP = dz.v, dS = P (dP - sum P dP), then dq, dk, dv. */
static void attn_bwd_row(const double *q, const double *k, const double *v, int64_t hd, int64_t nh, int64_t T,
                         int64_t b, int64_t h, int64_t i, double scale, const double *dz, double *dq, double *dk,
                         double *dv, double *p, double *dp) {
  attn_probs(q, k, hd, nh, T, b, h, i, scale, p);
  int64_t oi = at(hd, nh, T, b, i, h);
  double pdp = 0.0;
  for (int64_t j = 0; j <= i; j++) {
    dp[j] = dotd(dz + oi, v + at(hd, nh, T, b, j, h), hd);
    pdp += p[j] * dp[j];
  }
  for (int64_t j = 0; j <= i; j++) {
    int64_t oj = at(hd, nh, T, b, j, h);
    double ds = p[j] * (dp[j] - pdp) * scale;
    for (int64_t e = 0; e < hd; e++) {
      if (dv) dv[oj + e] += p[j] * dz[oi + e];
      if (dq) dq[oi + e] += ds * k[oj + e];
      if (dk) dk[oj + e] += ds * q[oi + e];
    }
  }
}

void icl_refd_attention_bwd(const double *q, const double *k, const double *v, int64_t hd, int64_t nh, int64_t T,
                            int64_t B, double scale, const double *dz, double *dq, double *dk, double *dv) {
  double *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
  if (!p || !dp) abort();
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < nh; h++)
      for (int64_t i = 0; i < T; i++) attn_bwd_row(q, k, v, hd, nh, T, b, h, i, scale, dz, dq, dk, dv, p, dp);
  free(p);
  free(dp);
}

static double sigm(double a) { return 1.0 / (1.0 + exp(-a)); }

void icl_refd_smear(const double *k, const double *alpha, int64_t hd, int64_t nh, int64_t T, int64_t B, double *ks) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < nh; h++) {
        double s = sigm(alpha[h]);
        int64_t o = at(hd, nh, T, b, t, h), op = t > 0 ? at(hd, nh, T, b, t - 1, h) : o;
        for (int64_t e = 0; e < hd; e++) ks[o + e] = t > 0 ? s * k[o + e] + (1.0 - s) * k[op + e] : k[o + e];
      }
}

void icl_refd_smear_bwd(const double *k, const double *alpha, int64_t hd, int64_t nh, int64_t T, int64_t B,
                        const double *dks, double *dk, double *dalpha) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < nh; h++) {
        double s = t > 0 ? sigm(alpha[h]) : 1.0;
        int64_t o = at(hd, nh, T, b, t, h), op = t > 0 ? at(hd, nh, T, b, t - 1, h) : o;
        for (int64_t e = 0; e < hd; e++) {
          if (dk) dk[o + e] += s * dks[o + e];
          if (t == 0) continue;
          if (dk) dk[op + e] += (1.0 - s) * dks[o + e];
          if (dalpha) dalpha[h] += s * (1.0 - s) * dks[o + e] * (k[o + e] - k[op + e]);
        }
      }
}

/* Rotates pairs of x by sign * angle into y (y += for the backward, = for the forward). */
static void rope_apply(const double *x, int64_t hd, int64_t nh, int64_t T, int64_t B, int n_rot, double base,
                       double sign, int accumulate, double *y) {
  int half = n_rot / 2;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < nh; h++) {
        int64_t o = at(hd, nh, T, b, t, h);
        for (int64_t e = 0; e < hd; e++)
          if (!accumulate) y[o + e] = x[o + e];
          else if (e >= n_rot) y[o + e] += x[o + e];
        for (int i = 0; i < half; i++) {
          double th = sign * (double)t * pow(base, -2.0 * i / (double)n_rot), c = cos(th), s = sin(th);
          double x0 = x[o + i], x1 = x[o + i + half];
          if (accumulate) y[o + i] += x0 * c - x1 * s, y[o + i + half] += x0 * s + x1 * c;
          else y[o + i] = x0 * c - x1 * s, y[o + i + half] = x0 * s + x1 * c;
        }
      }
}

void icl_refd_rope(const double *x, int64_t hd, int64_t nh, int64_t T, int64_t B, int n_rot, double base, double *y) {
  rope_apply(x, hd, nh, T, B, n_rot, base, 1.0, 0, y);
}

void icl_refd_rope_bwd(const double *dy, int64_t hd, int64_t nh, int64_t T, int64_t B, int n_rot, double base,
                       double *dx) {
  rope_apply(dy, hd, nh, T, B, n_rot, base, -1.0, 1, dx);
}

static const double GELU_K = 0.7978845608028654; /* sqrt(2/pi) */

void icl_refd_gelu(const double *x, int64_t n, double *y) {
  for (int64_t i = 0; i < n; i++) y[i] = 0.5 * x[i] * (1.0 + tanh(GELU_K * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
}

void icl_refd_gelu_bwd(const double *x, int64_t n, const double *dy, double *dx) {
  for (int64_t i = 0; i < n; i++) {
    double u = GELU_K * (x[i] + 0.044715 * x[i] * x[i] * x[i]), th = tanh(u);
    double du = GELU_K * (1.0 + 3.0 * 0.044715 * x[i] * x[i]);
    dx[i] += dy[i] * (0.5 * (1.0 + th) + 0.5 * x[i] * (1.0 - th * th) * du);
  }
}

void icl_refd_relu(const double *x, int64_t n, double *y) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0 ? x[i] : 0.0;
}

void icl_refd_relu_bwd(const double *x, int64_t n, const double *dy, double *dx) {
  for (int64_t i = 0; i < n; i++) dx[i] += x[i] > 0.0 ? dy[i] : 0.0;
}

/* -log softmax(row)[t] and, when g is given, its gradient scaled by wgt into g. */
static double xent_row(const double *row, int64_t nv, int32_t t, double wgt, double *g) {
  double mx = -INFINITY, sum = 0.0;
  for (int64_t c = 0; c < nv; c++) mx = row[c] > mx ? row[c] : mx;
  for (int64_t c = 0; c < nv; c++) sum += exp(row[c] - mx);
  if (g)
    for (int64_t c = 0; c < nv; c++) g[c] += wgt * (exp(row[c] - mx) / sum - (c == t ? 1.0 : 0.0));
  return -(row[t] - mx - log(sum));
}

double icl_refd_xent(const double *logits, int64_t nv, int64_t n, const int32_t *targets, const double *weights,
                     double *dlogits) {
  double wsum = 0.0, loss = 0.0;
  for (int64_t i = 0; i < n; i++)
    if (targets[i] >= 0) wsum += weights ? weights[i] : 1.0;
  if (wsum <= 0.0) return 0.0;
  for (int64_t i = 0; i < n; i++) {
    if (targets[i] < 0) continue;
    double w = (weights ? weights[i] : 1.0) / wsum;
    loss += w * xent_row(logits + i * nv, nv, targets[i], w, dlogits ? dlogits + i * nv : NULL);
  }
  return loss;
}

void icl_refd_optim_update(double *w, const double *g, double *m1, double *m2, int64_t n, int adam, double lr,
                           double wd, double b1, double b2, double eps, double mom, double gscale, double c1, double c2) {
  for (int64_t i = 0; i < n; i++) {
    double gi = g[i] * gscale, step;
    if (adam) {
      m1[i] = b1 * m1[i] + (1.0 - b1) * gi;
      m2[i] = b2 * m2[i] + (1.0 - b2) * gi * gi;
      step = (m1[i] / c1) / (sqrt(m2[i] / c2) + eps);
    } else {
      m1[i] = mom * m1[i] + gi;
      step = m1[i];
    }
    w[i] -= lr * (step + wd * w[i]);
  }
}
