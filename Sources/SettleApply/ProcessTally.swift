import Foundation

/// Every request this process sent to Stripe, whichever part sent it (the facts looked up
/// before planning, the payouts followed, the apply itself): the metrics file's counts.
public enum ProcessTally {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var counts = (requests: 0, retries: 0, rateLimited: 0)

    static func add(requests: Int = 0, retries: Int = 0, rateLimited: Int = 0) {
        lock.lock()
        defer { lock.unlock() }
        counts.requests += requests
        counts.retries += retries
        counts.rateLimited += rateLimited
    }

    /// The counts so far.
    public static var snapshot: (requests: Int, retries: Int, rateLimited: Int) {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }
}
