import CProcess
import Glibc
import SettleCLI

// Before anything else: no core dump (it would hold the API key), and not dumpable.
if settle_forbid_core_dumps() != 0 {
    let message = "settle: cannot forbid core dumps: \(String(cString: strerror(errno)))\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(70)
}

// A trap (a bug) exits 70, the internal-error status, not with a signal. SWIFT_BACKTRACE set
// (a developer asking for Swift's crash backtrace) leaves the runtime's handler in place.
if getenv("SWIFT_BACKTRACE") == nil, settle_exit_70_on_traps() != 0 {
    let message = "settle: cannot install the crash handler: \(String(cString: strerror(errno)))\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(70)
}

// A reader of standard error or output that goes away (`settle run … 2>&1 | head`) is not a
// reason to die mid-run: writes to it fail (EPIPE) and are ignored, the run ends with its own
// status (audit 35 C8: the default action ended it with 141).
signal(SIGPIPE, SIG_IGN)

// A file size limit (`ulimit -f`, a quota) makes a write fail with EFBIG, which every write
// checks: the run stops with its own status (73 before anything moved, 75 after), never killed
// without a word by the default SIGXFSZ (audit 54 F3: shell status 153 mid-apply).
signal(SIGXFSZ, SIG_IGN)

// The exit-70 test's trap (SETTLE_CRASH_AT, as the exactly-once tests' crash points).
if let point = getenv("SETTLE_CRASH_AT"), String(cString: point) == "trap" {
    preconditionFailure("SETTLE_CRASH_AT=trap")
}

// The executable is thin: everything lives in SettleCLI so tests can reach it.
Settle.main()
