/* codegen/cuda_reduce.c — the CUDA emitter's cross-thread reduction: a threadIdx.x
 * loop around B[i] = B[i] op e printed as a warp-shuffle all-reduce (TVM's
 * LowerThreadAllreduce; the pattern and the steps below, docs/CUDA.md). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cuda_int.h"

/* ---- cross-thread reduction (warp shuffles) ---------------------------------
 * A threadIdx.x loop whose body is a nest of serial loops, ifs (the guard of
 * a reduction extent the thread count does not divide: `if j0 * t + j1 <
 * 999`) and lets around one store B[i] = B[i] op e (+, max, min), with i
 * independent of the thread and of the nest, is TVM's cross-thread
 * reduction (LowerThreadAllreduce):
 *  1. every thread of the block accumulates its guarded partial in a
 *     register, starting from op's identity; a thread whose guard is false,
 *     or whose threadIdx.x is past the loop's extent when another loop of the
 *     kernel launches more threads, contributes just the identity;
 *  2. a __shfl_down_sync tree within each warp (a partial last warp — an odd
 *     thread count — uses the mask of its existing lanes and adds a lane's
 *     value only when that lane exists);
 *  3. beyond 32 threads, one value per warp through shared memory and a
 *     second tree in the first warp;
 *  4. thread 0 applies the total (B[i] = B[i] op total); other threads
 *     read it from B (a shared B gets the barrier pass's __syncthreads()
 *     before its next reader, a global one is read by the next launch).
 * Partials of f16/bf16 are float, of 8/16-bit ints int. */

typedef struct red_chain {
  const ir_stmt *store;   /* the B[i] = B[i] op e */
  const ir_stmt *init_if; /* `if (first iteration) B[i] = v0` in front of it, or NULL */
  const ir_stmt *loops[16];
  int nloops;
} red_chain;


/* Walks a thread loop's body through serial loops, else-less ifs and lets to
 * a single store, or to the pair [if (c) B[i] = v0; B[i] = B[i] op e] of a
 * reduction whose init was not decomposed (pooling windows); false for
 * anything else. */
static bool red_walk(const ir_stmt *s, red_chain *ch) {
  memset(ch, 0, sizeof *ch);
  while (s) {
    switch (s->kind) {
    case IR_SEQ: {
      if (s->u.seq.n != 2) return false;
      const ir_stmt *i = s->u.seq.stmts[0], *u = s->u.seq.stmts[1];
      if (i->kind != IR_IF || i->u.ifs.else_s || !i->u.ifs.then_s || i->u.ifs.then_s->kind != IR_STORE ||
          u->kind != IR_STORE)
        return false;
      const ir_stmt *is = i->u.ifs.then_s;
      if (is->u.store.buf != u->u.store.buf || is->u.store.nidx != 1 || u->u.store.nidx != 1 ||
          is->u.store.predicate || !ir_expr_equal(is->u.store.idx[0], u->u.store.idx[0]))
        return false;
      ch->init_if = i;
      ch->store = u;
      return true;
    }
    case IR_FOR:
      if (s->u.loop.kind == IR_FOR_THREAD_BINDING || ch->nloops >= 16) return false;
      ch->loops[ch->nloops++] = s;
      s = s->u.loop.body;
      break;
    case IR_IF:
      if (s->u.ifs.else_s) return false;
      s = s->u.ifs.then_s;
      break;
    case IR_LET: s = s->u.let.body; break;
    case IR_STORE: ch->store = s; return true;
    default: return false;
    }
  }
  return false;
}

typedef struct loads_buf_ctx {
  const ir_buffer *b;
  bool found;
} loads_buf_ctx;
static bool loads_buf_cb(void *ctx, const ir_expr *e) {
  loads_buf_ctx *l = ctx;
  if (e->kind == IR_LOAD && e->u.load.buf == l->b) l->found = true;
  return !l->found;
}
static bool expr_loads_buf(const ir_expr *e, const ir_buffer *b) {
  loads_buf_ctx l = {b, false};
  ir_visitor v = {loads_buf_cb, NULL, &l};
  if (e) ir_visit_expr(&v, e);
  return l.found;
}

