/* ir.h — tessel's loop IR: dtypes, expressions, buffers, statements (loops
 * and TensorIR-style blocks), PrimFunc and IRModule. Nodes live in a
 * ts_arena (an ir_module owns one) and are immutable once built: rewrites
 * build new nodes and share untouched subtrees. Vars and buffers are
 * compared by pointer. docs/IR.md ("Memory", "The IR", "Notes by file"). */
#ifndef TESSEL_IR_H
#define TESSEL_IR_H

#include "base/ts.h"

/* ---- dtypes -------------------------------------------------------------- */
/* X(enum, name, bits, class) with class 'b' bool, 'i' signed, 'u' unsigned,
 * 'f' float, 'h' opaque handle. */
#define IR_DTYPE_LIST(X)        \
  X(IR_BOOL, "bool", 1, 'b')    \
  X(IR_I8, "i8", 8, 'i')        \
  X(IR_I16, "i16", 16, 'i')     \
  X(IR_I32, "i32", 32, 'i')     \
  X(IR_I64, "i64", 64, 'i')     \
  X(IR_U8, "u8", 8, 'u')        \
  X(IR_U32, "u32", 32, 'u')     \
  X(IR_F16, "f16", 16, 'f')     \
  X(IR_BF16, "bf16", 16, 'f')   \
  X(IR_F32, "f32", 32, 'f')     \
  X(IR_F64, "f64", 64, 'f')     \
  X(IR_HANDLE, "handle", 64, 'h')

typedef enum {
#define IR_X(e, n, b, c) e,
  IR_DTYPE_LIST(IR_X)
#undef IR_X
  IR_DTYPE_COUNT
} ir_dtype_code;

typedef struct ir_dtype {
  uint8_t code;   /* ir_dtype_code */
  uint16_t lanes; /* 1 for scalars */
} ir_dtype;

static inline ir_dtype ir_dt(ir_dtype_code c) { return (ir_dtype){(uint8_t)c, 1}; }
static inline ir_dtype ir_dt_vec(ir_dtype_code c, int lanes) {
  return (ir_dtype){(uint8_t)c, (uint16_t)lanes};
}
const char *ir_dtype_code_name(ir_dtype_code c);
int ir_dtype_bits(ir_dtype t);          /* bits of one lane; bool counts 8 in memory */
int ir_dtype_bytes(ir_dtype t);         /* storage bytes of one lane (bool: 1) */
bool ir_dtype_is_float(ir_dtype t);
bool ir_dtype_is_int(ir_dtype t);       /* signed or unsigned integer (not bool) */
bool ir_dtype_is_signed(ir_dtype t);
bool ir_dtype_is_bool(ir_dtype t);
bool ir_dtype_eq(ir_dtype a, ir_dtype b);
/* Writes "f32" or "f32x8"; returns buf. */
char *ir_dtype_str(ir_dtype t, char *buf, size_t n);
/* Parses "f32", "i8x16", "float32", "int32" ...; false if unknown. */
bool ir_dtype_parse(const char *s, ir_dtype *out);

/* ---- variables and buffers ---------------------------------------------- */
typedef struct ir_var {
  const char *name;
  ir_dtype dtype; /* i32/i64 for loop and size vars; handle for pointers */
  uint32_t id;    /* unique per process, for stable printing/debug only */
  /* A size var known to be at most this (> 0), e.g. a function padded to a
   * shape bucket (tg_task_bind_upto): the analyzer bounds the var by
   * [0, upper] where it has no fact. 0: unknown. Deep copies keep it. */
  int64_t upper;
} ir_var;

struct ir_expr;
typedef struct ir_buffer {
  const char *name;
  ir_dtype dtype;
  int ndim;
  struct ir_expr **shape;   /* ndim extents (may use symbolic size vars) */
  struct ir_expr **strides; /* NULL = compact row-major; else ndim strides in elements */
  struct ir_expr *elem_offset; /* NULL = 0 */
  const char *scope;        /* "global", "shared", "local", or a named scope */
  int64_t align;            /* data alignment in bytes; 0 = default */
  /* storage_align per axis: factor 0 = none. Array of ndim or NULL. */
  int64_t *align_factor, *align_offset;
  uint32_t id;
} ir_buffer;

typedef struct ir_range {
  struct ir_expr *min, *extent;
} ir_range;

