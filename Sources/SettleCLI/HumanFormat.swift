import Foundation

/// Numbers and durations as the person at the terminal reads them: `1 min 27 s`, `5,270,112`,
/// `4.1 M`. One place, so progress, estimates and logs say them alike.
enum HumanFormat {
    /// `0.4 s`, `3.2 s`, `42 s`, `1 min 27 s`, `2 h 05 min`, `3 d 04 h`.
    static func duration(seconds: Double) -> String {
        let seconds = seconds.isFinite ? max(0, seconds) : 0
        if seconds < 9.95 { return String(format: "%.1f s", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 60 { return "\(whole) s" }
        if whole < 3600 { return "\(whole / 60) min \(twoDigits(whole % 60)) s" }
        let minutes = Int((seconds / 60).rounded())
        if minutes < 24 * 60 { return "\(minutes / 60) h \(twoDigits(minutes % 60)) min" }
        let hours = Int((seconds / 3600).rounded())
        return "\(hours / 24) d \(twoDigits(hours % 24)) h"
    }

    /// `5,270,112`.
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (value < 0 ? "-" : "") + out
    }

    /// `9,999`, `12.3 k`, `4.1 M`, `2.0 G`: short, for counts inside a sentence.
    static func compact(_ value: Int) -> String {
        let magnitude = Double(value.magnitude)
        let sign = value < 0 ? "-" : ""
        if magnitude < 10_000 { return count(value) }
        if magnitude < 999_950 { return sign + String(format: "%.1f k", magnitude / 1_000) }
        if magnitude < 999_950_000 { return sign + String(format: "%.1f M", magnitude / 1_000_000) }
        return sign + String(format: "%.1f G", magnitude / 1_000_000_000)
    }

    /// `412.3 MiB`.
    static func mebibytes(_ bytes: UInt64) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }

    /// `12.5` under 100 a second, `310,000` above.
    static func rate(_ perSecond: Double) -> String {
        guard perSecond.isFinite, perSecond > 0 else { return "0" }
        return perSecond < 100 ? String(format: "%.1f", perSecond) : count(Int(perSecond.rounded()))
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
