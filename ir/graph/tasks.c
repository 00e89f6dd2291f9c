/* tasks.c — task extraction (tasks.h): the distinct bound PrimFuncs the
 * graph calls, keyed by structural hash, with weights and FLOP counts. */
#include <string.h>

#include "../mutator.h"
#include "../print.h"
#include "../struct.h"
#include "tasks.h"

ir_func *tg_task_bind(ts_arena *a, const ir_func *f, int nsyms, const char *const *names, const int64_t *values,
                      ts_diag *d) {
  if (f->nsyms == 0) return (ir_func *)f;
  const char *nm[64];
  int64_t vs[64];
  if (f->nsyms > 64) {
    ts_diag_set(d, TS_EUNSUPPORTED, "%s: over 64 size vars", f->name);
    return NULL;
  }
  for (int i = 0; i < f->nsyms; i++) {
    nm[i] = f->syms[i]->name;
    vs[i] = TG_TASK_DEFAULT_SYM;
    for (int j = 0; j < nsyms; j++)
      if (!strcmp(names[j], nm[i])) vs[i] = values[j];
  }
  return ir_func_bind_syms(a, f, f->nsyms, nm, vs, d);
}

/* ---- FLOPs ---------------------------------------------------------------------------- */

typedef struct fl_ctx {
  double ops;
} fl_ctx;

/* ops == true: integer +, -, * count too (the int8 contractions' multiply-adds,
 * as the int8 workloads count them); false inside a select's condition,
 * whose integer arithmetic is index bounds. */
static double expr_flops_in(const ir_expr *e, bool ints) {
  if (!e) return 0;
  double s = 0;
  switch (e->kind) {
    case IR_INT_IMM:
    case IR_FLOAT_IMM:
    case IR_VAR:
      return 0;
    case IR_LOAD: /* index math is not counted */
      return 0;
    case IR_NOT:
      return expr_flops_in(e->u.un.a, ints);
    case IR_SELECT:
      return expr_flops_in(e->u.sel.t, ints) + expr_flops_in(e->u.sel.f, ints) + expr_flops_in(e->u.sel.cond, false);
    case IR_CAST:
      return expr_flops_in(e->u.cast.value, ints);
    case IR_CALL:
      for (int i = 0; i < e->u.call.nargs; i++) s += expr_flops_in(e->u.call.args[i], ints);
      return s + (ir_dtype_is_float(e->dtype) ? 1 : 0);
    default:
      if (ir_is_binop(e->kind)) {
        s = expr_flops_in(e->u.bin.a, ints) + expr_flops_in(e->u.bin.b, ints);
        /* float arithmetic counts; comparisons of floats count too */
        bool fl = ir_dtype_is_float(e->u.bin.a->dtype);
        bool iop = ints && (e->kind == IR_ADD || e->kind == IR_SUB || e->kind == IR_MUL);
        return s + (fl || iop ? 1 : 0);
      }
      return 0;
  }
}

static double expr_flops(const ir_expr *e) { return expr_flops_in(e, true); }

/* Sum over statements of (float ops per execution) x (executions). */
static double stmt_flops(const ir_stmt *s, double trips, bool *ok) {
  if (!s) return 0;
  switch (s->kind) {
    case IR_FOR: {
      int64_t ext;
      if (!ir_as_int(s->u.loop.extent, &ext)) {
        *ok = false;
        return 0;
      }
      return stmt_flops(s->u.loop.body, trips * (double)ext, ok);
    }
    case IR_BLOCK_REALIZE: {
      const ir_block *b = s->u.realize.block;
      double f = stmt_flops(b->body, trips, ok);
      if (b->init) {
        /* init runs once per spatial point: trips / product of R extents */
        double red = 1;
        for (int i = 0; i < b->niter; i++) {
          int64_t ext;
          if (b->iters[i].type == IR_ITER_R && ir_as_int(b->iters[i].dom.extent, &ext) && ext > 0) red *= (double)ext;
        }
        f += stmt_flops(b->init, trips / red, ok);
      }
      return f;
    }
    case IR_SEQ: {
      double f = 0;
      for (int i = 0; i < s->u.seq.n; i++) f += stmt_flops(s->u.seq.stmts[i], trips, ok);
      return f;
    }
    case IR_IF:
      return stmt_flops(s->u.ifs.then_s, trips, ok) + stmt_flops(s->u.ifs.else_s, trips, ok);
    case IR_LET:
      return stmt_flops(s->u.let.body, trips, ok);
    case IR_ALLOCATE:
      return stmt_flops(s->u.alloc.body, trips, ok);
    case IR_STORE:
      return trips * expr_flops(s->u.store.value);
    default:
      return 0;
  }
}

