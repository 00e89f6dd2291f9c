/* lex.h — internal: the one lexer shared by both text forms (docs/SCRIPT.md).
 * The lexer turns a byte range (not NUL-terminated) into an array of tokens
 * carrying their byte offset, line and column, and renders diagnostics in the
 * house style (chibicc):
 *   FILE:LINE:COL: error: MESSAGE
 *     <the source line>
 *     <spaces>^
 * Only the parser (parse.c) includes this header. */
#ifndef TESSEL_IR_LEX_H
#define TESSEL_IR_LEX_H

#include "ir.h"

typedef enum {
  IR_TK_EOF,
  IR_TK_IDENT,
  IR_TK_INT,   /* ival holds the magnitude; sign comes from a unary minus */
  IR_TK_FLOAT,
  IR_TK_STR,   /* str holds the decoded contents (arena) */
  IR_TK_PUNCT,
} ir_tk_kind;

typedef struct ir_token {
  ir_tk_kind kind;
  size_t pos, len; /* byte range in the source */
  int line, col;   /* 1-based; col counts bytes */
  uint64_t ival;
  double fval;
  bool has_dt;     /* literal carried a dtype suffix (123i32, 1.5f64) */
  ir_dtype dt;
  const char *str; /* IR_TK_STR: decoded text, NUL-terminated, in the arena */
} ir_token;

typedef struct ir_lexer {
  const char *src;
  size_t len;
  const char *file;
} ir_lexer;

/* Tokenizes the whole source. On success *out is a heap array (caller frees
 * with ts_free) of *n tokens ending with one IR_TK_EOF; string contents are
 * allocated in arena a. Errors: TS_EPARSE (bad character, unterminated
 * string, malformed number) with a located diagnostic; TS_ENOMEM. On error
 * *out is NULL and nothing is left on the heap. */
ts_status ir_lex(ts_arena *a, const ir_lexer *lx, ir_token **out, int *n, ts_diag *d);

/* Renders "FILE:LINE:COL: error: MSG\n  line\n  ^" for byte offset pos (may
 * equal len) into d with the given code. Returns code. */
ts_status ir_lex_error_at(const ir_lexer *lx, size_t pos, ts_diag *d, ts_status code,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
ts_status ir_lex_verror_at(const ir_lexer *lx, size_t pos, ts_diag *d, ts_status code,
                           const char *fmt, va_list ap);

/* Token helpers. */
bool ir_tok_is(const ir_lexer *lx, const ir_token *t, const char *s); /* punct or ident text */
bool ir_tok_ident(const ir_lexer *lx, const ir_token *t, const char *s);
/* Parses a dtype name ("f32", "i8", "f32x8"); no aliases. */
bool ir_lex_dtype(const char *s, size_t n, ir_dtype *out);

#endif
