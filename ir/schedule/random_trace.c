/* ir/schedule/random_trace.c — placeholder until its author lands it. */
typedef int placeholder_t;