double tg_func_flops(const ir_func *f) {
  bool ok = true;
  double v = stmt_flops(f->body, 1, &ok);
  return ok ? v : -1;
}

/* ---- extraction --------------------------------------------------------------------- */

/* Bit i set when the call passes a graph constant as input i: the param is
 * layout-free for this call (Ansor's layout_free_placeholders). */
static int64_t const_inputs(const tg_graph *g, const tg_node *nd, const ir_func *f) {
  int64_t m = 0;
  for (int a = 0; a < nd->nin && a < f->ninputs && a < 63; a++) {
    int v = nd->inputs[a];
    if (v >= 0 && v < g->nvalues && g->values[v]->kind == TG_V_CONST && !g->values[v]->fixed_layout)
      m |= (int64_t)1 << a;
  }
  return m;
}

/* A shallow copy of f carrying the IR_FUNC_ANN_LAYOUT_FREE mark (f itself may
 * be the module's function, which keeps no mark). */
static ir_func *mark_layout_free(ts_arena *a, ir_func *f, int64_t mask) {
  ir_func *c = TS_ANEW(a, ir_func);
  if (!c) return NULL;
  *c = *f;
  if (ir_annot_set(a, &c->nannot, &c->annots,
                   (ir_annot){.key = IR_FUNC_ANN_LAYOUT_FREE, .kind = IR_ANN_INT, .v.i = mask}))
    return NULL;
  return c;
}

void tg_tasks_free(tg_task *t, int n) {
  (void)n;
  ts_free(t);
}

