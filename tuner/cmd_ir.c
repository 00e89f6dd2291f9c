typedef int placeholder_t;
