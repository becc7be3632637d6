/* The forward pass of one chunk, read top to bottom, for every architecture in the table (arch.c).
 * Shapes are in backend order: [innermost, ..., tokens]. Hook points are announced where TransformerLens
 * places them (docs/hooks.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "ops.h"

#define TRY(x)                  \
  do {                          \
    int rc_ = (x);              \
    if (rc_) return rc_;        \
  } while (0)

#define HOOK(layer, hp, view)                               \
  do {                                                      \
    if (hk) TRY(icl_hook_point(hk, layer, hp, view, err)); \
  } while (0)

/* A view of t's buffer with a new shape, starting `elems` f32 elements further. */
static icl_dt view3(const icl_dt *t, int64_t elems, int64_t ne0, int64_t ne1, int64_t ne2) {
  icl_dt v = *t;
  v.offset += (size_t)elems * 4;
  v.ne[0] = ne0;
  v.ne[1] = ne1;
  v.ne[2] = ne2;
  v.ne[3] = 1;
  return v;
}

static int present(const icl_dt *t) { return t->buf != NULL; }

/* Whether an RMS norm with weight w can be folded into what consumes it: nothing looks at its output (hook point
 * hp of layer il: no capture, intervention or callback). */
static int fold_norm(const icl_model *m, const icl_dt *w, struct icl_hookctx *hk, int il, int hp) {
  return m->feat.norm == ICL_NORM_RMS && present(w) && !(hk && icl_hook_wants(hk, il, hp));
}

/* Gemma's post-norm residual adds fold into the next RMS norm's consumer (add_rms_matmul_*: the ln2-normed gate/up,
 * the next layer's ln1-normed q/k/v) on one token (a chunk would take the unfused fallback there, a dispatch more
 * than rms_norm_add). That op writes the new residual to a->x2 (every workgroup still reads the old one), and the two
 * buffers then swap (swap_resid), so a->x is the residual throughout. The sublayer keeps the post-add pending
 * (*pend: its post-norm weight, the output in a->o) only where nothing looks at the points it bypasses. */
static void swap_resid(icl_acts *a) {
  icl_dt t = a->x;
  a->x = a->x2;
  a->x2 = t;
}

/* Whether the hook context wants any of the n points at layer il. */
static int wants_any(struct icl_hookctx *hk, int il, const int *hp, int n) {
  for (int i = 0; hk && i < n; i++)
    if (icl_hook_wants(hk, il, hp[i])) return 1;
  return 0;
}

/* y += b when the model has the bias b (broadcast over rows). */
static int add_bias(icl_backend *be, const icl_dt *y, const icl_dt *b, icl_error *err) {
  return present(b) ? icl_op_add(be, y, b, y, err) : ICL_OK;
}

/* The model's norm: RMSNorm, LayerNorm (weight, optional bias) or none (y = x). */
static int norm(const icl_model *m, const icl_dt *x, const icl_dt *w, const icl_dt *b, const icl_dt *y,
                icl_error *err) {
  switch (m->feat.norm) {
  case ICL_NORM_LAYER: return icl_op_layer_norm(m->be, x, w, present(b) ? b : NULL, m->hp.eps, y, err);
  case ICL_NORM_NONE: return icl_op_scale(m->be, x, 1.0f, y, err);
  default: return icl_op_rms_norm(m->be, x, w, m->hp.eps, y, err);
  }
}

/* Smeared keys (icl-attn): k'_j = keep*k_j + prev*k_{j-1} per head, on the chunk's keys in the cache. The key
 * before the chunk's first is the raw key kept from the previous chunk (s->k_last); position 0 has none and
 * smears with itself (k'_0 = k_0). z is free scratch here. */
static int smear_keys(icl_session *s, int il, int64_t n, icl_error *err) {
  icl_backend *be = s->m->be;
  const icl_layer *L = &s->m->layers[il];
  int64_t kd = (int64_t)s->m->hp.n_head_kv * s->m->hp.head_dim, p0 = s->n_past;
  icl_dt K = view3(&s->k[il], p0 * kd, kd, n, 1);   /* raw keys of the chunk, smeared in place */
  icl_dt Kp = view3(&s->a.z, 0, kd, n, 1);          /* raw key of the previous position */
  icl_dt last = view3(&s->k_last, il * kd, kd, 1, 1);
  TRY(icl_op_copy2d(be, p0 > 0 ? &last : &K, 0, kd, &Kp, 0, kd, 1, kd, err));
  TRY(icl_op_copy2d(be, &K, 0, kd, &Kp, kd, kd, n - 1, kd, err));
  TRY(icl_op_copy2d(be, &K, (n - 1) * kd, kd, &last, 0, kd, 1, kd, err));
  TRY(icl_op_mul(be, &K, &L->smear_keep, &K, err));
  TRY(icl_op_mul(be, &Kp, &L->smear_prev, &Kp, err));
  return icl_op_add(be, &K, &Kp, &K, err);
}

