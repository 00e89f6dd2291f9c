/* runtime.c — placeholder translation unit for codegen/runtime, the library
 * generated code and rpc_server link (thread pool, loader, timer). Filled by
 * the issue "LLVM-C code generation for CPUs"; present now so the module
 * library and its link line exist. */
#include "runtime.h"

const char *tsrt_version(void) { return "0.1.0"; }
