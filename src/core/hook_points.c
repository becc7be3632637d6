/* Hook points (hook_points.h): names, glob matching, layouts, position ranges and head lists. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hook_points.h"

static const char *SUFFIX[HP_LAYER_COUNT] = {
    [HP_RESID_PRE] = "hook_resid_pre",    [HP_LN1] = "ln1.hook_normalized",
    [HP_Q] = "attn.hook_q",               [HP_K] = "attn.hook_k",
    [HP_V] = "attn.hook_v",               [HP_PATTERN] = "attn.hook_pattern",
    [HP_Z] = "attn.hook_z",               [HP_RESULT] = "attn.hook_result",
    [HP_ATTN_OUT] = "hook_attn_out",      [HP_LN1_POST] = "ln1_post.hook_normalized",
    [HP_RESID_MID] = "hook_resid_mid",    [HP_LN2] = "ln2.hook_normalized",
    [HP_MLP_PRE] = "mlp.hook_pre",        [HP_MLP_POST] = "mlp.hook_post",
    [HP_MLP_OUT] = "hook_mlp_out",        [HP_LN2_POST] = "ln2_post.hook_normalized",
    [HP_RESID_POST] = "hook_resid_post"};

icl_hk_geom icl_hk_geom_of(const icl_model *m, int hp) {
  const icl_hparams *h = &m->hp;
  int64_t hd = h->head_dim;
  switch (hp) {
  case HP_Q: case HP_Z: return (icl_hk_geom){hd * h->n_head, hd, h->n_head};
  case HP_K: case HP_V: return (icl_hk_geom){hd * h->n_head_kv, hd, h->n_head_kv};
  case HP_RESULT: return (icl_hk_geom){(int64_t)h->n_embd * h->n_head, h->n_embd, h->n_head};
  case HP_MLP_PRE: case HP_MLP_POST: return (icl_hk_geom){h->n_ff, 0, 0};
  case HP_PATTERN: return (icl_hk_geom){0, 0, h->n_head};
  default: return (icl_hk_geom){h->n_embd, 0, 0};
  }
}

int icl_hook_name(const icl_model *m, int layer, int hp, char *buf, size_t len) {
  if (layer < 0) {
    const char *g = hp == HP_EMBED ? "hook_embed" : hp == HP_LN_FINAL ? "ln_final.hook_normalized" : NULL;
    if (!g) return 0;
    snprintf(buf, len, "%s", g);
    return 1;
  }
  if ((hp == HP_LN1_POST || hp == HP_LN2_POST) && !m->arch->post_norms) return 0;
  if (hp >= HP_LN2 && hp <= HP_LN2_POST && m->hp.n_ff == 0) return 0; /* attention-only (icl-attn) */
  snprintf(buf, len, "blocks.%d.%s", layer, SUFFIX[hp]);
  return 1;
}

/* One dot-free segment, '*' matching any run: on a mismatch only the last star takes one more character, so the
 * time is at most len(p) x len(s) (the recursive matcher was exponential in the stars: 34 of them hung the fuzzer). */
static int glob_seg(const char *p, size_t np, const char *s, size_t ns) {
  size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;
  while (j < ns) {
    if (i < np && p[i] == '*') star = i++, mark = j;
    else if (i < np && p[i] == s[j]) i++, j++;
    else if (star != SIZE_MAX) i = star + 1, j = ++mark;
    else return 0;
  }
  while (i < np && p[i] == '*') i++;
  return i == np;
}

/* Glob match where '*' matches one dot-free run of characters: segment by segment between the dots, as a star
 * never spans one. */
static int glob(const char *p, const char *s) {
  for (;;) {
    const char *pe = strchr(p, '.'), *se = strchr(s, '.');
    size_t np = pe ? (size_t)(pe - p) : strlen(p), ns = se ? (size_t)(se - s) : strlen(s);
    if (!glob_seg(p, np, s, ns)) return 0;
    if (!pe || !se) return !pe && !se;
    p = pe + 1, s = se + 1;
  }
}

