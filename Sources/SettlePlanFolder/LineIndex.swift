public import SettleCore
public import SettleWrite

/// `.settle/lines.idx`: where each line's original record sits in the spool, in results.csv
/// order (20 bytes a line, little-endian: file u32, length u32, offset u64, charge u32), so
/// `apply` can rebuild `errors.csv` and `deferred.csv` from the plan folder alone; `charge`
/// is the line's row in charges.csv (1-based; 0: the line draws on no charge), for the
/// rewrite of charges.csv.
public enum LineIndex {
    public static let name = ".settle/lines.idx"
    public static let entryBytes = 20

    public struct Entry: Sendable, Equatable {
        public var file: Int
        public var offset: UInt64
        public var length: UInt32
        /// The line's row in charges.csv (0-based), nil when it draws on no charge.
        public var charge: Int?
    }

    /// - Parameter chargeOfLine: each line's row in charges.csv (0-based), -1 (or missing) for none.
    public static func write(
        path: String, plan: SettlementPlan, chargeOfLine: [Int32] = [], into set: FileSet? = nil
    ) throws(WriteFailure) -> (
        sha256: String, rows: Int
    ) {
        let file = try OutputFile(path: path)
        for (position, line) in plan.batch.lines.enumerated() {
            file.withBuffer { out in
                appendLittleEndian(UInt32(line.file), to: &out)
                appendLittleEndian(line.spoolLength, to: &out)
                appendLittleEndian(line.spoolOffset, to: &out)
                let charge = position < chargeOfLine.count ? chargeOfLine[position] : -1
                appendLittleEndian(UInt32(bitPattern: charge &+ 1), to: &out)
            }
            file.endRow()
        }
        let sha = try file.commit(into: set)
        return (sha, file.rows)
    }

    static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        var value = value.littleEndian
        withUnsafeBytes(of: &value) { out.append(contentsOf: $0) }
    }
}