/* Does anything on the way from the thread loop to the store (if conditions,
 * let values, loop bounds) read B? The partial would see B before the total. */
static bool red_chain_reads(const ir_stmt *s, const ir_buffer *b) {
  for (; s && s->kind != IR_STORE;) {
    if (s->kind == IR_FOR) {
      if (expr_loads_buf(s->u.loop.min, b) || expr_loads_buf(s->u.loop.extent, b)) return true;
      s = s->u.loop.body;
    } else if (s->kind == IR_IF) {
      if (expr_loads_buf(s->u.ifs.cond, b)) return true;
      s = s->u.ifs.then_s;
    } else if (s->kind == IR_LET) {
      if (expr_loads_buf(s->u.let.value, b)) return true;
      s = s->u.let.body;
    } else {
      return false;
    }
  }
  return false;
}

/* Does cond pin var to one value (`var == c` in a conjunction)? Then one
 * thread stores: no cross-thread reduction. */
static bool red_cond_pins(const ir_expr *e, const ir_var *var) {
  if (!e) return false;
  if (e->kind == IR_AND) return red_cond_pins(e->u.bin.a, var) || red_cond_pins(e->u.bin.b, var);
  return e->kind == IR_EQ && ir_expr_uses_var(e->u.bin.a, var) != ir_expr_uses_var(e->u.bin.b, var);
}
static bool red_path_pinned(const ir_stmt *s, const ir_var *var) {
  for (; s && s->kind != IR_STORE && s->kind != IR_SEQ;) {
    if (s->kind == IR_FOR) s = s->u.loop.body;
    else if (s->kind == IR_LET) s = s->u.let.body;
    else if (s->kind == IR_IF) {
      if (red_cond_pins(s->u.ifs.cond, var)) return true;
      s = s->u.ifs.then_s;
    } else {
      return false;
    }
  }
  return s && s->kind == IR_STORE && red_cond_pins(s->u.store.predicate, var);
}

/* The store of a cross-thread reduction under thread loop `loop` (its index
 * ignores the loop var, no condition on the way pins the thread), or NULL. A `local` buffer is private to each thread
 * (compaction drops the thread index of a local accumulator), so a store to
 * one is never shared. */
static const ir_stmt *racy_reduction_store(const ir_stmt *loop, red_chain *ch) {
  if (!red_walk(loop->u.loop.body, ch) || red_path_pinned(loop->u.loop.body, loop->u.loop.var)) return NULL;
  const ir_stmt *s = ch->store;
  if (s->u.store.buf->scope && strcmp(s->u.store.buf->scope, "local") == 0) return NULL;
  return s->u.store.nidx == 1 && !ir_expr_uses_var(s->u.store.idx[0], loop->u.loop.var) ? s : NULL;
}

/* The accumulator type of a partial of dtype t ("" when unsupported). */
static const char *red_acc_type(ir_dtype t) {
  switch (t.code) {
  case IR_F16: case IR_BF16: case IR_F32: return "float";
  case IR_F64: return "double";
  case IR_I8: case IR_I16: case IR_I32: case IR_U8: return "int";
  case IR_U32: return "unsigned int";
  case IR_I64: return "long long";
  default: return "";
  }
}
static const char *red_identity(ir_dtype t, ir_expr_kind op) {
  if (op == IR_ADD) return "0";
  bool mx = op == IR_MAX;
  switch (t.code) {
  case IR_F16: case IR_BF16: case IR_F32: case IR_F64: return mx ? "-INFINITY" : "INFINITY";
  case IR_I8: return mx ? "(-128)" : "127";
  case IR_I16: return mx ? "(-32768)" : "32767";
  case IR_U8: return mx ? "0" : "255";
  case IR_I32: return mx ? "(-2147483647 - 1)" : "2147483647";
  case IR_U32: return mx ? "0u" : "0xffffffffu";
  case IR_I64: return mx ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
  default: return "0";
  }
}