/* ---- expressions --------------------------------------------------------- */
/* X(enum, print-name, infix-symbol-or-NULL, precedence) for binary nodes. */
#define IR_BINOP_LIST(X)              \
  X(IR_ADD, "add", "+", 6)            \
  X(IR_SUB, "sub", "-", 6)            \
  X(IR_MUL, "mul", "*", 7)            \
  X(IR_DIV, "div", "/", 7)            \
  X(IR_FLOORDIV, "floordiv", "//", 7) \
  X(IR_FLOORMOD, "floormod", "%", 7)  \
  X(IR_MIN, "min", NULL, 0)           \
  X(IR_MAX, "max", NULL, 0)           \
  X(IR_EQ, "eq", "==", 4)             \
  X(IR_NE, "ne", "!=", 4)             \
  X(IR_LT, "lt", "<", 5)              \
  X(IR_LE, "le", "<=", 5)             \
  X(IR_GT, "gt", ">", 5)              \
  X(IR_GE, "ge", ">=", 5)             \
  X(IR_AND, "and", "&&", 3)           \
  X(IR_OR, "or", "||", 2)

/* Intrinsic calls: X(enum, name, nargs). */
#define IR_INTRIN_LIST(X)  \
  X(IR_EXP, "exp", 1)      \
  X(IR_LOG, "log", 1)      \
  X(IR_SQRT, "sqrt", 1)    \
  X(IR_RSQRT, "rsqrt", 1)  \
  X(IR_TANH, "tanh", 1)    \
  X(IR_ERF, "erf", 1)      \
  X(IR_SIGMOID, "sigmoid", 1) \
  X(IR_POW, "pow", 2)      \
  X(IR_FMA, "fma", 3)      \
  X(IR_ABS, "abs", 1)      \
  X(IR_FLOOR, "floor", 1)  \
  X(IR_CEIL, "ceil", 1)    \
  X(IR_ROUND, "round", 1) /* half to even */ \
  X(IR_SIN, "sin", 1)      \
  X(IR_COS, "cos", 1)

typedef enum {
  IR_INT_IMM,
  IR_FLOAT_IMM,
  IR_VAR,
#define IR_X(e, n, s, p) e,
  IR_BINOP_LIST(IR_X)
#undef IR_X
  IR_NOT,
  IR_SELECT,    /* cond ? t : f, both sides evaluated (no side effects) */
  IR_CAST,
  IR_CALL,      /* intrinsic */
  IR_LOAD,      /* buffer load */
  IR_RAMP,      /* base + i*stride for i in lanes (lowering) */
  IR_BROADCAST, /* value repeated in lanes (lowering) */
  /* Target intrinsics and externs (docs/TENSORIZE.md). */
  IR_CALL_EXTERN, /* named call; dtype is the result type; "llvm.<name>" is an LLVM
                     intrinsic, "tessel.wmma.*" CUDA WMMA; a statement-level
                     call is IR_EVALUATE of it */
  IR_ACCESS_PTR,  /* address (handle) of buf + offset elements in buf's layout */
  IR_REINTERPRET, /* bit-cast of u.cast.value to dtype (same total bits) */
  IR_STR_IMM,     /* string literal (handle dtype), e.g. a WMMA layout */
  IR_EXPR_KIND_COUNT
} ir_expr_kind;

typedef enum {
#define IR_X(e, n, a) e,
  IR_INTRIN_LIST(IR_X)
#undef IR_X
  IR_INTRIN_COUNT
} ir_intrin;

typedef struct ir_expr {
  ir_expr_kind kind;
  ir_dtype dtype;
  union {
    int64_t ival;  /* IR_INT_IMM (also bool 0/1) */
    double fval;   /* IR_FLOAT_IMM */
    ir_var *var;   /* IR_VAR */
    struct { struct ir_expr *a, *b; } bin;           /* binops */
    struct { struct ir_expr *a; } un;                /* IR_NOT */
    struct { struct ir_expr *cond, *t, *f; } sel;    /* IR_SELECT */
    struct { struct ir_expr *value; } cast;          /* IR_CAST: to dtype */
    struct { ir_intrin op; int nargs; struct ir_expr **args; } call;
    struct { ir_buffer *buf; int nidx; struct ir_expr **idx; } load;
    struct { struct ir_expr *base, *stride; int lanes; } ramp;
    struct { struct ir_expr *value; int lanes; } bcast;
    struct { const char *name; int nargs; struct ir_expr **args; } ext; /* IR_CALL_EXTERN */
    /* IR_ACCESS_PTR: rw is IR_ACCESS_READ | IR_ACCESS_WRITE */
    struct { ir_buffer *buf; struct ir_expr *offset; int rw; } ptr;
    const char *sval; /* IR_STR_IMM */
  } u;
} ir_expr;

