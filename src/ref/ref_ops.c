/* Reference ops other than quantization and attention: plain loops with double accumulation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref.h"

void icl_ref_get_rows(uint32_t t, const void *w, int64_t cols, const int32_t *ids, int64_t n, float *out) {
  size_t rb = icl_type_row_bytes(t, cols);
  for (int64_t i = 0; i < n; i++)
    icl_ref_dequant(t, (const uint8_t *)w + (size_t)ids[i] * rb, out + i * cols, cols);
}

/* One weight row is dequantized at a time and dotted with every activation row. */
void icl_ref_matmul(uint32_t t, const void *w, int64_t cols, int64_t rows, const float *x, int64_t n, float *y) {
  size_t rb = icl_type_row_bytes(t, cols);
  float *wr = malloc((size_t)cols * sizeof *wr);
  if (!wr) abort(); /* the oracle has no error path; a test without memory cannot continue */
  for (int64_t r = 0; r < rows; r++) {
    icl_ref_dequant(t, (const uint8_t *)w + (size_t)r * rb, wr, cols);
    for (int64_t i = 0; i < n; i++) {
      const float *xi = x + i * cols;
      double acc = 0.0;
      for (int64_t c = 0; c < cols; c++) acc += (double)wr[c] * (double)xi[c];
      y[i * rows + r] = (float)acc;
    }
  }
  free(wr);
}

void icl_ref_rms_norm(const float *x, const float *w, int64_t d, int64_t rows, float eps, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    double ss = 0.0;
    for (int64_t i = 0; i < d; i++) ss += (double)xr[i] * xr[i];
    double inv = 1.0 / sqrt(ss / (double)d + (double)eps);
    for (int64_t i = 0; i < d; i++) yr[i] = (float)(xr[i] * inv * (w ? w[i] : 1.0));
  }
}

void icl_ref_layer_norm(const float *x, const float *w, const float *b, int64_t d, int64_t rows, float eps, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < d; i++) mean += xr[i];
    mean /= (double)d;
    for (int64_t i = 0; i < d; i++) var += (xr[i] - mean) * (xr[i] - mean);
    double inv = 1.0 / sqrt(var / (double)d + (double)eps);
    for (int64_t i = 0; i < d; i++) yr[i] = (float)((xr[i] - mean) * inv * (w ? w[i] : 1.0) + (b ? b[i] : 0.0));
  }
}

/* Pair i of a head rotates by pos * base^(-2i/n_rot). NORMAL pairs dims (2i, 2i+1); NEOX pairs
 * (i, i + n_rot/2). Dims past n_rot are left as they are. */
void icl_ref_rope(float *x, int64_t hd, int64_t nh, int64_t n, const int32_t *pos, int n_rot, float base, int mode) {
  int half = n_rot / 2;
  for (int64_t t = 0; t < n; t++) {
    for (int64_t h = 0; h < nh; h++) {
      float *v = x + (t * nh + h) * hd;
      for (int i = 0; i < half; i++) {
        double theta = (double)pos[t] * pow((double)base, -2.0 * i / (double)n_rot);
        double c = cos(theta), s = sin(theta);
        int a = mode == ICL_ROPE_NEOX ? i : 2 * i, b = mode == ICL_ROPE_NEOX ? i + half : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = (float)(x0 * c - x1 * s);
        v[b] = (float)(x0 * s + x1 * c);
      }
    }
  }
}

void icl_ref_add(const float *a, const float *b, int64_t d, int64_t rows, int64_t b_rows, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *br = b + (b_rows == 1 ? 0 : r) * d;
    for (int64_t i = 0; i < d; i++) y[r * d + i] = a[r * d + i] + br[i];
  }
}

void icl_ref_mul(const float *a, const float *b, int64_t d, int64_t rows, int64_t b_rows, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *br = b + (b_rows == 1 ? 0 : r) * d;
    for (int64_t i = 0; i < d; i++) y[r * d + i] = a[r * d + i] * br[i];
  }
}

void icl_ref_scale(const float *x, float s, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

static double silu_d(double x) { return x / (1.0 + exp(-x)); }

/* GELU, tanh approximation: 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))). */
static double gelu_d(double x) {
  const double k = 0.7978845608028654; /* sqrt(2/pi) */
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

void icl_ref_silu(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)silu_d(x[i]);
}

void icl_ref_gelu(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)gelu_d(x[i]);
}

void icl_ref_relu(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void icl_ref_swiglu(const float *gate, const float *up, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)(silu_d(gate[i]) * up[i]);
}

void icl_ref_geglu(const float *gate, const float *up, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)(gelu_d(gate[i]) * up[i]);
}

void icl_ref_softmax(const float *x, int64_t d, int64_t rows, float *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *yr = y + r * d;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < d; i++)
      if (xr[i] > mx) mx = xr[i];
    if (mx == -INFINITY) { /* every entry masked: define the result as all zeros */
      for (int64_t i = 0; i < d; i++) yr[i] = 0.0f;
      continue;
    }
    for (int64_t i = 0; i < d; i++) sum += exp((double)xr[i] - mx);
    for (int64_t i = 0; i < d; i++) yr[i] = (float)(exp((double)xr[i] - mx) / sum);
  }
}

static float load_elem(uint32_t t, const void *p, int64_t i) {
  const uint8_t *b = p;
  if (t == ICL_TYPE_F32) {
    float f;
    memcpy(&f, b + 4 * i, 4);
    return f;
  }
  uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
  return t == ICL_TYPE_F16 ? icl_f16_to_f32(h) : icl_bf16_to_f32(h);
}

static void store_elem(uint32_t t, void *p, int64_t i, float f) {
  uint8_t *b = p;
  if (t == ICL_TYPE_F32) {
    memcpy(b + 4 * i, &f, 4);
    return;
  }
  uint16_t h = t == ICL_TYPE_F16 ? icl_f32_to_f16(f) : icl_f32_to_bf16(f);
  b[2 * i] = (uint8_t)(h & 0xff);
  b[2 * i + 1] = (uint8_t)(h >> 8);
}

/* F32, F16 and BF16 in any direction (via f32, which holds both 16-bit types exactly). */
void icl_ref_convert(uint32_t src_type, const void *src, uint32_t dst_type, void *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) store_elem(dst_type, dst, i, load_elem(src_type, src, i));
}

void icl_ref_argmax(const float *x, int64_t d, int64_t rows, int32_t *out) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    int64_t best = 0;
    for (int64_t i = 1; i < d; i++)
      if (xr[i] > xr[best]) best = i;
    out[r] = (int32_t)best;
  }
}

void icl_ref_lse_select(const float *x, int64_t d, int64_t rows, const int32_t *ids, int64_t k, float *out) {
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * d;
    float *o = out + r * (k + 1);
    double mx = -INFINITY, s = 0.0;
    for (int64_t i = 0; i < d; i++) mx = xr[i] > mx ? xr[i] : mx;
    for (int64_t i = 0; mx > -INFINITY && i < d; i++) s += exp((double)xr[i] - mx);
    for (int64_t j = 0; j < k; j++) o[j] = xr[ids[j]];
    o[k] = mx > -INFINITY ? (float)(mx + log(s)) : -INFINITY;
  }
}

double icl_nmse(const float *ref, const float *got, int64_t n) {
  double err = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)ref[i] - (double)got[i];
    err += e * e;
    norm += (double)ref[i] * ref[i];
  }
  if (norm == 0.0) return err == 0.0 ? 0.0 : INFINITY;
  return err / norm;
}