/* Attention sublayer: x += attn(norm(x)). */
static int attention_block(icl_session *s, int il, int64_t n, struct icl_hookctx *hk, const icl_dt **pend,
                           icl_error *err) {
  icl_model *m = s->m;
  icl_backend *be = m->be;
  const icl_hparams *hp = &m->hp;
  const icl_layer *L = &m->layers[il];
  icl_acts *a = &s->a;
  int64_t d = hp->n_embd, nh = hp->n_head, nkv = hp->n_head_kv, hd = hp->head_dim, p0 = s->n_past;

  icl_dt X = view3(&a->x, 0, d, n, 1);      /* residual */
  icl_dt H = view3(&a->h, 0, d, n, 1);      /* normed input */
  icl_dt Q = view3(&a->q, 0, hd, nh, n);    /* queries */
  icl_dt Z = view3(&a->z, 0, hd, nh, n);    /* per-head attention output */
  icl_dt O = view3(&a->o, 0, d, n, 1);      /* sublayer output */
  icl_dt K = view3(&s->k[il], p0 * nkv * hd, hd, nkv, n); /* this chunk's keys in the cache */
  icl_dt V = view3(&s->v[il], p0 * nkv * hd, hd, nkv, n);
  icl_dt Kall = view3(&s->k[il], 0, hd, nkv, p0 + n);
  icl_dt Vall = view3(&s->v[il], 0, hd, nkv, p0 + n);
  icl_dt P = view3(&a->pos, 0, n, 1, 1);

  if (!*pend) HOOK(il, HP_RESID_PRE, &X); /* pending: nothing looks at it (the previous layer checked) */
  icl_dt Q2 = view3(&Q, 0, hd * nh, n, 1), K2 = view3(&K, 0, hd * nkv, n, 1), V2 = view3(&V, 0, hd * nkv, n, 1);
  icl_dt Wqkv[3] = {L->wq, L->wk, L->wv}, Yqkv[3] = {Q2, K2, V2};
  if (*pend) { /* the previous layer's post-FFN norm + add, then ln1, in the q/k/v group */
    icl_dt T = view3(&a->x2, 0, d, n, 1);
    icl_post_add pa = {&O, *pend, &T};
    TRY(icl_op_add_rms_matmul_group(be, &X, &pa, &L->attn_norm, hp->eps, &H, 3, Wqkv, Yqkv, err));
    swap_resid(a), *pend = NULL;
    X = view3(&a->x, 0, d, n, 1);
  } else if (fold_norm(m, &L->attn_norm, hk, il, HP_LN1)) { /* nothing looks at ln1: the norm inside the q/k/v group */
    TRY(icl_op_rms_matmul_group(be, &X, &L->attn_norm, hp->eps, &H, 3, Wqkv, Yqkv, err));
  } else {
    TRY(norm(m, &X, &L->attn_norm, &L->attn_norm_b, &H, err));
    HOOK(il, HP_LN1, &H);
    TRY(icl_op_matmul_group(be, 3, Wqkv, &H, Yqkv, err));
  }
  TRY(add_bias(be, &Q2, &L->bq, err));
  TRY(add_bias(be, &K2, &L->bk, err));
  TRY(add_bias(be, &V2, &L->bv, err));
  int rope = m->feat.pos == ICL_POS_ROPE;
  int qk_fused = present(&L->q_norm) && rope && !m->feat.smeared_key &&
                 !(hk && (icl_hook_wants(hk, il, HP_Q) || icl_hook_wants(hk, il, HP_K)));
  if (qk_fused) { /* nothing looks at q or k before RoPE: the per-head norms and RoPE in one op */
    TRY(icl_op_rms_rope_pair(be, &Q, &K, &L->q_norm, &L->k_norm, hp->eps, &P, hp->n_rot, L->rope_base,
                             m->arch->rope_mode, err));
  } else if (present(&L->q_norm)) { /* per-head RMSNorm: rows of head_dim */
    icl_dt Qh = view3(&Q, 0, hd, nh * n, 1), Kh = view3(&K, 0, hd, nkv * n, 1);
    TRY(icl_op_rms_norm(be, &Qh, &L->q_norm, hp->eps, &Qh, err));
    TRY(icl_op_rms_norm(be, &Kh, &L->k_norm, hp->eps, &Kh, err));
  }
  if (!qk_fused) HOOK(il, HP_Q, &Q);
  if (!qk_fused && !m->feat.smeared_key) HOOK(il, HP_K, &K);
  HOOK(il, HP_V, &V);
  if (rope && !qk_fused) {
    TRY(icl_op_rope_pair(be, &Q, &K, &P, hp->n_rot, L->rope_base, m->arch->rope_mode, err));
  }
  if (m->feat.smeared_key) { /* hook_k is the smeared key (after RoPE when both are on) */
    TRY(smear_keys(s, il, n, err));
    HOOK(il, HP_K, &K);
  }

  icl_attn_params ap = {.n_past = (int32_t)p0, .scale = m->feat.attn_scale, .window = L->window, .softcap = 0};
  icl_dt pattern, *pat = NULL;
  if (hk && icl_hook_needs_pattern(hk, il)) {
    pattern = (icl_dt){.buf = a->pattern_buf, .type = ICL_TYPE_F32, .ne = {p0 + n, n, nh, 1}};
    pat = &pattern;
  }
  const icl_dt *mask = NULL;
  if (hk) TRY(icl_hook_mask(hk, il, &mask, err));
  TRY(icl_op_attention(be, &Q, &Kall, &Vall, &ap, mask, &Z, pat, err));
  if (pat) HOOK(il, HP_PATTERN, pat);
  HOOK(il, HP_Z, &Z);

  icl_dt Z2 = view3(&Z, 0, hd * nh, n, 1);
  if (hk && icl_hook_wants(hk, il, HP_RESULT)) {
    /* per-head contributions: W_O applied to z with the other heads zeroed (without W_O: that masked z);
     * attn_out = their sum (+ the W_O bias) */
    icl_dt R = view3(&a->result, 0, d, nh, n);
    icl_dt ZM = {.buf = a->zmask_buf, .type = ICL_TYPE_F32, .ne = {hd * nh, n, 1, 1}};
    for (int64_t h = 0; h < nh; h++) {
      TRY(icl_op_fill2d(be, &ZM, 0, hd * nh, n, hd * nh, 0.0f, err));
      TRY(icl_op_copy2d(be, &Z2, h * hd, hd * nh, &ZM, h * hd, hd * nh, n, hd, err));
      if (present(&L->wo)) TRY(icl_op_matmul(be, &L->wo, &ZM, &O, err));
      TRY(icl_op_copy2d(be, present(&L->wo) ? &O : &ZM, 0, d, &R, h * d, d * nh, n, d, err));
    }
    HOOK(il, HP_RESULT, &R);
  }
  int result_path = hk && icl_hook_modifies(hk, il, HP_RESULT);
  if (!result_path && present(&L->wo) && !present(&L->bo) && !present(&L->post_attn_norm) &&
      !(hk && icl_hook_wants(hk, il, HP_ATTN_OUT))) { /* nothing looks at attn_out: x += W_O z in one op */
    TRY(icl_op_matmul_add(be, &L->wo, &Z2, &O, &X, err));
    HOOK(il, HP_RESID_MID, &X);
    return ICL_OK;
  }
  if (result_path) { /* the (changed) per-head results make the output */
    icl_dt R = view3(&a->result, 0, d, nh, n);
    TRY(icl_op_fill2d(be, &O, 0, d, n, d, 0.0f, err));
    for (int64_t h = 0; h < nh; h++) {
      icl_dt T = view3(&a->h, 0, d, n, 1); /* H is free again: reuse as scratch */
      TRY(icl_op_copy2d(be, &R, h * d, d * nh, &T, 0, d, n, d, err));
      TRY(icl_op_add(be, &O, &T, &O, err));
    }
  } else if (present(&L->wo)) { /* a capture alone leaves the computation, hence the logits, bit-identical */
    TRY(icl_op_matmul(be, &L->wo, &Z2, &O, err));
  } else { /* no W_O: the heads' outputs concatenated */
    TRY(icl_op_scale(be, &Z2, 1.0f, &O, err));
  }
  TRY(add_bias(be, &O, &L->bo, err));
  static const int bypassed_mid[] = {HP_LN1_POST, HP_ATTN_OUT, HP_RESID_MID};
  if (n == 1 && present(&L->post_attn_norm) && present(&L->w_up) && m->feat.gated_ffn &&
      fold_norm(m, &L->ffn_norm, hk, il, HP_LN2) && !wants_any(hk, il, bypassed_mid, 3)) {
    *pend = &L->post_attn_norm; /* x += post_norm(o) in the ln2-normed gate/up (ffn_block) */
    return ICL_OK;
  }
  if (present(&L->post_attn_norm) &&
      !(hk && (icl_hook_wants(hk, il, HP_LN1_POST) || icl_hook_wants(hk, il, HP_ATTN_OUT)))) {
    TRY(icl_op_rms_norm_add(be, &O, &L->post_attn_norm, hp->eps, &X, err)); /* x += post_norm(o) in one op */
    HOOK(il, HP_RESID_MID, &X);
    return ICL_OK;
  }
  if (present(&L->post_attn_norm)) {
    TRY(icl_op_rms_norm(be, &O, &L->post_attn_norm, hp->eps, &O, err));
    HOOK(il, HP_LN1_POST, &O);
  }
  HOOK(il, HP_ATTN_OUT, &O);
  TRY(icl_op_add(be, &X, &O, &X, err));
  HOOK(il, HP_RESID_MID, &X);
  return ICL_OK;
}

