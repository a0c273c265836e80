// libpq, PostgreSQL's own client library, for URLLoadingPostgres:
// the fleet's stores. Synchronous, like SQLite: each connection is used by
// one thread at a time (the pool hands them out).
#include <libpq-fe.h>
