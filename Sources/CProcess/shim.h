#ifndef SETTLE_CPROCESS_SHIM_H
#define SETTLE_CPROCESS_SHIM_H
/* Process hardening that Swift cannot call directly (prctl is variadic). */
#include <sys/prctl.h>
#include <sys/resource.h>

/* No core dump, ever: a core file would hold the API key. RLIMIT_CORE 0 (soft and hard)
   and not dumpable (which also keeps other processes of the user from reading our memory
   through /proc or ptrace). Returns 0, or -1 with errno set. */
static inline int settle_forbid_core_dumps(void) {
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* Whether this process is dumpable (prctl PR_GET_DUMPABLE). */
static inline int settle_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}
#endif