/* `_red = _red op X;` with X printed by the caller between pre and post. */
static void red_combine_open(cctx *c, int id, ir_expr_kind op) {
  if (op == IR_ADD) P(c, "_red%d = _red%d + ", id, id);
  else P(c, "_red%d = %s(_red%d, ", id, op == IR_MAX ? "tsl_max" : "tsl_min", id);
}
static void red_combine_close(cctx *c, ir_expr_kind op) { P(c, op == IR_ADD ? ";\n" : ");\n"); }

/* The partial of the reduction store being accumulated (st_store redirects
 * it here while try_allreduce prints the thread's serial nest). */
void cu_red_accumulate(cctx *c, const ir_stmt *s) {
  const ir_buffer *b = s->u.store.buf;
  indent(c);
  if (s->u.store.predicate) {
    P(c, "if (");
    cu_ex(c, s->u.store.predicate, -1);
    P(c, ") ");
  }
  red_combine_open(c, c->red_id, c->red_op);
  P(c, "(%s)(", c->red_acc);
  if (is_half(b->dtype)) P(c, "%s(", to_f32(b->dtype));
  cu_ex(c, c->red_rhs, -1);
  if (is_half(b->dtype)) P(c, ")");
  P(c, ")");
  red_combine_close(c, c->red_op);
}

static int64_t pow2_ceil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/* One shuffle tree over the lanes of a warp: lanes below `lanes_expr` hold
 * partials (NULL: every lane of the mask); lane 0 ends with the total. */
static void red_warp_tree(cctx *c, int id, ir_expr_kind op, const char *acc, const char *mask, int64_t from,
                          int64_t width, const char *lanes_expr) {
  indent(c);
  P(c, "#pragma unroll\n");
  indent(c);
  P(c, "for (int _o = %" PRId64 "; _o > 0; _o >>= 1) ", from);
  if (!lanes_expr) {
    red_combine_open(c, id, op);
    if (width < 32) P(c, "__shfl_down_sync(%s, _red%d, _o, %" PRId64 ")", mask, id, width);
    else P(c, "__shfl_down_sync(%s, _red%d, _o)", mask, id);
    red_combine_close(c, op);
    return;
  }
  /* a partial warp: a lane past the last existing one is not in the mask
   * (its value is undefined), so it is read but not added */
  P(c, "{\n");
  c->ind++;
  indent(c);
  P(c, "const %s _v = __shfl_down_sync(%s, _red%d, _o);\n", acc, mask, id);
  indent(c);
  P(c, "if ((int)(threadIdx.x & 31) + _o < %s) ", lanes_expr);
  red_combine_open(c, id, op);
  P(c, "_v");
  red_combine_close(c, op);
  c->ind--;
  indent(c);
  P(c, "}\n");
}

/* Combines _red<id> over the n threads of the block (threadIdx.x); thread 0
 * ends with the total. */
