/* runtime.h — codegen/runtime's public interface (see runtime.c). */
#ifndef TESSEL_RUNTIME_H
#define TESSEL_RUNTIME_H
const char *tsrt_version(void);
#endif