enum { IR_ACCESS_READ = 1, IR_ACCESS_WRITE = 2 };

bool ir_is_binop(ir_expr_kind k);
bool ir_is_cmp(ir_expr_kind k);       /* EQ..GE */
const char *ir_binop_name(ir_expr_kind k);   /* "add" ... */
const char *ir_binop_symbol(ir_expr_kind k); /* "+" or NULL for min/max */
int ir_binop_prec(ir_expr_kind k);
const char *ir_intrin_name(ir_intrin op);
int ir_intrin_nargs(ir_intrin op);
bool ir_intrin_lookup(const char *name, ir_intrin *out);

/* ---- statements ---------------------------------------------------------- */
typedef enum {
  IR_FOR_SERIAL,
  IR_FOR_PARALLEL,
  IR_FOR_VECTORIZED,
  IR_FOR_UNROLLED,
  IR_FOR_THREAD_BINDING,
} ir_for_kind;
const char *ir_for_kind_name(ir_for_kind k); /* "serial", "parallel", ... */

typedef enum { IR_ANN_INT, IR_ANN_FLOAT, IR_ANN_STR, IR_ANN_EXPR } ir_annot_kind;
typedef struct ir_annot {
  const char *key;
  ir_annot_kind kind;
  union {
    int64_t i;
    double f;
    const char *s;
    ir_expr *e;
  } v;
} ir_annot;

typedef enum { IR_ITER_S, IR_ITER_R, IR_ITER_OPAQUE } ir_iter_type;

typedef struct ir_iter_var {
  ir_var *var;
  ir_range dom;
  ir_iter_type type;
} ir_iter_var;

typedef struct ir_region {
  ir_buffer *buf;
  int ndim;
  ir_range *ranges; /* ndim ranges in the block's iter vars */
} ir_region;

struct ir_stmt;

typedef struct ir_block {
  const char *name;
  int niter;
  ir_iter_var *iters;
  int nreads, nwrites;
  ir_region *reads, *writes;
  struct ir_stmt *init; /* NULL unless a reduction */
  struct ir_stmt *body;
  int nalloc;
  ir_buffer **allocs;
  int nannot;
  ir_annot *annots;
} ir_block;

typedef enum {
  IR_FOR,
  IR_BLOCK_REALIZE,
  IR_SEQ,
  IR_IF,
  IR_LET,
  IR_ALLOCATE, /* lowered form: buffer allocated for body's duration */
  IR_EVALUATE,
  IR_STORE,
  IR_STMT_KIND_COUNT
} ir_stmt_kind;

typedef struct ir_stmt {
  ir_stmt_kind kind;
  union {
    struct {
      ir_var *var;
      ir_expr *min, *extent;
      ir_for_kind kind;
      const char *thread; /* "blockIdx.x" ... "threadIdx.z", "vthread" for THREAD_BINDING */
      int nannot;
      ir_annot *annots;
      struct ir_stmt *body;
    } loop;
    struct {
      ir_expr **iter_values; /* block->niter bindings */
      ir_expr *predicate;    /* bool; never NULL (true imm) */
      ir_block *block;
    } realize;
    struct { int n; struct ir_stmt **stmts; } seq;
    struct { ir_expr *cond; struct ir_stmt *then_s, *else_s; /* else may be NULL */ } ifs;
    struct { ir_var *var; ir_expr *value; struct ir_stmt *body; } let;
    struct { ir_buffer *buf; struct ir_stmt *body; } alloc;
    struct { ir_expr *value; } eval;
    struct {
      ir_buffer *buf;
      int nidx;
      ir_expr **idx;
      ir_expr *value;
      ir_expr *predicate; /* NULL = unconditional; vector mask after lowering */
    } store;
  } u;
} ir_stmt;

/* ---- functions and modules ----------------------------------------------- */
typedef struct ir_func {
  const char *name;
  int nparams;         /* tensor parameters: inputs first, then outputs */
  ir_buffer **params;
  int ninputs;         /* params[0..ninputs) are read-only inputs */
  int nsyms;           /* symbolic size vars (i64), in order of first appearance */
  ir_var **syms;
  ir_stmt *body;       /* root block realize (or lowered stmt after lowering) */
  int nannot;
  ir_annot *annots;
} ir_func;

/* Function annotation (IR_ANN_INT bitmask, bit i = params[i]): the inputs a
 * model feeds from constants (weights), whose layout a schedule may rewrite
 * and the model build pre-pack (docs/LAYOUT.md). Metadata, not structure:
 * structural equality and hashing ignore it, so it never changes a task key. */
