import Foundation

/// Instrumented crash points for the exactly-once tests: with `SETTLE_CRASH_AT=<point>[:<n>]`
/// in the environment, the process kills itself (SIGKILL, no clean-up) the n-th time
/// (default 1st) it reaches that point. Points: `in_flight_written` (the ledger committed a
/// batch in flight, its requests have not left), `answer_received` (Stripe's answer is in,
/// the ledger has not recorded it), and `ledger_record`, which does not kill but makes that
/// ledger write fail (an injected I/O error), for the path where the ledger breaks mid-apply;
/// `apply_starting`, a plan whole and its apply not begun (no `.settle/applying` yet),
/// `rewriting`, once the send is over, before the rewrite of the folder's files begins,
/// and `publishing`, between two renames of the files apply's rewrite puts in place together.
/// `<point>:<n>:TERM` sends SIGTERM instead of SIGKILL, as a deploy stopping the job would.
/// Without the variable this is one comparison.
public enum CrashPoint {
    nonisolated(unsafe) private static var reached = 0
    private static let armed: (point: String, count: Int, signal: Int32)? = {
        guard let value = ProcessInfo.processInfo.environment["SETTLE_CRASH_AT"], !value.isEmpty else { return nil }
        let parts = value.split(separator: ":")
        return (
            String(parts[0]), parts.count > 1 ? Int(parts[1]) ?? 1 : 1,
            parts.count > 2 && parts[2] == "TERM" ? SIGTERM : SIGKILL
        )
    }()

    /// Called from one thread at a time (the engine's, or the rewrite's).
    public static func reach(_ point: String) {
        guard let armed, armed.point == point else { return }
        reached += 1
        guard reached == armed.count else { return }
        kill(getpid(), armed.signal)
        if armed.signal != SIGKILL { Interruption.waitUntilCaught() }
    }

    /// Whether the armed fault fires here now (from the n-th time on).
    static func fails(_ point: String) -> Bool {
        guard let armed, armed.point == point else { return false }
        reached += 1
        return reached >= armed.count
    }
}