/* Feed-forward sublayer: x += down(act(gate(norm(x))) * up(norm(x))), or down(gelu(up(norm(x)))) when not gated;
 * none at all in an attention-only model. */
static int ffn_block(icl_session *s, int il, int64_t n, struct icl_hookctx *hk, const icl_dt **pend, icl_error *err) {
  icl_model *m = s->m;
  icl_backend *be = m->be;
  const icl_layer *L = &m->layers[il];
  icl_acts *a = &s->a;
  int64_t d = m->hp.n_embd, ff = m->hp.n_ff;

  icl_dt X = view3(&a->x, 0, d, n, 1);
  icl_dt H = view3(&a->h, 0, d, n, 1);
  icl_dt G = view3(&a->gate, 0, ff, n, 1);
  icl_dt U = view3(&a->up, 0, ff, n, 1);
  icl_dt O = view3(&a->o, 0, d, n, 1);
  if (!present(&L->w_up)) { /* attention-only */
    HOOK(il, HP_RESID_POST, &X);
    return ICL_OK;
  }

  int glu = m->arch->act == ICL_ACT_GELU ? ICL_GLU_GELU : ICL_GLU_SILU;
  int fold = m->feat.gated_ffn && fold_norm(m, &L->ffn_norm, hk, il, HP_LN2); /* into gate/up: nothing looks at ln2 */
  if (!fold) {
    TRY(norm(m, &X, &L->ffn_norm, &L->ffn_norm_b, &H, err));
    HOOK(il, HP_LN2, &H);
  }
  /* pending (attention_block checked that fold holds): the post-attention norm + add first, into x2 */
  icl_dt T = view3(&a->x2, 0, d, n, 1);
  icl_post_add pa = {&O, *pend, &T};
  if (m->feat.gated_ffn && !(hk && (icl_hook_wants(hk, il, HP_MLP_PRE) || icl_hook_wants(hk, il, HP_MLP_POST)))) {
    if (*pend)
      TRY(icl_op_add_rms_matmul_glu(be, &X, &pa, &L->ffn_norm, m->hp.eps, &H, &L->w_gate, &L->w_up, &G, &U, glu,
                                    err));
    else if (fold) /* nothing looks at pre or post */
      TRY(icl_op_rms_matmul_glu(be, &X, &L->ffn_norm, m->hp.eps, &H, &L->w_gate, &L->w_up, &G, &U, glu, err));
    else
      TRY(icl_op_matmul_glu(be, &L->w_gate, &L->w_up, &H, &G, &U, glu, err));
  } else if (m->feat.gated_ffn) {
    icl_dt Wgu[2] = {L->w_gate, L->w_up}, Ygu[2] = {G, U};
    if (*pend)
      TRY(icl_op_add_rms_matmul_group(be, &X, &pa, &L->ffn_norm, m->hp.eps, &H, 2, Wgu, Ygu, err));
    else if (fold)
      TRY(icl_op_rms_matmul_group(be, &X, &L->ffn_norm, m->hp.eps, &H, 2, Wgu, Ygu, err));
    else
      TRY(icl_op_matmul_group(be, 2, Wgu, &H, Ygu, err));
    HOOK(il, HP_MLP_PRE, &G);
    TRY((glu == ICL_GLU_GELU ? icl_op_geglu : icl_op_swiglu)(be, &G, &U, &G, err));
  } else {
    TRY(icl_op_matmul(be, &L->w_up, &H, &G, err));
    TRY(add_bias(be, &G, &L->b_up, err));
    HOOK(il, HP_MLP_PRE, &G);
    TRY(icl_op_gelu(be, &G, &G, err));
  }
  if (*pend) { /* t is the residual now */
    swap_resid(a), *pend = NULL;
    X = view3(&a->x, 0, d, n, 1);
  }
  HOOK(il, HP_MLP_POST, &G);
  if (!present(&L->b_down) && !present(&L->post_ffn_norm) && !(hk && icl_hook_wants(hk, il, HP_MLP_OUT))) {
    TRY(icl_op_matmul_add(be, &L->w_down, &G, &O, &X, err)); /* nothing looks at mlp_out: x += W_down g */
    HOOK(il, HP_RESID_POST, &X);
    return ICL_OK;
  }
  TRY(icl_op_matmul(be, &L->w_down, &G, &O, err));
  TRY(add_bias(be, &O, &L->b_down, err));
  static const int bypassed_post[] = {HP_LN2_POST, HP_MLP_OUT, HP_RESID_POST};
  if (n == 1 && present(&L->post_ffn_norm) && il + 1 < m->hp.n_layer &&
      fold_norm(m, &m->layers[il + 1].attn_norm, hk, il + 1, HP_LN1) && !wants_any(hk, il, bypassed_post, 3) &&
      !(hk && icl_hook_wants(hk, il + 1, HP_RESID_PRE))) {
    *pend = &L->post_ffn_norm; /* x += post_norm(o) in the next layer's ln1-normed q/k/v (attention_block) */
    return ICL_OK;
  }
  if (present(&L->post_ffn_norm) &&
      !(hk && (icl_hook_wants(hk, il, HP_LN2_POST) || icl_hook_wants(hk, il, HP_MLP_OUT)))) {
    TRY(icl_op_rms_norm_add(be, &O, &L->post_ffn_norm, m->hp.eps, &X, err)); /* x += post_norm(o) in one op */
    HOOK(il, HP_RESID_POST, &X);
    return ICL_OK;
  }
  if (present(&L->post_ffn_norm)) {
    TRY(icl_op_rms_norm(be, &O, &L->post_ffn_norm, m->hp.eps, &O, err));
    HOOK(il, HP_LN2_POST, &O);
  }
  HOOK(il, HP_MLP_OUT, &O);
  TRY(icl_op_add(be, &X, &O, &X, err));
  HOOK(il, HP_RESID_POST, &X);
  return ICL_OK;
}

