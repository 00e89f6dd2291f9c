/* lex.c — the lexer for both text forms (docs/SCRIPT.md, "Lexical"). It
 * reads exactly len bytes (the input need not be NUL-terminated), so any byte
 * sequence yields either tokens or one located error. Numbers keep their
 * dtype suffix; the sign of a literal is the parser's business (a unary minus
 * directly before a literal makes a negative literal). Diagnostics are
 * rendered here because only the lexer knows how to find a source line. */
#include "lex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- diagnostics --------------------------------------------------------- */

ts_status ir_lex_verror_at(const ir_lexer *lx, size_t pos, ts_diag *d, ts_status code,
                           const char *fmt, va_list ap) {
  if (!d || d->code != TS_OK) return code;
  if (pos > lx->len) pos = lx->len;
  int line = 1;
  size_t ls = 0;
  for (size_t i = 0; i < pos; i++)
    if (lx->src[i] == '\n') { line++; ls = i + 1; }
  size_t le = pos;
  while (le < lx->len && lx->src[le] != '\n' && lx->src[le] != '\r') le++;
  int col = (int)(pos - ls) + 1;
  /* Show a window of the line around the fault so long lines stay readable. */
  size_t ws = ls, we = le;
  if (pos - ws > 120) ws = pos - 100;
  if (we - ws > 240) we = ws + 240;
  if (we < pos) we = pos;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  char linebuf[300], caret[300];
  size_t k = 0, c = 0;
  for (size_t i = ws; i < we && k < sizeof linebuf - 1; i++) {
    unsigned char ch = (unsigned char)lx->src[i];
    linebuf[k++] = (ch == '\t' || (ch >= 0x20 && ch < 0x7f)) ? (char)ch : '?';
  }
  linebuf[k] = '\0';
  for (size_t i = ws; i < pos && c < sizeof caret - 2; i++)
    caret[c++] = lx->src[i] == '\t' ? '\t' : ' ';
  caret[c++] = '^';
  caret[c] = '\0';
  return ts_diag_set(d, code, "%s:%d:%d: error: %s\n  %s\n  %s",
                     lx->file ? lx->file : "<input>", line, col, msg, linebuf, caret);
}

ts_status ir_lex_error_at(const ir_lexer *lx, size_t pos, ts_diag *d, ts_status code,
                          const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ir_lex_verror_at(lx, pos, d, code, fmt, ap);
  va_end(ap);
  return code;
}

