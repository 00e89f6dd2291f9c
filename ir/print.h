/* print.h — the printer: writes IR as readable, TVMScript-like text that the
 * script parser (parse.h) reads back into a structurally equal function.
 * The grammar is docs/SCRIPT.md. */
#ifndef TESSEL_IR_PRINT_H
#define TESSEL_IR_PRINT_H

#include "ir.h"

void ir_print_expr(ts_strbuf *sb, const ir_expr *e);
void ir_print_stmt(ts_strbuf *sb, const ir_stmt *s, int indent);
void ir_print_func(ts_strbuf *sb, const ir_func *f);
/* Convenience: heap string (caller ts_free), NULL on OOM. */
char *ir_func_to_string(const ir_func *f);
char *ir_expr_to_string(const ir_expr *e);

#endif