/* Writes the chunk's token ids (-1, "no token", is the table's zero row) and positions to the device. */
static int write_ids(icl_session *s, const int32_t *tokens, int64_t n, icl_error *err) {
  const icl_hparams *hp = &s->m->hp;
  icl_backend *be = s->m->be;
  int32_t *ids = malloc((size_t)n * 2 * sizeof *ids), *pos = ids + n;
  if (!ids) return icl_error_set(err, ICL_ENOMEM, "forward: no memory for %lld positions", (long long)n);
  int rc = ICL_OK;
  for (int64_t i = 0; i < n && !rc; i++) {
    pos[i] = (int32_t)(s->n_past + i);
    ids[i] = tokens[i] == -1 && hp->allow_no_token ? hp->n_tokens : tokens[i];
    if (tokens[i] < -hp->allow_no_token || tokens[i] >= hp->n_tokens)
      rc = icl_error_set(err, ICL_EINVAL, "tokens[%lld]: %d out of range %d..%d (1-based position)",
                         (long long)pos[i] + 1, tokens[i], -hp->allow_no_token, hp->n_tokens - 1);
  }
  if (!rc) rc = be->ops->sync(be, err); /* the previous chunk may still read ids/pos */
  if (!rc) rc = be->ops->write(be, s->a.ids.buf, s->a.ids.offset, ids, (size_t)n * 4, err);
  if (!rc) rc = be->ops->write(be, s->a.pos.buf, s->a.pos.offset, pos, (size_t)n * 4, err);
  free(ids);
  return rc;
}

