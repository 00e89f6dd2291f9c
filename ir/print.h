/* print.h — the printer: writes IR as readable, TVMScript-like text that the
 * script parser (parse.h) reads back into a structurally equal function.
 * The grammar is docs/SCRIPT.md. */
#ifndef TESSEL_IR_PRINT_H
#define TESSEL_IR_PRINT_H

#include "ir.h"

/* All printers append to sb. Names: within one call, every definition gets a
 * name unique in the printed text (first keeps its own, later ones `_1`,
 * `_2` ...; keywords/literals/dtypes never bare); a var or buffer that is used
 * but not defined in the printed tree prints its own (sanitised) name. On
 * allocation failure sb->oom is set (ts_strbuf's rule: later appends are
 * no-ops), so the text is only valid when sb->oom is false. */
void ir_print_expr(ts_strbuf *sb, const ir_expr *e);
/* indent is a nesting level: each level is two spaces. */
void ir_print_stmt(ts_strbuf *sb, const ir_stmt *s, int indent);
void ir_print_func(ts_strbuf *sb, const ir_func *f);
/* Convenience: heap string (caller ts_free), NULL on OOM. */
char *ir_func_to_string(const ir_func *f);
char *ir_expr_to_string(const ir_expr *e);

#endif