static void red_block(cctx *c, int id, ir_expr_kind op, const char *acc, const char *ident, int64_t n) {
  char mask[32];
  if (n <= 32) {
    snprintf(mask, sizeof mask, "0x%xu", n == 32 ? 0xffffffffu : (unsigned)((1ull << n) - 1));
    int64_t p = pow2_ceil(n);
    if (p == n) {
      red_warp_tree(c, id, op, acc, mask, n / 2, n, NULL);
    } else {
      char lanes[24];
      snprintf(lanes, sizeof lanes, "%" PRId64, n);
      red_warp_tree(c, id, op, acc, mask, p / 2, 32, lanes);
    }
    return;
  }
  int64_t nw = (n + 31) / 32, last = n % 32;
  if (last == 0) {
    red_warp_tree(c, id, op, acc, "0xffffffffu", 16, 32, NULL);
  } else {
    indent(c);
    P(c, "{ /* warp %" PRId64 " has %" PRId64 " of 32 lanes */\n", nw - 1, last);
    c->ind++;
    indent(c);
    P(c, "const bool _lw = (threadIdx.x >> 5) == %" PRId64 ";\n", nw - 1);
    indent(c);
    P(c, "const unsigned _m = _lw ? 0x%xu : 0xffffffffu;\n", (unsigned)((1ull << last) - 1));
    indent(c);
    P(c, "const int _wl = _lw ? %" PRId64 " : 32;\n", last);
    red_warp_tree(c, id, op, acc, "_m", 16, 32, "_wl");
    c->ind--;
    indent(c);
    P(c, "}\n");
  }
  indent(c);
  P(c, "__shared__ %s _redw%d[%" PRId64 "];\n", acc, id, nw);
  indent(c);
  P(c, "if ((threadIdx.x & 31) == 0) _redw%d[threadIdx.x >> 5] = _red%d;\n", id, id);
  indent(c);
  P(c, "__syncthreads();\n");
  indent(c);
  P(c, "if (threadIdx.x < 32) {\n");
  c->ind++;
  indent(c);
  P(c, "_red%d = threadIdx.x < %" PRId64 " ? _redw%d[threadIdx.x] : (%s)%s;\n", id, nw, id, acc, ident);
  red_warp_tree(c, id, op, acc, "0xffffffffu", pow2_ceil(nw) / 2 > 0 ? pow2_ceil(nw) / 2 : 1, 32, NULL);
  c->ind--;
  indent(c);
  P(c, "}\n");
  indent(c);
  P(c, "__syncthreads(); /* _redw may be reused by the next reduction */\n");
  c->nsync += 2;
  c->shared_bytes += nw * (int64_t)(strcmp(acc, "double") == 0 || strcmp(acc, "long long") == 0 ? 8 : 4);
}

/* Emits loop (bound to threadIdx.x, whose body stores to an element every
 * thread shares) as a cross-thread reduction. Returns false when the body is
 * not the reduction pattern (the caller's race check then refuses it); true
 * when emitted, or refused here with the reason (c->st). */
