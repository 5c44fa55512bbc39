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

/* A bug that traps (a failed precondition, a bad subscript: SIGILL or SIGTRAP in Swift) or a
   fault ends the process with the contract's internal-error status, 70, and one line on
   stderr, instead of a signal status (132, 133, 139) that cron cannot tell from a kill. The
   ledger is durable at every step, so the next run resolves what was in flight. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void settle_internal_error(int signal_number) {
    static const char message[] =
        "settle: internal error (a bug: the process trapped); nothing half-written is kept, "
        "the ledger is intact, the next run resolves what was in flight; exit 70\n";
    (void)signal_number;
    ssize_t ignored = write(2, message, sizeof message - 1);
    (void)ignored;
    _exit(70);
}

/* Installs the handler for SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE and SIGABRT, on its own
   stack (a stack overflow must reach it too). Returns 0, or -1. */
static inline int settle_exit_70_on_traps(void) {
    static char stack[64 * 1024];
    stack_t alternate = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    if (sigaltstack(&alternate, NULL) != 0) return -1;
    struct sigaction action = {0};
    action.sa_handler = settle_internal_error;
    action.sa_flags = SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    const int signals[] = {SIGILL, SIGTRAP, SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
    for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (sigaction(signals[i], &action, NULL) != 0) return -1;
    }
    return 0;
}

/* Whether this process is dumpable (prctl PR_GET_DUMPABLE). */
static inline int settle_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}
#endif
