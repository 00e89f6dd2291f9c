/* parse.h — text front-ends. One lexer, two grammars (docs/SCRIPT.md):
 *   kernel NAME(...) -> ... { ... }   the compute DSL (tensor-expression style)
 *   func NAME(...) { ... }            the loop-IR script the printer writes
 * A file may hold several of either. Errors are TS_EPARSE (syntax), TS_ETYPE,
 * TS_ESHAPE or TS_ENOTFOUND (semantics), and the diagnostic reads
 *   FILE:LINE:COL: error: MESSAGE
 *     <the source line>
 *         ^
 * The parser never crashes or reads out of bounds on any input (random bytes
 * included) and allocates only in the given arena. */
#ifndef TESSEL_IR_PARSE_H
#define TESSEL_IR_PARSE_H

#include "ir.h"

/* Parses src (len bytes, need not be NUL-terminated) into functions allocated
 * in m's arena and added to m. filename is used in diagnostics. On error,
 * m may hold the functions parsed before the faulty one. */
ts_status ir_parse_module(ir_module *m, const char *src, size_t len, const char *filename,
                          ts_diag *d);
/* Parses exactly one function (error if the text holds zero or several). */
ts_status ir_parse_func(ts_arena *a, const char *src, size_t len, const char *filename,
                        ir_func **out, ts_diag *d);

#endif
