/* tracker/tracker.c — placeholder until its author lands it. */
typedef int placeholder_t;
