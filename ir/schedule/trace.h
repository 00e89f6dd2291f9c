/* trace.h — placeholder; the trace layer lands with ir/schedule/trace.c. */
