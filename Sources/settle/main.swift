import CProcess
import Glibc
import SettleCLI

// Before anything else: no core dump (it would hold the API key), and not dumpable.
if settle_forbid_core_dumps() != 0 {
    let message = "settle: cannot forbid core dumps: \(String(cString: strerror(errno)))\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(70)
}

// The executable is thin: everything lives in SettleCLI so tests can reach it.
Settle.main()
