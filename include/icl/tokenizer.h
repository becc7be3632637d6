/* Tokenizers built from a GGUF vocabulary: byte-level BPE (gpt2) and SentencePiece (llama). */
#ifndef ICL_TOKENIZER_H
#define ICL_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "icl/gguf.h"
#include "icl/icl.h"

typedef struct icl_tokenizer icl_tokenizer;

/* Builds a tokenizer from the tokenizer.ggml.* keys of g (g may be closed afterwards). */
int icl_tokenizer_from_gguf(const icl_gguf *g, icl_tokenizer **out, icl_error *err);

/* Frees; NULL allowed. */
void icl_tokenizer_free(icl_tokenizer *t);

/* Tokenizes len bytes of text into a malloc'd array (*ids, *n; caller frees). add_bos: prepend BOS when
 * the vocabulary has one and (add_bos > 0, or add_bos < 0 and tokenizer.ggml.add_bos_token says so).
 * parse_special: text matching control/user-defined tokens maps to them. */
int icl_tokenize(const icl_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special, int32_t **ids,
                 int64_t *n, icl_error *err);

/* The bytes a token stands for when decoding (byte tokens and spaces resolved); NULL if id is out of range. */
const char *icl_token_text(const icl_tokenizer *t, int32_t id, size_t *len);

/* The raw vocabulary piece (as stored in the GGUF file); NULL if id is out of range. */
const char *icl_token_piece(const icl_tokenizer *t, int32_t id);

/* Decodes n ids into a malloc'd NUL-terminated string (*out, *len; caller frees). Control tokens are skipped
 * unless keep_special. */
int icl_detokenize(const icl_tokenizer *t, const int32_t *ids, int64_t n, int keep_special, char **out, size_t *len,
                   icl_error *err);

/* Vocabulary size. */
int32_t icl_tokenizer_n_vocab(const icl_tokenizer *t);

/* Special ids (-1 if absent). */
int32_t icl_tokenizer_bos(const icl_tokenizer *t);
int32_t icl_tokenizer_eos(const icl_tokenizer *t);

/* 1 if id is a control/end-of-generation token. */
int icl_token_is_control(const icl_tokenizer *t, int32_t id);

/* Model type ("gpt2", "llama") and pre-tokenizer name ("smollm", "default", ...). */
const char *icl_tokenizer_model(const icl_tokenizer *t);
const char *icl_tokenizer_pre(const icl_tokenizer *t);

#endif