/* x += proj(inputs) for the chunk's rows of the run's continuous inputs (zeros where the run gave none). */
static int add_inputs(icl_session *s, int64_t n, icl_error *err) {
  icl_model *m = s->m;
  int64_t w = m->hp.input_length, d = m->hp.n_embd, r0 = s->n_past - s->inputs_pos0;
  float *host = calloc((size_t)(n * w), sizeof *host);
  if (!host) return icl_error_set(err, ICL_ENOMEM, "forward: no memory for %lld x %lld inputs", (long long)n,
                                  (long long)w);
  for (int64_t i = 0; s->inputs && i < n; i++)
    if (r0 + i >= 0 && r0 + i < s->inputs_n) memcpy(host + i * w, s->inputs + (r0 + i) * w, (size_t)w * 4);
  int rc = m->be->ops->write(m->be, s->a.inputs.buf, s->a.inputs.offset, host, (size_t)(n * w) * 4, err);
  free(host);
  TRY(rc);
  icl_dt I = view3(&s->a.inputs, 0, w, n, 1), X = view3(&s->a.x, 0, d, n, 1), O = view3(&s->a.o, 0, d, n, 1);
  if (!present(&m->inp_proj)) return icl_op_add(m->be, &X, &I, &X, err);
  TRY(icl_op_matmul(m->be, &m->inp_proj, &I, &O, err));
  TRY(add_bias(m->be, &O, &m->inp_proj_b, err));
  return icl_op_add(m->be, &X, &O, &X, err);
}

