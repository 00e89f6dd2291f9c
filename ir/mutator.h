/* mutator.h — the IR's one copy-on-write rewriter (TVM's StmtExprMutator,
 * in C). ir_mutate_expr/ir_mutate_stmt walk a tree and return the rewritten
 * tree; a node is rebuilt only when one of its children changed, otherwise
 * the same pointer comes back, so untouched subtrees stay shared. Passes
 * customise it with hooks: a pre hook may return a replacement (the walk
 * does not descend into it) or NULL for the default; a post hook sees the
 * node with its children already rewritten and may return a replacement.
 * Built in: variable substitution (an ir_var_map), buffer remapping (loads,
 * stores, regions, access_ptr, allocations) and deep copy (ir_func_copy).
 * Every kind of expression and statement is covered once, in mutator.c; a
 * new node kind is added there, not in each pass. docs/IR.md has more. */
#ifndef TESSEL_IR_MUTATOR_H
#define TESSEL_IR_MUTATOR_H

#include "ir.h"

typedef struct ir_mutator ir_mutator;
struct ir_mutator {
  ts_arena *arena; /* new nodes go here */
  void *ctx;       /* the pass's own state, for the hooks */
  /* Hooks, each optional. pre_*: a replacement for the node (not walked
   * further), or NULL to walk its children by default. post_*: called with
   * the original node and its rebuilt form (== orig if nothing changed);
   * returns the final node, or NULL to keep the rebuilt one. A hook that
   * fails (OOM) calls ir_mutator_fail and returns NULL. */
  ir_expr *(*pre_expr)(ir_mutator *m, ir_expr *e);
  ir_expr *(*post_expr)(ir_mutator *m, const ir_expr *orig, ir_expr *e);
  ir_stmt *(*pre_stmt)(ir_mutator *m, ir_stmt *s);
  ir_stmt *(*post_stmt)(ir_mutator *m, const ir_stmt *orig, ir_stmt *s);
  /* Built-in rewrites, applied by the default walk (after pre hooks). */
  const ir_var_map *vars;       /* var uses -> expressions */
  ir_buffer *buf_from, *buf_to; /* every use and allocation of buf_from */
  bool deep;                    /* fresh vars/buffers at definitions, every node new */
  bool failed;                  /* set on OOM (or by ir_mutator_fail) */
  /* Internal: definitions renamed so far (deep copy, rebuilt buffer shapes). */
  ir_var_map defs_;
  ts_vec bufs_old_, bufs_new_;
};

/* Zeroes m and sets its arena; ir_mutator_fini frees its internal tables. */
void ir_mutator_init(ir_mutator *m, ts_arena *a);
void ir_mutator_fini(ir_mutator *m);
static inline void ir_mutator_fail(ir_mutator *m) { m->failed = true; }

/* A pass's hooks, for the one-shot forms below. */
typedef struct ir_mutator_hooks {
  ir_expr *(*pre_expr)(ir_mutator *m, ir_expr *e);
  ir_expr *(*post_expr)(ir_mutator *m, const ir_expr *orig, ir_expr *e);
  ir_stmt *(*pre_stmt)(ir_mutator *m, ir_stmt *s);
  ir_stmt *(*post_stmt)(ir_mutator *m, const ir_stmt *orig, ir_stmt *s);
} ir_mutator_hooks;

/* One-shot rewrite: a mutator on arena a with hooks h and ctx, over one
 * tree, then finalised. On failure sets *failed (never clears it) and
 * returns what ir_mutate_* returned. */
ir_expr *ir_rewrite_expr(ts_arena *a, const ir_mutator_hooks *h, void *ctx, ir_expr *e, bool *failed);
ir_stmt *ir_rewrite_stmt(ts_arena *a, const ir_mutator_hooks *h, void *ctx, ir_stmt *s, bool *failed);

/* Rewrite with hooks. On failure m->failed is set and the original (or a
 * partly rewritten) node is returned: check m->failed before using it. */
ir_expr *ir_mutate_expr(ir_mutator *m, ir_expr *e);
ir_stmt *ir_mutate_stmt(ir_mutator *m, ir_stmt *s);
/* The default step alone (no hooks on the node itself; its children go
 * through ir_mutate_*): for a pre hook that wraps the default walk, like
 * calling the base class's VisitStmt_ in TVM. */
ir_expr *ir_mutate_expr_children(ir_mutator *m, ir_expr *e);
ir_stmt *ir_mutate_stmt_children(ir_mutator *m, ir_stmt *s);
/* s with its i-th statement child replaced (FOR/LET/ALLOCATE body: 0; IF
 * then: 0, else: 1; SEQ: element i): s itself when child is already there,
 * else a clone on m's arena (m->failed on OOM or a bad slot). For a pre hook
 * that walks children under different state, e.g. the two arms of an if. */
ir_stmt *ir_stmt_with_child(ir_mutator *m, ir_stmt *s, int i, ir_stmt *child);
/* Rewrites an array of n expressions; returns src when none changed, else a
 * new array (and sets *changed if changed is not NULL). */
ir_expr **ir_mutate_exprs(ir_mutator *m, int n, ir_expr **src, bool *changed);
/* A whole function: params, syms (minus those bound in drop), annotations,
 * body. Always a new ir_func; NULL on failure. */
ir_func *ir_mutate_func(ir_mutator *m, const ir_func *f, const ir_var_map *drop);

#endif
