/* tessel.h — the public C API for embedding tessel. The IR, parser,
 * printer, interpreter and workload library are declared in the module
 * headers installed beside this one (tessel/ir/..., tessel/base/ts.h). */
#ifndef TESSEL_TESSEL_H
#define TESSEL_TESSEL_H

#include "ir/ir.h"
#include "ir/parse.h"
#include "ir/print.h"
#include "ir/struct.h"
#include "ir/interp.h"
#include "ir/workloads/workloads.h"

const char *tessel_version(void);

#endif
