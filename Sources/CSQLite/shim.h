// SQLite's macros that Swift cannot import as written.
#ifndef URLLOADING_CSQLITE_SHIM_H
#define URLLOADING_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer: Swift cannot import it.
static inline sqlite3_destructor_type urlloading_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

// sqlite3_config is variadic.
static inline int urlloading_sqlite_config_log(void (*cb)(void *, int, const char *), void *arg) {
    return sqlite3_config(SQLITE_CONFIG_LOG, cb, arg);
}

#endif
