/* search/rules/parallel_vectorize_unroll.c — placeholder until its author lands it. */
typedef int placeholder_t;