#define IR_FUNC_ANN_LAYOUT_FREE "layout_free_buffers"

typedef enum { IR_MOD_PRIM, IR_MOD_GRAPH } ir_mod_entry_kind;

typedef struct ir_module_entry {
  const char *name;
  ir_mod_entry_kind kind;
  union {
    ir_func *prim;
    void *graph; /* a tg_graph: ir/graph/ owns the type */
  } u;
  void (*free_fn)(void *); /* frees u.graph's heap tables with the module (NULL: nothing) */
} ir_module_entry;

typedef struct ir_module {
  ts_arena *arena; /* owns every node of every function in the module */
  int nfuncs, capfuncs;
  ir_module_entry *funcs;
} ir_module;

ir_module *ir_module_new(void);
void ir_module_free(ir_module *m); /* frees the arena and everything in it */
ts_status ir_module_add(ir_module *m, ir_func *f);
/* Appends any entry (a graph function: ir/graph/graph.c); TS_ENOMEM leaves m as it was. */
ts_status ir_module_add_entry(ir_module *m, ir_module_entry e);
ir_func *ir_module_get(const ir_module *m, const char *name);

/* ---- constructors (all allocate in arena a; return NULL on OOM) ---------- */
ir_var *ir_var_new(ts_arena *a, const char *name, ir_dtype t);
ir_buffer *ir_buffer_new(ts_arena *a, const char *name, ir_dtype t, int ndim,
                         ir_expr *const *shape, const char *scope);

ir_expr *ir_int(ts_arena *a, ir_dtype t, int64_t v);
ir_expr *ir_i32(ts_arena *a, int64_t v);
ir_expr *ir_i64(ts_arena *a, int64_t v);
ir_expr *ir_bool(ts_arena *a, bool v);
ir_expr *ir_float(ts_arena *a, ir_dtype t, double v);
ir_expr *ir_var_ref(ts_arena *a, ir_var *v);
/* Binary node; dtype is bool for comparisons/logical, else a's dtype. No
 * simplification; see ir_arith.h for folding constructors. */
ir_expr *ir_binop(ts_arena *a, ir_expr_kind k, ir_expr *x, ir_expr *y);
ir_expr *ir_not(ts_arena *a, ir_expr *x);
ir_expr *ir_select(ts_arena *a, ir_expr *c, ir_expr *t, ir_expr *f);
ir_expr *ir_cast(ts_arena *a, ir_dtype t, ir_expr *x);
ir_expr *ir_call(ts_arena *a, ir_intrin op, ir_dtype t, int nargs, ir_expr *const *args);
ir_expr *ir_load(ts_arena *a, ir_buffer *b, int nidx, ir_expr *const *idx);
ir_expr *ir_ramp(ts_arena *a, ir_expr *base, ir_expr *stride, int lanes);
ir_expr *ir_broadcast(ts_arena *a, ir_expr *v, int lanes);
/* Call of a target intrinsic / extern by name (copied into a); t is the
 * result dtype (handle for calls used only as statements). */
ir_expr *ir_call_extern(ts_arena *a, const char *name, ir_dtype t, int nargs,
                        ir_expr *const *args);
/* Address of b's element `offset` (i64/i32 elements, in b's own layout:
 * its strides if given, else compact row-major, plus elem_offset); rw is
 * IR_ACCESS_READ|IR_ACCESS_WRITE. Dtype handle. */
ir_expr *ir_access_ptr(ts_arena *a, ir_buffer *b, ir_expr *offset, int rw);
/* Bit-cast of x to t; NULL unless bits(t)*lanes(t) == bits(x)*lanes(x). */
ir_expr *ir_reinterpret(ts_arena *a, ir_dtype t, ir_expr *x);
ir_expr *ir_str(ts_arena *a, const char *s); /* copies s */

ir_stmt *ir_for(ts_arena *a, ir_var *v, ir_expr *min, ir_expr *extent, ir_for_kind k,
                ir_stmt *body);
ir_stmt *ir_seq(ts_arena *a, int n, ir_stmt *const *stmts);
ir_stmt *ir_if(ts_arena *a, ir_expr *cond, ir_stmt *then_s, ir_stmt *else_s);
ir_stmt *ir_let(ts_arena *a, ir_var *v, ir_expr *value, ir_stmt *body);
ir_stmt *ir_allocate(ts_arena *a, ir_buffer *b, ir_stmt *body);
ir_stmt *ir_evaluate(ts_arena *a, ir_expr *e);
ir_stmt *ir_store(ts_arena *a, ir_buffer *b, int nidx, ir_expr *const *idx, ir_expr *value);
ir_block *ir_block_new(ts_arena *a, const char *name);
ir_stmt *ir_realize(ts_arena *a, ir_block *b, ir_expr *const *iter_values, ir_expr *predicate);
ir_func *ir_func_new(ts_arena *a, const char *name);

