#ifndef SETTLE_CDIRECTIO_SHIM_H
#define SETTLE_CDIRECTIO_SHIM_H
/* O_DIRECT, which Swift's Glibc module does not export (it is a _GNU_SOURCE flag, and its
   value differs between architectures). Output files use it to skip the page cache. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>

static inline int settle_o_direct(void) { return O_DIRECT; }
#endif
