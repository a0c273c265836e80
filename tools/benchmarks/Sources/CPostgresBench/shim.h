// The raw-libpq reference of `tools/bench cache`'s PostgreSQL figures.
#include <libpq-fe.h>