/* Shallow copies (new node, same children) for copy-on-write rewrites. */
ir_stmt *ir_stmt_clone(ts_arena *a, const ir_stmt *s);
ir_block *ir_block_clone(ts_arena *a, const ir_block *b);
/* A shallow copy of b that also allocates buf (after b's allocations);
 * NULL on OOM. */
ir_block *ir_block_with_alloc(ts_arena *a, const ir_block *b, ir_buffer *buf);
ir_expr *ir_expr_clone(ts_arena *a, const ir_expr *e);

/* Deep copy of a function into arena a with fresh vars and buffers. */
ir_func *ir_func_copy(ts_arena *a, const ir_func *f);

/* Annotation helpers (arrays are arena-allocated; set replaces same key). */
const ir_annot *ir_annot_find(int n, const ir_annot *anns, const char *key);
ts_status ir_annot_set(ts_arena *a, int *n, ir_annot **anns, ir_annot ann);

/* Integer value of an IR_INT_IMM; false if e is not one. */
bool ir_as_int(const ir_expr *e, int64_t *out);
/* Value of an integer expression of constants only (a bound shape's `1 * 64`:
 * sums, differences, products, floor division and modulo by a positive
 * constant, integer casts); false when it has a variable or another node. */
bool ir_fold_int(const ir_expr *e, int64_t *out);

/* Refuses (TS_EINVAL, naming the function, the parameter and its shape) a
 * parameter whose constant extents make a byte count that does not fit in
 * 63 bits: such a size would wrap wherever it is computed, and the kernel
 * would run on a buffer far smaller than it indexes. Symbolic extents are
 * checked once bound (ir_func_bind_syms). The parser, the binder and the
 * tuner's schedule and tuning entries call it. */
ts_status ir_func_check_sizes(const ir_func *f, ts_diag *d);

/* ---- generic traversal / rewriting -------------------------------------- */
/* Visits every expression node (pre-order) and statement node. Return false
 * from a callback to stop descending into that node's children. */
typedef struct ir_visitor {
  bool (*expr)(void *ctx, const ir_expr *e);
  bool (*stmt)(void *ctx, const ir_stmt *s);
  void *ctx;
} ir_visitor;
void ir_visit_expr(const ir_visitor *v, const ir_expr *e);
void ir_visit_stmt(const ir_visitor *v, const ir_stmt *s);

/* Substitution: replaces vars found in map (pointer keys) by expressions.
 * Returns the original node when nothing changed (sharing). */
typedef struct ir_var_map {
  int n, cap;
  ir_var **keys;
  ir_expr **vals;
} ir_var_map;
void ir_var_map_init(ir_var_map *m);
void ir_var_map_fini(ir_var_map *m);
ts_status ir_var_map_put(ir_var_map *m, ir_var *k, ir_expr *v);
ir_expr *ir_var_map_get(const ir_var_map *m, const ir_var *k);

ir_expr *ir_subst_expr(ts_arena *a, ir_expr *e, const ir_var_map *m);
ir_stmt *ir_subst_stmt(ts_arena *a, ir_stmt *s, const ir_var_map *m);
/* True if e (or s) mentions var v. */
bool ir_expr_uses_var(const ir_expr *e, const ir_var *v);
bool ir_stmt_uses_var(const ir_stmt *s, const ir_var *v);
/* True if e loads from buffer b. */
bool ir_expr_loads_buffer(const ir_expr *e, const ir_buffer *b);

/* Replaces every use (loads, stores, regions, allocs) of buffer from by to. */
ir_stmt *ir_subst_buffer(ts_arena *a, ir_stmt *s, ir_buffer *from, ir_buffer *to);

/* Number of elements of a buffer when its shape is constant; -1 otherwise. */
int64_t ir_buffer_const_size(const ir_buffer *b);

/* Binds symbolic size vars to constants: returns a copy of f (in arena a)
 * with each named sym replaced by its value and dropped from f->syms.
 * Unknown names are an error (TS_ENOTFOUND) listing the valid ones. */
ir_func *ir_func_bind_syms(ts_arena *a, const ir_func *f, int n, const char *const *names,
                           const int64_t *values, ts_diag *d);


#endif