bool cu_try_allreduce(cctx *c, const ir_stmt *loop) {
  red_chain ch;
  const ir_stmt *s = racy_reduction_store(loop, &ch);
  if (!s || s->u.store.value->dtype.lanes != 1) return false;
  ir_expr_kind op;
  const ir_expr *rhs;
  if (!cu_reduction_form(s, &op, &rhs)) return false;
  const ir_buffer *b = s->u.store.buf;
  const ir_expr *idx = s->u.store.idx[0];
  for (int i = 0; i < ch.nloops; i++)
    if (ir_expr_uses_var(idx, ch.loops[i]->u.loop.var)) return false; /* one element per thread loop */
  if (expr_loads_buf(rhs, b) || red_chain_reads(loop->u.loop.body, b) ||
      (s->u.store.predicate && expr_loads_buf(s->u.store.predicate, b)))
    return false; /* the partial would read B before the total: not a reduction */
  /* an init inside the thread loop: B[i] = v0 at the reduction's first
   * iteration (the block's init predicate, all reduction vars at their
   * minimum), which one thread — its condition depends on the thread — does
   * before the total is applied */
  if (ch.init_if && (!ir_expr_uses_var(ch.init_if->u.ifs.cond, loop->u.loop.var) ||
                     expr_loads_buf(ch.init_if->u.ifs.cond, b) ||
                     expr_loads_buf(ch.init_if->u.ifs.then_s->u.store.value, b)))
    return false;
  const char *var = loop->u.loop.var->name;
  int64_t ext = 0, n = c->launch[TAG_TX];
  if (!ir_as_int(loop->u.loop.extent, &ext)) {
    FAIL(c, "cuda: cross-thread reduction of %s over loop %s: its threadIdx.x extent is not a constant", b->name,
         var);
    return true;
  }
  if (c->launch[TAG_TY] > 1 || c->launch[TAG_TZ] > 1) {
    FAIL(c, "cuda: cross-thread reduction of %s over loop %s (threadIdx.x): the block also has threadIdx.y/z "
            "(%" PRId64 " x %" PRId64 "); the warp-shuffle all-reduce needs a one-dimensional block",
         b->name, var, c->launch[TAG_TY], c->launch[TAG_TZ]);
    return true;
  }
  if (n < 2 || ext > n) return false;
  /* every thread must reach the shuffles (and the barriers beyond a warp) */
  for (int i = 0; i < c->nconds; i++) {
    bool load = false;
    if ((cu_expr_mask(c, c->conds[i], &load) & THREAD_BITS) || load) {
      FAIL(c, "cuda: cross-thread reduction of %s over loop %s sits under a condition that depends on the "
              "thread or on memory; every thread of the block must reach its warp shuffles",
           b->name, var);
      return true;
    }
  }
  const char *acc = red_acc_type(b->dtype);
  if (!*acc) {
    char dt[16];
    FAIL(c, "cuda: cross-thread reduction of %s over loop %s: no warp-shuffle partial for dtype %s", b->name,
         var, ir_dtype_str(b->dtype, dt, sizeof dt));
    return true;
  }
  const char *ident = red_identity(b->dtype, op);
  int id = c->tmp++;
  indent(c);
  P(c, "{ /* cross-thread reduction of %s over %s (%s, %" PRId64 " of %" PRId64 " threads%s): warp shuffles */\n",
    b->name, var, loop->u.loop.thread, ext, n, ext < n ? ", the rest add the identity" : "");
  c->ind++;
  indent(c);
  P(c, "%s _red%d = (%s)%s;\n", acc, id, acc, ident);
  /* 1. the thread's partial: the serial nest, with the store redirected */
  bool guard = ext < n;
  if (guard) {
    indent(c);
    P(c, "if (threadIdx.x < %" PRId64 ") {\n", ext);
    c->ind++;
  }
  indent(c);
  P(c, "const %s %s = (%s)threadIdx.x;\n", cu_ctype(c, loop->u.loop.var->dtype), cu_vname(c, loop->u.loop.var),
    cu_ctype(c, loop->u.loop.var->dtype));
  int nv = c->nvars, nb = c->an.n;
  cu_push_var(c, loop->u.loop.var, 1u << TAG_TX, TAG_TX, 1);
  ir_analyzer_bind(&c->an, loop->u.loop.var, loop->u.loop.min, loop->u.loop.extent);
  const ir_stmt *saved_store = c->red_store;
  c->red_store = s;
  c->red_id = id;
  c->red_op = op;
  c->red_acc = acc;
  c->red_rhs = rhs;
  int ntl = c->ntloops; /* other stores below (an init) see the thread loop */
  if (c->ntloops < 32) c->tloops[c->ntloops++] = loop;
  cu_st(c, loop->u.loop.body);
  c->ntloops = ntl;
  c->red_store = saved_store;
  ir_analyzer_truncate(&c->an, nb);
  c->nvars = nv;
  if (guard) {
    c->ind--;
    indent(c);
    P(c, "}\n");
  }
  /* 2-3. the block's total */
  red_block(c, id, op, acc, ident, n);
  if (ch.init_if && n <= 32) {
    /* the init may have been stored by another lane (beyond a warp, the
     * __syncthreads() above orders it) */
    indent(c);
    P(c, "__syncwarp(0x%xu);\n", n == 32 ? 0xffffffffu : (unsigned)((1ull << n) - 1));
  }
  /* 4. applied once */
  indent(c);
  P(c, "if (threadIdx.x == 0) %s[", cu_bname(c, b));
  cu_ex(c, idx, -1);
  P(c, "] = ");
  if (is_half(b->dtype)) P(c, "%s(", from_f32(b->dtype));
  else P(c, "(%s)(", cu_ctype(c, b->dtype));
  if (op == IR_ADD) P(c, "(%s)", acc);
  else P(c, "%s((%s)", op == IR_MAX ? "tsl_max" : "tsl_min", acc);
  if (is_half(b->dtype)) P(c, "%s(", to_f32(b->dtype));
  P(c, "%s[", cu_bname(c, b));
  cu_ex(c, idx, -1);
  P(c, "]");
  if (is_half(b->dtype)) P(c, ")");
  if (op == IR_ADD) P(c, " + _red%d);\n", id);
  else P(c, ", _red%d));\n", id);
  c->ind--;
  indent(c);
  P(c, "}\n");
  c->nshuffle++;
  return true;
}

