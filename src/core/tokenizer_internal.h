/* Private parts of the tokenizer, shared by tokenizer.c (vocabulary, special tokens, decoding),
 * tokenizer_bpe.c (byte-level BPE) and tokenizer_spm.c (SentencePiece). */
#ifndef ICL_TOKENIZER_INTERNAL_H
#define ICL_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "icl/gguf.h"
#include "icl/tokenizer.h"

#define TOK_MAX_REGEX 4    /* pre-tokenizer regexes applied in sequence */
#define TOK_MAX_VOCAB (1 << 24)

enum { TOK_KIND_BPE = 1, TOK_KIND_SPM = 2 };

/* tokenizer.ggml.token_type values */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

/* Open-addressing map from piece text to id; the keys are the pieces stored in the tokenizer. */
typedef struct tok_strmap {
  int32_t *slot;   /* [mask+1] token id or -1 */
  uint32_t mask;
} tok_strmap;

/* Open-addressing map from a pair of token ids to the merge that joins them. */
typedef struct tok_pair {
  uint64_t key;    /* (left << 32) | right; UINT64_MAX when empty */
  int32_t rank;    /* index in tokenizer.ggml.merges: lower merges first */
  int32_t result;  /* id of the joined piece */
} tok_pair;

typedef struct tok_pairmap {
  tok_pair *slot;  /* [mask+1] */
  uint64_t mask;
} tok_pairmap;

struct icl_tokenizer {
  int kind;                 /* TOK_KIND_BPE or TOK_KIND_SPM */
  char model[32];           /* tokenizer.ggml.model */
  char pre[64];             /* tokenizer.ggml.pre ("default" when absent) */
  int32_t n_vocab;

  char *pool;               /* all pieces, each NUL-terminated */
  uint32_t *off, *len;      /* [n_vocab] piece = pool + off[i], len[i] bytes */
  float *score;             /* [n_vocab] SentencePiece scores (0 when absent) */
  uint8_t *type;            /* [n_vocab] TOK_* */
  char *dpool;              /* decoded text of every token, each NUL-terminated */
  uint32_t *doff, *dlen;    /* [n_vocab] */
  tok_strmap map;

  int32_t bos, eos, eot, unk; /* -1 when absent */
  int add_bos;              /* tokenizer.ggml.add_bos_token (or the model's default) */
  int add_space_prefix;     /* SentencePiece: prepend U+2581 to text that starts a fragment */
  int32_t byte_tok[256];    /* token for a raw byte (BPE: its byte-level char; SPM: <0xXX>), -1 if none */

  /* special tokens (control and user-defined), matched in raw text before tokenization; the filters
   * keep the scan from probing the map at positions where no special piece can start */
  int n_special;
  uint64_t special_lens[256];     /* by first byte: bit L-1 set if a special piece of L <= 64 bytes starts so */
  uint8_t special_next[256][32];  /* by first byte: bitmap of the bytes that can follow it in a special piece */
  uint8_t special_long[256];      /* by first byte: 1 if a special piece longer than 64 bytes starts so */
  uint32_t special_long_len[32];  /* distinct lengths above 64, longest first (rare) */
  int n_special_long_len;

  /* byte-level BPE */
  tok_pairmap merges;
  void *re[TOK_MAX_REGEX];  /* pcre2_code*, applied in order; each splits the pieces of the previous */
  int n_re;
  int ignore_merges;        /* a pre-split word that is itself a token is emitted whole (llama3) */
};

/* A growing array of token ids (the output of tokenization). */
typedef struct tok_ids {
  int32_t *v;
  int64_t n, cap;
} tok_ids;

int tok_ids_push(tok_ids *o, int32_t id);

/* One symbol of a word being merged: a byte range of the word, linked to its live neighbours. */
typedef struct tok_sym {
  int32_t prev, next;   /* -1 at the ends */
  uint32_t start, len;  /* len 0: merged into its left neighbour */
  int32_t id;           /* token of this range, -1 if none */
} tok_sym;

/* A candidate merge of symbols left and right; a, b let the consumer check it is still current. */
typedef struct tok_bigram {
  double key;           /* lower pops first (BPE: rank; SPM: -score) */
  int32_t left, right;
  int32_t a, b;
} tok_bigram;

/* Binary min-heap of bigrams ordered by (key, left): ties go to the leftmost pair. */
typedef struct tok_heap {
  tok_bigram *v;
  size_t n, cap;
} tok_heap;

int tok_heap_push(tok_heap *h, tok_bigram b);
int tok_heap_pop(tok_heap *h, tok_bigram *out);  /* 1 if one was popped, 0 if empty */

/* Scratch buffers reused across the words of one tokenize call. */
typedef struct tok_work {
  tok_sym *sym;
  size_t sym_cap;
  tok_heap heap;
  char *buf;            /* text scratch (SPM escaped text, BPE mapped word) */
  size_t buf_cap;
} tok_work;

int tok_work_syms(tok_work *w, size_t n);          /* ensures room for n symbols */
int tok_work_buf(tok_work *w, size_t n);           /* ensures room for n bytes */
void tok_work_free(tok_work *w);

/* Id of the piece with these bytes, or -1. */
int32_t tok_lookup(const icl_tokenizer *t, const char *s, size_t n);

/* Length of the UTF-8 sequence that starts with byte c (1 for stray continuation bytes). */
static inline size_t tok_utf8_len(unsigned char c) {
  static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lens[c >> 4];
}

/* Length of the UTF-8 character at s (n bytes left): its full length if the continuation bytes are
 * there, else 1, so a stray byte never swallows the start of the next character. */
static inline size_t tok_utf8_char(const unsigned char *s, size_t n) {
  size_t l = tok_utf8_len(s[0]);
  if (l > n) return 1;
  for (size_t i = 1; i < l; i++)
    if ((s[i] & 0xC0) != 0x80) return 1;
  return l;
}

/* ---- byte-level BPE (tokenizer_bpe.c) ---- */
int tok_bpe_init(icl_tokenizer *t, const icl_gguf *g, icl_error *err);
void tok_bpe_free(icl_tokenizer *t);
/* Tokenizes one fragment of plain text (no special tokens) and appends to out. */
int tok_bpe_encode(const icl_tokenizer *t, const char *text, size_t n, tok_work *w, tok_ids *out, icl_error *err);
/* Writes the bytes a byte-level piece stands for into dst (at most n bytes); returns the count. */
size_t tok_bpe_decode_piece(const char *piece, size_t n, char *dst);

/* ---- SentencePiece (tokenizer_spm.c) ---- */
int tok_spm_init(icl_tokenizer *t, const icl_gguf *g, icl_error *err);
/* Tokenizes one fragment; space_prefix: prepend U+2581 (fragment starts the text or follows a special). */
int tok_spm_encode(const icl_tokenizer *t, const char *text, size_t n, int space_prefix, tok_work *w,
                   tok_ids *out, icl_error *err);
/* Decoded bytes of a SentencePiece token into dst (at most n bytes, never more than the piece); returns count. */
size_t tok_spm_decode_piece(const icl_tokenizer *t, int32_t id, char *dst);

#endif