ts_status tg_extract_tasks_at(tg_graph *g, int nsyms, const char *const *names, const int64_t *values, tg_task **out,
                              int *n, ts_diag *d) {
  *out = NULL;
  *n = 0;
  int cap = 8, cnt = 0;
  tg_task *t = ts_calloc((size_t)cap, sizeof *t);
  if (!t) return ts_diag_set(d, TS_ENOMEM, "out of memory");
  ts_arena *a = g->mod->arena;
  for (int i = 0; i < g->nnodes; i++) {
    const tg_node *nd = g->nodes[i];
    if (nd->dead) continue;
    if (nd->op != TG_OP_CALL) {
      ts_free(t);
      return ts_diag_set(d, TS_EINVAL, "node '%s' is %s, not a call: run the pass pipeline before extracting tasks",
                         nd->name, tg_op_name(nd->op));
    }
    const ir_func *f = ir_module_get(g->mod, nd->callee);
    if (!f) {
      ts_free(t);
      return ts_diag_set(d, TS_ENOTFOUND, "node '%s' calls %s, which the module does not hold", nd->name,
                         nd->callee);
    }
    ir_func *bf = tg_task_bind(a, f, nsyms, names, values, d);
    if (!bf) {
      ts_free(t);
      return d && d->code ? d->code : TS_ENOMEM;
    }
    uint64_t key = ir_struct_hash_func(bf);
    int found = -1;
    for (int k = 0; k < cnt && found < 0; k++)
      if (t[k].key == key && ir_struct_equal_func(t[k].func, bf)) found = k;
    int64_t lf = const_inputs(g, nd, f);
    if (found >= 0) {
      t[found].weight++;
      t[found].layout_free &= lf; /* layout-free only if every call feeds a constant */
      continue;
    }
    if (cnt == cap) {
      tg_task *nt = ts_realloc(t, (size_t)cap * 2 * sizeof *t);
      if (!nt) {
        ts_free(t);
        return ts_diag_set(d, TS_ENOMEM, "out of memory");
      }
      t = nt;
      cap *= 2;
    }
    char *def = ir_func_to_string(bf);
    if (!def) {
      ts_free(t);
      return ts_diag_set(d, TS_ENOMEM, "out of memory printing %s", f->name);
    }
    t[cnt] = (tg_task){.name = f->name,
                       .key = key,
                       .weight = 1,
                       .flops = tg_func_flops(bf),
                       .func = bf,
                       .definition = ts_arena_strdup(a, def),
                       .layout_free = lf};
    ts_free(def);
    if (!t[cnt].definition) {
      ts_free(t);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    cnt++;
  }
  /* mark the layout-free params on the task's function (and so in the
   * definition the log stores); the key does not see the mark */
  for (int k = 0; k < cnt; k++) {
    if (!t[k].layout_free) continue;
    ir_func *mf = mark_layout_free(a, t[k].func, t[k].layout_free);
    char *def = mf ? ir_func_to_string(mf) : NULL;
    if (def) t[k].definition = ts_arena_strdup(a, def);
    ts_free(def);
    if (!mf || !def || !t[k].definition) {
      ts_free(t);
      return ts_diag_set(d, TS_ENOMEM, "out of memory");
    }
    t[k].func = mf;
  }
  *out = t;
  *n = cnt;
  return TS_OK;
}

ts_status tg_extract_tasks(tg_graph *g, tg_task **out, int *n, ts_diag *d) {
  return tg_extract_tasks_at(g, 0, NULL, NULL, out, n, d);
}

/* ---- buckets: a function padded up to given sizes ------------------------------------- */

typedef struct pad_ctx {
  const ir_func *f;
  const int64_t *bound; /* per f->syms */
  ir_var **padded;      /* loop vars whose extent was padded */
  int npadded, cap;
  ir_var **guarded;     /* loop vars an iter's predicate guards */
  int nguarded, capg;
  const char *why;      /* the first refusal */
} pad_ctx;

/* e's value with every size var at its bound, when e is nondecreasing in the
 * size vars (+, *, floordiv by a positive constant, min, max of non-negative
 * constants and size vars): then e at smaller sizes is at most that value. */
static bool eval_upto(const pad_ctx *c, const ir_expr *e, int64_t *v) {
  int64_t x, y;
  switch (e->kind) {
    case IR_INT_IMM:
      *v = e->u.ival;
      return *v >= 0;
    case IR_VAR:
      for (int i = 0; i < c->f->nsyms; i++)
        if (c->f->syms[i] == e->u.var) return *v = c->bound[i], true;
      return false;
    case IR_CAST:
      return eval_upto(c, e->u.cast.value, v);
    case IR_ADD: case IR_MUL: case IR_FLOORDIV: case IR_MIN: case IR_MAX:
      if (!eval_upto(c, e->u.bin.a, &x) || !eval_upto(c, e->u.bin.b, &y)) return false;
      if (e->kind == IR_ADD) return !__builtin_add_overflow(x, y, v);
      if (e->kind == IR_MUL) return !__builtin_mul_overflow(x, y, v);
      if (e->kind == IR_FLOORDIV) return e->u.bin.b->kind == IR_INT_IMM && y > 0 && (*v = x / y, true);
      *v = e->kind == IR_MIN ? (x < y ? x : y) : (x > y ? x : y);
      return true;
    default:
      return false;
  }
}

static bool uses_sym(const ir_func *f, const ir_expr *e) {
  for (int i = 0; e && i < f->nsyms; i++)
    if (ir_expr_uses_var(e, f->syms[i])) return true;
  return false;
}

static bool push_var(ir_var ***arr, int *n, int *cap, ir_var *v) {
  for (int i = 0; i < *n; i++)
    if ((*arr)[i] == v) return true;
  if (!ts_grow((void **)arr, cap, *n + 1, sizeof **arr)) return false;
  (*arr)[(*n)++] = v;
  return true;
}

static ir_stmt *pad_post(ir_mutator *m, const ir_stmt *orig, ir_stmt *s) {
  (void)orig;
  pad_ctx *c = m->ctx;
  ts_arena *a = m->arena;
  if (c->why) return NULL;
  if (s->kind == IR_FOR && uses_sym(c->f, s->u.loop.extent)) {
    int64_t e;
    if (uses_sym(c->f, s->u.loop.min) || !eval_upto(c, s->u.loop.extent, &e)) {
      c->why = "a loop's extent is no nondecreasing expression of the sizes";
      return NULL;
    }
    ir_stmt *n = ir_stmt_clone(a, s);
    if (!n || !(n->u.loop.extent = ir_int(a, s->u.loop.extent->dtype, e)) ||
        !push_var(&c->padded, &c->npadded, &c->cap, s->u.loop.var)) {
      ir_mutator_fail(m);
      return NULL;
    }
    return n;
  }
  if (s->kind != IR_BLOCK_REALIZE) return NULL;
  const ir_block *b = s->u.realize.block;
  bool any = false;
  for (int i = 0; i < b->niter; i++) any |= uses_sym(c->f, b->iters[i].dom.extent) || uses_sym(c->f, b->iters[i].dom.min);
  if (!any) return NULL;
  ir_block *nb = ir_block_clone(a, b);
  ir_stmt *n = ir_stmt_clone(a, s);
  ir_iter_var *its = nb ? TS_ANEWN(a, ir_iter_var, b->niter) : NULL;
  if (!n || !its) {
    ir_mutator_fail(m);
    return NULL;
  }
  memcpy(its, b->iters, (size_t)b->niter * sizeof *its);
  ir_expr *pred = s->u.realize.predicate;
  for (int i = 0; i < b->niter; i++) {
    ir_expr *ext = b->iters[i].dom.extent, *val = s->u.realize.iter_values[i];
    if (!uses_sym(c->f, ext)) continue;
    int64_t e;
    if (uses_sym(c->f, b->iters[i].dom.min) || !eval_upto(c, ext, &e) || val->kind != IR_VAR) {
      c->why = "a block's iteration domain is no nondecreasing expression of the sizes bound to a loop";
      return NULL;
    }
    its[i].dom.extent = ir_int(a, ext->dtype, e);
    /* the instance runs only inside the call's own sizes */
    ir_expr *lim = ir_dtype_eq(ext->dtype, val->dtype) ? ext : ir_cast(a, val->dtype, ext);
    ir_expr *lt = lim ? ir_binop(a, IR_LT, val, lim) : NULL;
    pred = pred && lt ? ir_binop(a, IR_AND, pred, lt) : NULL;
    if (!its[i].dom.extent || !pred || !push_var(&c->guarded, &c->nguarded, &c->capg, val->u.var)) {
      ir_mutator_fail(m);
      return NULL;
    }
  }
  nb->iters = its;
  n->u.realize.block = nb;
  n->u.realize.predicate = pred;
  return n;
}

ir_func *tg_task_bind_upto(ts_arena *a, const ir_func *f, int nsyms, const char *const *names,
                           const int64_t *values, ts_diag *d) {
  if (f->nsyms == 0) return (ir_func *)f;
  int64_t *bound = TS_ANEWN(a, int64_t, f->nsyms);
  if (!bound) {
    ts_diag_set(d, TS_ENOMEM, "out of memory");
    return NULL;
  }
  for (int i = 0; i < f->nsyms; i++) {
    bound[i] = TG_TASK_DEFAULT_SYM;
    for (int j = 0; j < nsyms; j++)
      if (!strcmp(names[j], f->syms[i]->name)) bound[i] = values[j];
  }
  pad_ctx c = {.f = f, .bound = bound};
  ir_mutator mu;
  ir_mutator_init(&mu, a);
  mu.ctx = &c;
  mu.post_stmt = pad_post;
  ir_func *nf = ir_mutate_func(&mu, f, NULL);
  bool failed = mu.failed;
  ir_mutator_fini(&mu);
  /* every padded loop must run a guarded instance: a loop over a size no
   * block iterates (its body repeated) is not padded safely */
  for (int i = 0; !c.why && i < c.npadded; i++) {
    bool g = false;
    for (int j = 0; j < c.nguarded && !g; j++) g = c.guarded[j] == c.padded[i];
    if (!g) c.why = "a loop over a size binds no block iteration";
  }
  ts_free(c.padded);
  ts_free(c.guarded);
  if (failed || !nf) {
    ts_diag_set(d, TS_ENOMEM, "out of memory padding %s", f->name);
    return NULL;
  }
  if (c.why) {
    ts_diag_set(d, TS_EUNSUPPORTED, "%s cannot be padded to its bucket: %s", f->name, c.why);
    return NULL;
  }
  /* fresh size vars that carry their bound, so the schedule primitives'
   * analyzer proves what holds below the bucket (a padded tile covers the
   * buffer's symbolic extent) */
  ir_func *cf = ir_func_copy(a, nf);
  if (!cf) {
    ts_diag_set(d, TS_ENOMEM, "out of memory padding %s", f->name);
    return NULL;
  }
  for (int i = 0; i < cf->nsyms; i++) cf->syms[i]->upper = bound[i];
  return cf;
}
