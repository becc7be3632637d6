/* The forward pass of one chunk, read top to bottom, for every architecture in the table (arch.c).
 * Shapes are in backend order: [innermost, ..., tokens]. Hook points are announced where TransformerLens
 * places them (docs/hooks.md). */
#include <math.h>
#include <stdlib.h>

#include "model_internal.h"
#include "ops.h"

#define TRY(x)                  \
  do {                          \
    int rc_ = (x);              \
    if (rc_) return rc_;        \
  } while (0)

#define HOOK(layer, hp, view, heads) \
  do {                               \
    if (hk) TRY(icl_hook_point(hk, layer, hp, view, heads, err)); \
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

/* Attention sublayer: x += attn(norm(x)). */
static int attention_block(icl_session *s, int il, int64_t n, struct icl_hookctx *hk, icl_error *err) {
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

  HOOK(il, HP_RESID_PRE, &X, 0);
  TRY(icl_op_rms_norm(be, &X, &L->attn_norm, hp->eps, &H, err));
  HOOK(il, HP_LN1, &H, 0);

  icl_dt Q2 = view3(&Q, 0, hd * nh, n, 1), K2 = view3(&K, 0, hd * nkv, n, 1), V2 = view3(&V, 0, hd * nkv, n, 1);
  TRY(icl_op_matmul(be, &L->wq, &H, &Q2, err));
  TRY(icl_op_matmul(be, &L->wk, &H, &K2, err));
  TRY(icl_op_matmul(be, &L->wv, &H, &V2, err));
  if (present(&L->bq)) {
    TRY(icl_op_add(be, &Q2, &L->bq, &Q2, err));
    TRY(icl_op_add(be, &K2, &L->bk, &K2, err));
    TRY(icl_op_add(be, &V2, &L->bv, &V2, err));
  }
  if (present(&L->q_norm)) { /* per-head RMSNorm: rows of head_dim */
    icl_dt Qh = view3(&Q, 0, hd, nh * n, 1), Kh = view3(&K, 0, hd, nkv * n, 1);
    TRY(icl_op_rms_norm(be, &Qh, &L->q_norm, hp->eps, &Qh, err));
    TRY(icl_op_rms_norm(be, &Kh, &L->k_norm, hp->eps, &Kh, err));
  }
  HOOK(il, HP_Q, &Q, (int)nh);
  HOOK(il, HP_K, &K, (int)nkv);
  HOOK(il, HP_V, &V, (int)nkv);
  TRY(icl_op_rope(be, &Q, &P, hp->n_rot, L->rope_base, m->arch->rope_mode, err));
  TRY(icl_op_rope(be, &K, &P, hp->n_rot, L->rope_base, m->arch->rope_mode, err));

  icl_attn_params ap = {.n_past = (int32_t)p0, .scale = 1.0f / sqrtf((float)hd), .window = L->window, .softcap = 0};
  icl_dt pattern, *pat = NULL;
  if (hk && icl_hook_needs_pattern(hk, il)) {
    pattern = (icl_dt){.buf = a->pattern_buf, .type = ICL_TYPE_F32, .ne = {p0 + n, n, nh, 1}};
    pat = &pattern;
  }
  const icl_dt *mask = NULL;
  if (hk) TRY(icl_hook_mask(hk, il, &mask, err));
  TRY(icl_op_attention(be, &Q, &Kall, &Vall, &ap, mask, &Z, pat, err));
  if (pat) HOOK(il, HP_PATTERN, pat, (int)nh);
  HOOK(il, HP_Z, &Z, (int)nh);

  icl_dt Z2 = view3(&Z, 0, hd * nh, n, 1);
  if (hk && icl_hook_wants(hk, il, HP_RESULT)) {
    /* per-head contributions: W_O applied to z with the other heads zeroed; attn_out = their sum */
    icl_dt R = view3(&a->result, 0, d, nh, n);
    icl_dt ZM = {.buf = a->zmask_buf, .type = ICL_TYPE_F32, .ne = {hd * nh, n, 1, 1}};
    for (int64_t h = 0; h < nh; h++) {
      TRY(icl_op_fill2d(be, &ZM, 0, hd * nh, n, hd * nh, 0.0f, err));
      TRY(icl_op_copy2d(be, &Z2, h * hd, hd * nh, &ZM, h * hd, hd * nh, n, hd, err));
      TRY(icl_op_matmul(be, &L->wo, &ZM, &O, err));
      TRY(icl_op_copy2d(be, &O, 0, d, &R, h * d, d * nh, n, d, err));
    }
    HOOK(il, HP_RESULT, &R, (int)nh);
  }
  if (hk && icl_hook_modifies(hk, il, HP_RESULT)) { /* the (changed) per-head results make the output */
    icl_dt R = view3(&a->result, 0, d, nh, n);
    TRY(icl_op_fill2d(be, &O, 0, d, n, d, 0.0f, err));
    for (int64_t h = 0; h < nh; h++) {
      icl_dt T = view3(&a->h, 0, d, n, 1); /* H is free again: reuse as scratch */
      TRY(icl_op_copy2d(be, &R, h * d, d * nh, &T, 0, d, n, d, err));
      TRY(icl_op_add(be, &O, &T, &O, err));
    }
  } else { /* a capture alone leaves the computation, hence the logits, bit-identical */
    TRY(icl_op_matmul(be, &L->wo, &Z2, &O, err));
  }
  if (present(&L->post_attn_norm)) {
    TRY(icl_op_rms_norm(be, &O, &L->post_attn_norm, hp->eps, &O, err));
    HOOK(il, HP_LN1_POST, &O, 0);
  }
  HOOK(il, HP_ATTN_OUT, &O, 0);
  TRY(icl_op_add(be, &X, &O, &X, err));
  HOOK(il, HP_RESID_MID, &X, 0);
  return ICL_OK;
}

/* Feed-forward sublayer: x += down(act(gate(norm(x))) * up(norm(x))). */
static int ffn_block(icl_session *s, int il, int64_t n, struct icl_hookctx *hk, icl_error *err) {
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

  TRY(icl_op_rms_norm(be, &X, &L->ffn_norm, m->hp.eps, &H, err));
  HOOK(il, HP_LN2, &H, 0);
  TRY(icl_op_matmul(be, &L->w_gate, &H, &G, err));
  TRY(icl_op_matmul(be, &L->w_up, &H, &U, err));
  HOOK(il, HP_MLP_PRE, &G, 0);
  if (m->arch->act == ICL_ACT_GELU)
    TRY(icl_op_geglu(be, &G, &U, &G, err));
  else
    TRY(icl_op_swiglu(be, &G, &U, &G, err));
  HOOK(il, HP_MLP_POST, &G, 0);
  TRY(icl_op_matmul(be, &L->w_down, &G, &O, err));
  if (present(&L->post_ffn_norm)) {
    TRY(icl_op_rms_norm(be, &O, &L->post_ffn_norm, m->hp.eps, &O, err));
    HOOK(il, HP_LN2_POST, &O, 0);
  }
  HOOK(il, HP_MLP_OUT, &O, 0);
  TRY(icl_op_add(be, &X, &O, &X, err));
  HOOK(il, HP_RESID_POST, &X, 0);
  return ICL_OK;
}

int icl_forward_chunk(icl_session *s, const int32_t *tokens, int64_t n, struct icl_hookctx *hk, icl_error *err) {
  icl_model *m = s->m;
  icl_backend *be = m->be;
  const icl_backend_ops *op = be->ops;
  icl_acts *a = &s->a;
  int64_t d = m->hp.n_embd;

  int32_t *pos = malloc((size_t)n * sizeof *pos);
  if (!pos) return icl_error_set(err, ICL_ENOMEM, "forward: no memory for %lld positions", (long long)n);
  for (int64_t i = 0; i < n; i++) pos[i] = (int32_t)(s->n_past + i);
  TRY(op->sync(be, err)); /* the previous chunk may still read ids/pos */
  int rc = op->write(be, a->ids.buf, a->ids.offset, tokens, (size_t)n * 4, err);
  if (!rc) rc = op->write(be, a->pos.buf, a->pos.offset, pos, (size_t)n * 4, err);
  free(pos);
  TRY(rc);

  icl_dt X = view3(&a->x, 0, d, n, 1);
  icl_dt ids = view3(&a->ids, 0, n, 1, 1);
  ids.type = ICL_TYPE_I32;
  TRY(icl_op_get_rows(be, &m->tok_embd, &ids, &X, err));
  if (m->arch->embed_scale) TRY(icl_op_scale(be, &X, sqrtf((float)d), &X, err));
  HOOK(-1, HP_EMBED, &X, 0);

  for (int il = 0; il < m->hp.n_layer; il++) {
    TRY(attention_block(s, il, n, hk, err));
    TRY(ffn_block(s, il, n, hk, err));
  }

  icl_dt H = view3(&a->h, 0, d, n, 1);
  TRY(icl_op_rms_norm(be, &X, &m->output_norm, m->hp.eps, &H, err));
  HOOK(-1, HP_LN_FINAL, &H, 0);
  s->n_past += n;
  return ICL_OK;
}

int icl_forward_logits(icl_session *s, int64_t r0, int64_t nr, icl_error *err) {
  icl_model *m = s->m;
  icl_dt H = view3(&s->a.h, r0 * m->hp.n_embd, m->hp.n_embd, nr, 1);
  icl_dt Y = view3(&s->a.logits, 0, m->hp.n_vocab, nr, 1);
  return icl_op_matmul(m->be, &m->output, &H, &Y, err);
}
