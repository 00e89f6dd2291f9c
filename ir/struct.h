/* struct.h — structural equality and structural hashing of IR. Two functions
 * are structurally equal when they are the same tree up to a consistent
 * renaming of variables and buffers (bijection established at definition
 * sites: params, loop vars, iter vars, let vars, allocated buffers). The hash
 * (XXH3-64 over a canonical serialization with de Bruijn-style numbering of
 * definitions) is stable across processes and is tessel's workload key:
 * equal functions hash equal; names of vars/buffers do not change it, but
 * the function's shapes, dtypes, ops and structure do.
 *
 * What "the same tree" means, precisely (decisions, so print -> parse round
 * trips compare equal and semantically identical trees are not told apart):
 *  - Compared: every dtype (incl. lanes), literal, op, intrinsic, loop kind,
 *    thread tag, iter type, block name, region, buffer declaration (dtype,
 *    shape, strides, elem_offset, scope, align, storage_align), init
 *    presence, store predicate, function params/ninputs/syms. Not compared:
 *    the function's name and the names of vars and buffers.
 *  - Annotations are a set keyed by key: order does not matter (the hash
 *    serializes them sorted by key); kind and value must match.
 *  - Sequences are compared flattened: a nested seq is spliced into its
 *    parent, a one-statement seq equals that statement, an empty seq equals
 *    an absent body (NULL). An if's else and a block's init still compare
 *    present vs absent.
 *  - A NULL block predicate equals the literal `true`; a NULL buffer scope
 *    equals "global"; a storage_align axis with factor 0 is "none" (its
 *    offset ignored) and a NULL array equals all-zero factors.
 *  - Float literals are compared bitwise at their dtype's precision (f64 as
 *    the double, f32/f16/bf16 as the float the value rounds to), so 0.0 and
 *    -0.0 differ and every NaN equals every NaN. Annotation floats compare
 *    as doubles, same NaN rule.
 *  - A var or buffer defined twice (one ir_var reused by sibling loops) is
 *    two definitions; each use refers to the innermost live one. Vars and
 *    buffers used but never defined (free) match by order of first use.
 * The hash walks in the same order as the comparison and numbers
 * definitions in that order, so equal implies hash-equal. It allocates only
 * through ts_malloc; if that fails it returns 0. */
#ifndef TESSEL_IR_STRUCT_H
#define TESSEL_IR_STRUCT_H

#include "ir.h"

bool ir_struct_equal_expr(const ir_expr *a, const ir_expr *b);
bool ir_struct_equal_stmt(const ir_stmt *a, const ir_stmt *b);
/* Exact equality of two expressions: vars and buffers by identity (not up
 * to renaming), everything else as above: same kinds, dtypes (lanes
 * included), ops, intrinsic and extern names, ramp/broadcast lanes, and
 * float literals bitwise at their precision (0.0 != -0.0, NaN == NaN).
 * Two NULLs are equal. Allocates nothing; the one `same_expr` of passes. */
bool ir_expr_equal(const ir_expr *a, const ir_expr *b);
/* Compares params, syms, body and annotations; ignores the function name. */
bool ir_struct_equal_func(const ir_func *a, const ir_func *b);
/* Like ir_struct_equal_func, but on mismatch writes a description of the
 * first difference into why (if not NULL; truncated to n bytes; "" when
 * equal): the path from the function down, the field and both sides, e.g.
 *   body/block root/seq[1]/for i/extent: 64 vs 32
 * (names in the path are the left function's). */
bool ir_struct_equal_func_explain(const ir_func *a, const ir_func *b, char *why, size_t n);

uint64_t ir_struct_hash_expr(const ir_expr *e);
uint64_t ir_struct_hash_func(const ir_func *f);
/* 16 lowercase hex digits of ir_struct_hash_func; buf needs 17 bytes. */
char *ir_workload_key(const ir_func *f, char buf[17]);

#endif
