/* struct.h — structural equality and structural hashing of IR. Two functions
 * are structurally equal when they are the same tree up to a consistent
 * renaming of variables and buffers (bijection established at definition
 * sites: params, loop vars, iter vars, let vars, allocated buffers). The hash
 * (XXH3-64 over a canonical serialization with de Bruijn-style numbering of
 * definitions) is stable across processes and is tessel's workload key:
 * equal functions hash equal; names of vars/buffers do not change it, but
 * the function's shapes, dtypes, ops and structure do. */
#ifndef TESSEL_IR_STRUCT_H
#define TESSEL_IR_STRUCT_H

#include "ir.h"

bool ir_struct_equal_expr(const ir_expr *a, const ir_expr *b);
bool ir_struct_equal_stmt(const ir_stmt *a, const ir_stmt *b);
/* Compares params, syms, body and annotations; ignores the function name. */
bool ir_struct_equal_func(const ir_func *a, const ir_func *b);
/* Like ir_struct_equal_func, but on mismatch writes a description of the
 * first difference (path and both sides) into why (if not NULL). */
bool ir_struct_equal_func_explain(const ir_func *a, const ir_func *b, char *why, size_t n);

uint64_t ir_struct_hash_expr(const ir_expr *e);
uint64_t ir_struct_hash_func(const ir_func *f);
/* 16 lowercase hex digits of ir_struct_hash_func; buf needs 17 bytes. */
char *ir_workload_key(const ir_func *f, char buf[17]);

#endif