/* ---- helpers --------------------------------------------------------------- */

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_alnum(int c) { return is_alpha(c) || is_digit(c); }
static bool is_hex(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static const char *const dtype_names[] = {
#define IR_X(e, n, b, c) n,
    IR_DTYPE_LIST(IR_X)
#undef IR_X
};

bool ir_lex_dtype(const char *s, size_t n, ir_dtype *out) {
  for (int c = 0; c < IR_DTYPE_COUNT; c++) {
    size_t k = strlen(dtype_names[c]);
    if (n < k || memcmp(s, dtype_names[c], k) != 0) continue;
    if (n == k) {
      *out = ir_dt((ir_dtype_code)c);
      return true;
    }
    if (s[k] != 'x' || n == k + 1 || n - k - 1 > 5) continue;
    long lanes = 0;
    bool ok = true;
    for (size_t i = k + 1; i < n; i++) {
      if (!is_digit((unsigned char)s[i])) { ok = false; break; }
      lanes = lanes * 10 + (s[i] - '0');
    }
    if (!ok || lanes < 1 || lanes > 65535 || s[k + 1] == '0') continue;
    *out = ir_dt_vec((ir_dtype_code)c, (int)lanes);
    return true;
  }
  return false;
}

bool ir_tok_is(const ir_lexer *lx, const ir_token *t, const char *s) {
  if (t->kind != IR_TK_PUNCT && t->kind != IR_TK_IDENT) return false;
  size_t n = strlen(s);
  return t->len == n && memcmp(lx->src + t->pos, s, n) == 0;
}

bool ir_tok_ident(const ir_lexer *lx, const ir_token *t, const char *s) {
  return t->kind == IR_TK_IDENT && ir_tok_is(lx, t, s);
}

/* ---- the scanner ----------------------------------------------------------- */

typedef struct scan {
  const ir_lexer *lx;
  ts_arena *a;
  ts_diag *d;
  size_t i;
  int line;
  size_t line_start;
  ir_token *toks;
  int n, cap;
} scan;

static ts_status push(scan *s, ir_token t) {
  if (s->n == s->cap) {
    if (s->cap > (1 << 26)) return ts_diag_set(s->d, TS_ENOMEM, "too many tokens");
    int nc = s->cap ? s->cap * 2 : 256;
    ir_token *nt = ts_realloc(s->toks, sizeof *nt * (size_t)nc);
    if (!nt) return ts_diag_set(s->d, TS_ENOMEM, "out of memory while lexing");
    s->toks = nt;
    s->cap = nc;
  }
  s->toks[s->n++] = t;
  return TS_OK;
}

/* Multi-character punctuators first so the longest match wins. */
static const char *const puncts[] = {
    "//", ":+", "+=", "*=", "&&", "||", "->", "..", "==", "!=", "<=", ">=",
    "+", "-", "*", "/", "%", "<", ">", "=", "!", "(", ")", "[", "]", "{", "}",
    ",", ":", ";",
};

static ts_status lex_number(scan *s, ir_token *t) {
  const char *src = s->lx->src;
  size_t len = s->lx->len, i = s->i;
  bool is_float = false;
  if (src[i] == '0' && i + 1 < len && (src[i + 1] == 'x' || src[i + 1] == 'X')) {
    i += 2;
    size_t st = i;
    uint64_t v = 0;
    while (i < len && is_hex((unsigned char)src[i])) {
      int c = (unsigned char)src[i];
      int dv = is_digit(c) ? c - '0' : (c | 32) - 'a' + 10;
      if (v > (UINT64_MAX >> 4))
        return ir_lex_error_at(s->lx, s->i, s->d, TS_EPARSE, "integer literal is too large");
      v = (v << 4) | (uint64_t)dv;
      i++;
    }
    if (i == st) return ir_lex_error_at(s->lx, s->i, s->d, TS_EPARSE, "expected hex digits after '0x'");
    t->ival = v;
  } else {
    uint64_t v = 0;
    bool ovf = false;
    while (i < len && is_digit((unsigned char)src[i])) {
      uint64_t dv = (uint64_t)(src[i] - '0');
      if (v > (UINT64_MAX - dv) / 10) ovf = true;
      else v = v * 10 + dv;
      i++;
    }
    /* "2." is a float, "0..3" is 0 then "..". */
    if (i < len && src[i] == '.' && !(i + 1 < len && src[i + 1] == '.')) {
      is_float = true;
      i++;
      while (i < len && is_digit((unsigned char)src[i])) i++;
    }
    if (i < len && (src[i] == 'e' || src[i] == 'E')) {
      size_t j = i + 1;
      if (j < len && (src[j] == '+' || src[j] == '-')) j++;
      if (j < len && is_digit((unsigned char)src[j])) {
        is_float = true;
        i = j;
        while (i < len && is_digit((unsigned char)src[i])) i++;
      }
    }
    if (is_float) {
      char buf[128];
      size_t n = i - s->i;
      if (n >= sizeof buf)
        return ir_lex_error_at(s->lx, s->i, s->d, TS_EPARSE, "float literal is too long");
      memcpy(buf, src + s->i, n);
      buf[n] = '\0';
      t->fval = strtod(buf, NULL);
    } else {
      if (ovf) return ir_lex_error_at(s->lx, s->i, s->d, TS_EPARSE, "integer literal is too large");
      t->ival = v;
    }
  }
  t->kind = is_float ? IR_TK_FLOAT : IR_TK_INT;
  /* dtype suffix */
  if (i < len && is_alpha((unsigned char)src[i])) {
    size_t st = i;
    while (i < len && is_alnum((unsigned char)src[i])) i++;
    ir_dtype dt;
    if (!ir_lex_dtype(src + st, i - st, &dt) || dt.lanes != 1)
      return ir_lex_error_at(s->lx, st, s->d, TS_EPARSE, "invalid suffix '%.*s' on a number literal",
                             (int)(i - st > 32 ? 32 : i - st), src + st);
    if (dt.code == IR_BOOL)
      return ir_lex_error_at(s->lx, st, s->d, TS_EPARSE,
                             "no bool suffix; write true or false");
    if (dt.code == IR_HANDLE)
      return ir_lex_error_at(s->lx, st, s->d, TS_EPARSE, "a literal cannot be a handle");
    bool fl = dt.code == IR_F16 || dt.code == IR_BF16 || dt.code == IR_F32 || dt.code == IR_F64;
    if (fl && !is_float)
      return ir_lex_error_at(s->lx, st, s->d, TS_EPARSE,
                             "integer literal with a float suffix; write it with a '.' (1.0%.*s)",
                             (int)(i - st), src + st);
    if (!fl && is_float)
      return ir_lex_error_at(s->lx, st, s->d, TS_EPARSE, "float literal with an integer suffix");
    t->has_dt = true;
    t->dt = dt;
  }
  if (i < len && src[i] == '.' && i + 1 < len && src[i + 1] != '.')
    return ir_lex_error_at(s->lx, i, s->d, TS_EPARSE, "malformed number");
  t->len = i - s->i;
  s->i = i;
  return TS_OK;
}

static ts_status lex_string(scan *s, ir_token *t) {
  const char *src = s->lx->src;
  size_t len = s->lx->len, i = s->i + 1;
  size_t n = 0;
  /* first pass: find the end and the decoded length */
  for (;;) {
    if (i >= len || src[i] == '\n')
      return ir_lex_error_at(s->lx, s->i, s->d, TS_EPARSE, "unterminated string");
    if (src[i] == '"') break;
    if (src[i] == '\\') {
      if (i + 1 < len && (src[i + 1] == '"' || src[i + 1] == '\\')) {
        i += 2;
        n++;
        continue;
      }
      return ir_lex_error_at(s->lx, i, s->d, TS_EPARSE,
                             "unknown escape in string (only \\\" and \\\\)");
    }
    i++;
    n++;
  }
  char *out = ts_arena_alloc(s->a, n + 1);
  if (!out) return ts_diag_set(s->d, TS_ENOMEM, "out of memory while lexing");
  size_t k = 0;
  for (size_t j = s->i + 1; j < i; j++) {
    if (src[j] == '\\') j++;
    out[k++] = src[j];
  }
  out[k] = '\0';
  t->kind = IR_TK_STR;
  t->str = out;
  t->len = i + 1 - s->i;
  s->i = i + 1;
  return TS_OK;
}

ts_status ir_lex(ts_arena *a, const ir_lexer *lx, ir_token **out, int *nout, ts_diag *d) {
  scan s = {.lx = lx, .a = a, .d = d, .line = 1};
  const char *src = lx->src;
  size_t len = lx->len;
  ts_status st = TS_OK;
  size_t last_end = 0;
  int last_line = 1, last_col = 1;
  *out = NULL;
  *nout = 0;
  while (s.i < len) {
    unsigned char c = (unsigned char)src[s.i];
    if (c == '\n') {
      s.i++;
      s.line++;
      s.line_start = s.i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      s.i++;
      continue;
    }
    if (c == '#') {
      while (s.i < len && src[s.i] != '\n') s.i++;
      continue;
    }
    ir_token t;
    memset(&t, 0, sizeof t);
    t.pos = s.i;
    t.line = s.line;
    t.col = (int)(s.i - s.line_start) + 1;
    if (is_alpha(c)) {
      size_t i = s.i + 1;
      for (;;) {
        if (i < len && is_alnum((unsigned char)src[i])) i++;
        else if (i + 1 < len && src[i] == '.' && is_alnum((unsigned char)src[i + 1])) i += 2;
        else break;
      }
      t.kind = IR_TK_IDENT;
      t.len = i - s.i;
      s.i = i;
    } else if (is_digit(c)) {
      if ((st = lex_number(&s, &t)) != TS_OK) goto fail;
    } else if (c == '"') {
      if ((st = lex_string(&s, &t)) != TS_OK) goto fail;
    } else {
      size_t k;
      for (k = 0; k < sizeof puncts / sizeof puncts[0]; k++) {
        size_t pl = strlen(puncts[k]);
        if (s.i + pl <= len && memcmp(src + s.i, puncts[k], pl) == 0) break;
      }
      if (k == sizeof puncts / sizeof puncts[0]) {
        if (c >= 0x20 && c < 0x7f)
          st = ir_lex_error_at(lx, s.i, d, TS_EPARSE, "unexpected character '%c'", c);
        else
          st = ir_lex_error_at(lx, s.i, d, TS_EPARSE, "unexpected byte 0x%02x", c);
        goto fail;
      }
      t.kind = IR_TK_PUNCT;
      t.len = strlen(puncts[k]);
      s.i += t.len;
    }
    if ((st = push(&s, t)) != TS_OK) goto fail;
    last_end = t.pos + t.len;
    last_line = t.line;
    last_col = t.col + (int)t.len;
  }
  /* EOF sits just after the last token so "unexpected end" points somewhere useful. */
  ir_token eof = {.kind = IR_TK_EOF, .pos = last_end, .line = last_line, .col = last_col};
  if ((st = push(&s, eof)) != TS_OK) goto fail;
  *out = s.toks;
  *nout = s.n;
  return TS_OK;
fail:
  ts_free(s.toks);
  return st;
}
