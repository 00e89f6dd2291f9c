/* layout.h — weight layout rewrite (Ansor's RewriteLayout, MetaSchedule's
 * RewriteLayout postprocessor) for a function's layout-free inputs: a
 * bijective map re-lays a param into the order its one reading block walks
 * it, and the traced TransformLayout primitive replaces the param by the
 * packed buffer. docs/LAYOUT.md, docs/IR.md ("Notes by file"). */
#ifndef TESSEL_IR_SCHEDULE_LAYOUT_H
#define TESSEL_IR_SCHEDULE_LAYOUT_H

#include "trace.h"

#define SCH_LAYOUT_MAX_COMPS 32
#define SCH_LAYOUT_MAX_AXES 8 /* the kernel ABI's TSRT_MAX_DIMS */
#define SCH_LAYOUT_MAX_DIMS 8

typedef struct sch_layout_comp {
  int dim;                /* original dim */
  int64_t stride, extent; /* digit floormod(floordiv(x[dim], stride), extent) */
} sch_layout_comp;

typedef struct sch_layout_map {
  int param;                            /* index into the function's params (an input) */
  int ndim;                             /* original rank */
  int64_t shape[SCH_LAYOUT_MAX_DIMS];   /* original shape */
  int ncomp;                            /* components, outermost first */
  sch_layout_comp comp[SCH_LAYOUT_MAX_COMPS];
  int naxes;                            /* packed rank */
  int group[SCH_LAYOUT_MAX_AXES];       /* components per packed axis */
  /* The packed buffer's element type; lanes 0 (a zeroed map): the param's
   * own. Otherwise an 8-bit integer param widened to a 16- or 32-bit
   * integer (the AVX2 int8 kernels' weight stored as i16, docs/TENSORIZE.md):
   * every value is kept, so a load the program casts to a type at least as
   * wide reads the wide element directly, any other reads it cast back. */
  ir_dtype dtype;
} sch_layout_map;

/* The scheduled function's annotation marking the params a TransformLayout
 * rewrote (IR_ANN_INT bitmask); a param is rewritten at most once. */
#define SCH_ANN_LAYOUT_REWRITTEN "tessel.layout_rewritten"

/* Checks a map against the original shape it holds: ranks and counts in
 * range, every component's dim valid, each dim's components a perfect mixed
 * radix of it or one padded in its top digit (which then covers the dim
 * rounded up: ceil), groups summing to the components. TS_EINVAL naming the
 * fault. */
ts_status sch_layout_check(const sch_layout_map *m, ts_diag *d);
/* The packed shape (m->naxes extents); returns naxes. */
int sch_layout_packed_shape(const sch_layout_map *m, int64_t *shape);
/* True when the map keeps the row-major order and the dtype of the
 * original (nothing to pack). */
bool sch_layout_is_identity(const sch_layout_map *m);
/* Human form, e.g. "W[d0, d1, d2, d3] -> [d0//16, d1//8, d2, d3, d1%8, d0%16]". */
void sch_layout_str(const sch_layout_map *m, const char *name, char *buf, size_t n);

/* MetaSchedule's SuggestIndexMap for input param `param` of a scheduled f:
 * the unique block that loads it, its loads all at one index tuple, each
 * index (the block bindings substituted up to the root, simplified under
 * the loop ranges) a quasi-affine sum of single-loop digits c *
 * floormod(floordiv(l, s), e); per dim the digits must form a perfect mixed
 * radix of the dim (constant part 0). The components are ordered by the
 * position of their loop in the nest (outermost first; within a fused loop
 * the higher digit first); adjacent digits of one dim that are contiguous
 * are merged, and components beyond SCH_LAYOUT_MAX_AXES are grouped.
 * TS_ESCHEDULE with the reason when it refuses (several reader blocks, a
 * pointer access, a store, non-quasi-affine or partial indices, a guarded
 * split that makes the map no bijection, symbolic sizes). */
ts_status sch_layout_suggest(const ir_func *f, int param, sch_layout_map *out, ts_diag *d);

/* The VNNI weight layout (TVM's dense_vnni packing, docs/TENSORIZE.md):
 * input param of f, rank r, with its reduction dim kdim and its output
 * column dim ndim, re-laid as [lead..., n/lanes, k/group, lanes*group]
 * (the other dims leading, in order), byte lanes*group-row element
 * group*j + kk = W[.., k = group*ko + kk, .., n = lanes*no + j]. n and k
 * that lanes / group do not divide are padded (the top digit covers
 * ceil(n / lanes), ceil(k / group); sch_layout_pack writes zeros there).
 * Refused (TS_ESCHEDULE) when the shape is not constant. */
ts_status sch_layout_vnni(const ir_func *f, int param, int kdim, int ndim, int64_t lanes, int64_t group,
                          sch_layout_map *out, ts_diag *d);

/* The primitive: re-lays f's input param m->param (its shape must be
 * m->shape, its layout compact, not rewritten before; no stores or pointer
 * accesses) into the packed buffer (same name, the packed shape, the map's
 * dtype when it sets one) and rewrites every load and region.
 * TS_ESCHEDULE when refused (a dtype change other than an 8-bit integer
 * param widened to a 16- or 32-bit integer). */
ts_status sch_transform_layout(sch_state *s, const sch_layout_map *m, ts_diag *d);
/* Traced: records TransformLayout [param, comps, groups] (trace.c), and the
 * packed dtype's name as a fourth attr when the map sets one. */
ts_status sch_t_transform_layout(sch_traced *t, const sch_layout_map *m, ts_diag *d);
/* The map of a TransformLayout instruction's attrs (param i, comps I,
 * groups I, optionally the packed dtype s) for original function f.
 * TS_EINVAL when malformed. */
ts_status sch_layout_from_attrs(const ir_func *f, int nattr, const sch_attr *attrs, sch_layout_map *m,
                                ts_diag *d);

/* The TransformLayout maps of a trace, in order, for its unscheduled
 * function f: up to max into out; returns how many (-1 on a malformed
 * instruction, d set). */
int sch_layout_maps_of_trace(const sch_trace *tr, const ir_func *f, sch_layout_map *out, int max, ts_diag *d);
/* What a kernel scheduled by tr computes, in the unscheduled form: f with
 * tr's layout maps applied (f itself when tr has none). Verification
 * compares a kernel against this function on the same (random) inputs. In
 * arena a; NULL on failure (d set). */
const ir_func *sch_layout_reference(ts_arena *a, const ir_func *f, const sch_trace *tr, ts_diag *d);
/* Host-side packing: dst[packed offset of x] = src[row-major offset of x]
 * for every index x of the original shape; elements of elem_bytes. A padded
 * map's padding (dst is its packed shape) is written as zeros. */
void sch_layout_pack(const sch_layout_map *m, size_t elem_bytes, const void *src, void *dst);
/* The same for a source of dtype `from` (m->param's own), converting each
 * element to the map's dtype when it sets one (an 8-bit integer widened,
 * sign- or zero-extended by `from`). TS_EINVAL naming the pair for another
 * conversion. */
ts_status sch_layout_pack_as(const sch_layout_map *m, ir_dtype from, const void *src, void *dst, ts_diag *d);
/* The packed buffer's dtype for a param of dtype `from`. */
ir_dtype sch_layout_packed_dtype(const sch_layout_map *m, ir_dtype from);

#endif
