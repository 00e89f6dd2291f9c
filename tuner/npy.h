/* npy.h — NumPy .npy files for `tessel run` (inputs in, outputs out).
 *
 * Reading: format versions 1.0 (u16 header length), 2.0 and 3.0 (u32; 3.0
 * differs only in allowing UTF-8 in the header). The header is a Python dict
 * literal ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }),
 * parsed by a small bounded tokenizer: string keys and values in single or
 * double quotes, True/False, tuples of non-negative integers (with the
 * one-element "(5,)" form and "()" for a scalar). Accepted dtypes: little
 * endian or byte-order-free bool, int8/16/32/64, uint8/32, float16/32/64
 * ('|b1', '<i4', '<f4', '=f8' on a little-endian host ...). Refused, each
 * with a message naming the file and what was found: bad magic, a truncated
 * header or data, an unknown or missing key, fortran_order True, big-endian
 * or structured dtypes, a data size that does not match the shape.
 *
 * Writing: version 1.0, the header padded with spaces so the data starts at
 * a multiple of 64 bytes (as NumPy does). */
#ifndef TESSEL_TUNER_NPY_H
#define TESSEL_TUNER_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/ts.h"

#define TUN_NPY_MAX_DIMS 8

typedef struct tun_npy {
  int dtype; /* ir_dtype_code (IR_F32, ...) */
  int ndim;
  int64_t shape[TUN_NPY_MAX_DIMS];
  void *data; /* heap (ts_malloc), dense row-major */
  size_t nbytes;
} tun_npy;

/* Parses a whole .npy image (len bytes); label names it in errors. The data
 * is copied. TS_EPARSE / TS_EUNSUPPORTED with the reason. */
ts_status tun_npy_parse(const void *buf, size_t len, const char *label, tun_npy *out, ts_diag *d);
/* Reads a file (TS_EIO if it cannot be read), then as tun_npy_parse. */
ts_status tun_npy_read(const char *path, tun_npy *out, ts_diag *d);
/* Writes a .npy file; dtype an ir_dtype_code NumPy can represent (bf16 is
 * TS_EUNSUPPORTED). */
ts_status tun_npy_write(const char *path, int dtype, int ndim, const int64_t *shape, const void *data,
                        ts_diag *d);
void tun_npy_free(tun_npy *n);

#endif
