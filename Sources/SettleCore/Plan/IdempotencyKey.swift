/// The `Idempotency-Key` settle sends: `settle-<instruction id>-a<attempt>`. The root is the
/// instruction id, so every retry of one attempt reuses the key; a line sent again after a
/// definite refusal goes under the next attempt. The one definition of the format.
public enum IdempotencyKey {
    public static func make(instruction id: String, attempt: Int) -> String { "settle-\(id)-a\(attempt)" }

    /// Writes `settle-` at `at`; returns how many bytes it wrote. With
    /// ``writeAttempt(_:to:)`` around an id: the bytes of ``make(instruction:attempt:)``
    /// without a string (the plan writer's hot path).
    @inline(__always)
    static func writePrefix(to at: UnsafeMutablePointer<UInt8>) -> Int {
        let prefix: StaticString = "settle-"
        at.update(from: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        return prefix.utf8CodeUnitCount
    }

    /// Writes `-a<attempt>` at `at` (room for 13 bytes); returns how many bytes it wrote.
    @inline(__always)
    static func writeAttempt(_ attempt: Int, to at: UnsafeMutablePointer<UInt8>) -> Int {
        at[0] = UInt8(ascii: "-")
        at[1] = UInt8(ascii: "a")
        return 2 + JSON.writeInteger(Int64(attempt), to: at + 2)
    }
}
