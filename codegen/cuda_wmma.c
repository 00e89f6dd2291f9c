/* codegen/cuda_wmma.c — the CUDA emitter's tensor-core calls: tessel.wmma.* calls
 * (TVM's names and argument order, docs/TENSORIZE.md) printed as
 * nvcuda::wmma calls, and wmma.* buffers declared as fragment arrays. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cuda_int.h"

/* ---- WMMA (docs/TENSORIZE.md: TVM's names and argument order) ------------- */

static bool is_wmma(const ir_buffer *b) { return b && b->scope && strncmp(b->scope, "wmma.", 5) == 0; }

/* A fragment argument: access_ptr(frag, offset) plus an index -> frag[offset/256 + index]. */
static void frag_ref(cctx *c, const ir_expr *ptr, const ir_expr *idx, const char *call) {
  if (ptr->kind != IR_ACCESS_PTR || !is_wmma(ptr->u.ptr.buf)) {
    FAIL(c, "cuda: %s: the fragment argument is not access_ptr of a wmma.* buffer", call);
    return;
  }
  P(c, "%s[(", cu_bname(c, ptr->u.ptr.buf));
  cu_ex(c, ptr->u.ptr.offset, -1);
  P(c, ") / 256 + (");
  cu_ex(c, idx, -1);
  P(c, ")]");
}

static const char *layout_of(const ir_expr *e) {
  if (e && e->kind == IR_STR_IMM && e->u.sval && strcmp(e->u.sval, "col_major") == 0) return "col_major";
  return "row_major";
}

void cu_st_wmma(cctx *c, const ir_expr *call) {
  const char *name = call->u.ext.name + strlen("tessel.wmma.");
  ir_expr *const *a = call->u.ext.args;
  int n = call->u.ext.nargs;
  c->nwmma++;
  indent(c);
  if (strcmp(name, "fill_fragment") == 0 && n == 6) {
    P(c, "nvcuda::wmma::fill_fragment(");
    frag_ref(c, a[0], a[4], "fill_fragment");
    P(c, ", ");
    cu_ex(c, a[5], -1);
    P(c, ");\n");
  } else if (strcmp(name, "load_matrix_sync") == 0 && n == 8) {
    P(c, "nvcuda::wmma::load_matrix_sync(");
    frag_ref(c, a[0], a[4], "load_matrix_sync");
    P(c, ", ");
    cu_ex(c, a[5], -1);
    P(c, ", ");
    cu_ex(c, a[6], -1);
    if (a[0]->kind == IR_ACCESS_PTR && strcmp(a[0]->u.ptr.buf->scope, "wmma.accumulator") == 0)
      P(c, ", nvcuda::wmma::mem_%s", layout_of(a[7]));
    P(c, ");\n");
  } else if (strcmp(name, "mma_sync") == 0 && n == 8) {
    P(c, "nvcuda::wmma::mma_sync(");
    for (int i = 0; i < 4; i++) {
      if (i) P(c, ", ");
      frag_ref(c, a[2 * i], a[2 * i + 1], "mma_sync");
    }
    P(c, ");\n");
  } else if (strcmp(name, "store_matrix_sync") == 0 && n == 8) {
    P(c, "nvcuda::wmma::store_matrix_sync(");
    cu_ex(c, a[5], -1);
    P(c, ", ");
    frag_ref(c, a[0], a[4], "store_matrix_sync");
    P(c, ", ");
    cu_ex(c, a[6], -1);
    P(c, ", nvcuda::wmma::mem_%s);\n", layout_of(a[7]));
  } else {
    FAIL(c, "cuda: unknown WMMA call tessel.wmma.%s with %d arguments (known: fill_fragment 6, "
            "load_matrix_sync 8, mma_sync 8, store_matrix_sync 8)",
         name, n);
  }
}

/* The layout a matrix_a/b fragment is loaded with (its declaration needs it). */
typedef struct lay_ctx {
  const ir_buffer *buf;
  const char *layout;
} lay_ctx;
static bool lay_cb(void *ctx, const ir_expr *e) {
  lay_ctx *l = ctx;
  if (e->kind == IR_CALL_EXTERN && e->u.ext.nargs == 8 &&
      strcmp(e->u.ext.name, "tessel.wmma.load_matrix_sync") == 0 && e->u.ext.args[0]->kind == IR_ACCESS_PTR &&
      e->u.ext.args[0]->u.ptr.buf == l->buf)
    l->layout = layout_of(e->u.ext.args[7]);
  return true;
}

void cu_decl_fragment(cctx *c, const ir_stmt *alloc) {
  const ir_buffer *b = alloc->u.alloc.buf;
  int64_t n = ir_buffer_const_size(b);
  if (n <= 0 || n % 256) {
    FAIL(c, "cuda: fragment buffer %s (%s) must hold whole 16x16 tiles (256 elements each), has %lld", b->name,
         b->scope, (long long)n);
    return;
  }
  const char *use = strcmp(b->scope, "wmma.matrix_a") == 0   ? "matrix_a"
                    : strcmp(b->scope, "wmma.matrix_b") == 0 ? "matrix_b"
                    : strcmp(b->scope, "wmma.accumulator") == 0 ? "accumulator" : NULL;
  if (!use) {
    FAIL(c, "cuda: unknown fragment scope '%s' of %s", b->scope, b->name);
    return;
  }
  const char *et = b->dtype.code == IR_F16 ? "half" : b->dtype.code == IR_BF16 ? "__nv_bfloat16"
                   : b->dtype.code == IR_F32 ? "float" : NULL;
  if (!et || (strcmp(use, "accumulator") != 0 && b->dtype.code == IR_F32) ||
      (strcmp(use, "accumulator") == 0 && b->dtype.code != IR_F32 && b->dtype.code != IR_F16)) {
    char dt[16];
    FAIL(c, "cuda: fragment %s (%s) of %s is not a WMMA type (f16/bf16 inputs, f32/f16 accumulator)", b->name,
         use, ir_dtype_str(b->dtype, dt, sizeof dt));
    return;
  }
  c->uses_wmma = true;
  indent(c);
  if (strcmp(use, "accumulator") == 0) {
    P(c, "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, %s> %s[%lld];\n", et, cu_bname(c, b),
      (long long)(n / 256));
  } else {
    lay_ctx l = {b, "row_major"};
    ir_visitor v = {lay_cb, NULL, &l};
    ir_visit_stmt(&v, alloc->u.alloc.body);
    P(c, "nvcuda::wmma::fragment<nvcuda::wmma::%s, 16, 16, 16, %s, nvcuda::wmma::%s> %s[%lld];\n", use, et,
      l.layout, cu_bname(c, b), (long long)(n / 256));
  }
}

