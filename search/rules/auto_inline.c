/* search/rules/auto_inline.c — placeholder until its author lands it. */
typedef int placeholder_t;
