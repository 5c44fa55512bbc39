/// The `Idempotency-Key` settle sends: `settle-<instruction id>-a<attempt>`. The root is the
/// instruction id, so every retry of one attempt reuses the key; a line sent again after a
/// definite refusal goes under the next attempt. The one definition of the format.
public enum IdempotencyKey {
    public static func make(instruction id: String, attempt: Int) -> String { "settle-\(id)-a\(attempt)" }
}