/* Classifier head (icl-attn): h = relu(cls.i(h)) for each hidden layer, in place in h. */
static int classifier(icl_session *s, int64_t n, icl_error *err) {
  icl_model *m = s->m;
  int64_t d = m->hp.n_embd;
  icl_dt H = view3(&s->a.h, 0, d, n, 1), O = view3(&s->a.o, 0, d, n, 1);
  for (int i = 0; i < m->feat.n_cls; i++) {
    TRY(icl_op_matmul(m->be, &m->cls_w[i], &H, &O, err));
    TRY(add_bias(m->be, &O, &m->cls_b[i], err));
    TRY(icl_op_relu(m->be, &O, &H, err));
  }
  return ICL_OK;
}

int icl_forward_chunk(icl_session *s, const int32_t *tokens, int64_t n, struct icl_hookctx *hk, icl_error *err) {
  icl_model *m = s->m;
  icl_backend *be = m->be;
  icl_acts *a = &s->a;
  int64_t d = m->hp.n_embd;
  TRY(write_ids(s, tokens, n, err));

  icl_dt X = view3(&a->x, 0, d, n, 1);
  icl_dt O = view3(&a->o, 0, d, n, 1);
  icl_dt ids = view3(&a->ids, 0, n, 1, 1), P = view3(&a->pos, 0, n, 1, 1);
  ids.type = ICL_TYPE_I32;
  TRY(icl_op_get_rows(be, &m->tok_table, &ids, &X, err));
  if (m->arch->embed_scale) TRY(icl_op_scale(be, &X, sqrtf((float)d), &X, err));
  if (m->hp.input_length > 0) TRY(add_inputs(s, n, err));
  if (m->feat.pos == ICL_POS_LEARNED) {
    TRY(icl_op_get_rows(be, &m->pos_embd, &P, &O, err));
    TRY(icl_op_add(be, &X, &O, &X, err));
  }
  HOOK(-1, HP_EMBED, &X);

  const icl_dt *pend = NULL; /* a post-norm add waiting for the next norm's consumer (swap_resid) */
  for (int il = 0; il < m->hp.n_layer; il++) {
    TRY(attention_block(s, il, n, hk, &pend, err));
    TRY(ffn_block(s, il, n, hk, &pend, err));
  }
  X = view3(&a->x, 0, d, n, 1); /* the layers may have swapped the residual's buffers; none is pending after the last */

  icl_dt H = view3(&a->h, 0, d, n, 1);
  TRY(norm(m, &X, &m->output_norm, &m->output_norm_b, &H, err));
  HOOK(-1, HP_LN_FINAL, &H);
  if (m->feat.out == ICL_OUT_CLASSIFIER) TRY(classifier(s, n, err));
  s->n_past += n;
  return ICL_OK;
}

int icl_forward_logits(icl_session *s, int64_t r0, int64_t nr, icl_error *err) {
  icl_model *m = s->m;
  icl_dt H = view3(&s->a.h, r0 * m->hp.n_embd, m->hp.n_embd, nr, 1);
  icl_dt Y = view3(&s->a.logits, 0, m->hp.n_vocab, nr, 1);
  TRY(icl_op_matmul(m->be, &m->output, &H, &Y, err));
  return add_bias(m->be, &Y, &m->output_b, err);
}