int icl_hook_points_match(const icl_model *m, const char *pattern, icl_hp_fn fn, void *ud, icl_error *err) {
  int count = 0;
  char name[96];
  for (int layer = -1; layer < m->hp.n_layer; layer++)
    for (int hp = 0; hp < (layer < 0 ? HP_COUNT : HP_LAYER_COUNT); hp++) {
      if (layer < 0 && hp < HP_LAYER_COUNT) continue;
      if (!icl_hook_name(m, layer, hp, name, sizeof name) || !glob(pattern, name)) continue;
      int rc = fn(ud, layer, hp, name, err);
      if (rc) return -rc;
      count++;
    }
  if (count == 0)
    return -icl_error_set(err, ICL_EINVAL,
                          "hook point '%s' matches nothing (names look like blocks.0.hook_resid_post, "
                          "blocks.*.attn.hook_pattern; see docs/hooks.md)", pattern);
  return count;
}

int icl_hk_overlap(int64_t pb, int64_t pe, int64_t p0, int64_t n, int64_t *b, int64_t *e) {
  *b = pb > p0 ? pb : p0;
  *e = pe < p0 + n ? pe : p0 + n;
  return *b < *e;
}

/* A position as messages show it: 1-based, a negative one (from the end) as given. */
static long long shown(int64_t p) { return p < 0 ? (long long)p : (long long)p + 1; }

int icl_hk_position(int64_t p, int64_t n, const char *what, int64_t *out, icl_error *err) {
  int64_t q = p < 0 ? p + n : p;
  if (q < 0 || q >= n)
    return icl_error_set(err, ICL_EINVAL, "%s: position %lld out of range 1..%lld (1-based; -%lld..-1 from the end)",
                         what, shown(p), (long long)n, (long long)n);
  *out = q;
  return ICL_OK;
}

int icl_hk_pos_range(int64_t b, int64_t e, int64_t n, int64_t *pb, int64_t *pe, const char *what, icl_error *err) {
  if (b == 0 && e == 0) {
    *pb = 0, *pe = n;
    return ICL_OK;
  }
  char w[160];
  snprintf(w, sizeof w, "%s.pos", what);
  int64_t last_given = e > INT64_MIN ? e - 1 : e, first = 0, last = 0; /* end 0 is the end: its last position is -1 */
  int rc = icl_hk_position(b, n, w, &first, err);
  if (!rc) rc = icl_hk_position(last_given, n, w, &last, err);
  if (rc) return rc;
  if (last < first)
    return icl_error_set(err, ICL_EINVAL, "%s: range %lld..%lld (first..last, 1-based) is empty", w, shown(b),
                         shown(last_given));
  *pb = first, *pe = last + 1;
  return ICL_OK;
}

int icl_hk_head_list(const int *heads, int nh, int max_heads, const char *what, int **out, int *nsel, icl_error *err) {
  int n = heads ? nh : max_heads;
  int *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
  if (!h) return icl_error_set(err, ICL_ENOMEM, "%s: out of memory", what);
  for (int i = 0; i < n; i++) {
    h[i] = heads ? heads[i] : i;
    if (h[i] < 0 || h[i] >= max_heads) {
      free(h);
      return nh == 1 ? icl_error_set(err, ICL_EINVAL, "%s.head: %d out of range 0..%d", what, heads[i], max_heads - 1)
                     : icl_error_set(err, ICL_EINVAL, "%s.heads[%d]: %d out of range 0..%d", what, i + 1, heads[i],
                                     max_heads - 1);
    }
  }
  *out = h;
  *nsel = n;
  return ICL_OK;
}

int64_t icl_hk_view_positions(const icl_dt *v, int hp) {
  if (hp == HP_PATTERN) return v->ne[1];
  return v->ne[2] > 1 ? v->ne[2] : v->ne[1];
}
