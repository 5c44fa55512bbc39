#ifndef SETTLE_CSQLITE_SHIM_H
#define SETTLE_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro cast of -1 that Swift cannot import. */
static inline void (*settle_sqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }
#endif
