public import SettleCore

/// `report.html`: one self-contained page for finance (README, "Output folder") — no script, no font or image
/// from anywhere, inline CSS, laid out to print on one or two A4 pages.
///
/// Its numbers are the ``ControlSums`` that summary.csv is written from, never summed again.
/// Each money cell carries `data-currency`, `data-measure` (summary.csv's measure name) and
/// `data-minor` (the integer amount), so a test or a script can read the page back and
/// compare it with summary.csv.
public enum ReportPage {
    /// Facts about the run shown at the top.
    public struct Facts: Sendable {
        public var runID: String?
        public var asOf: String
        /// `plan`, `apply` or `run`.
        public var mode: String
        public var exitStatus: Int32
        /// When the page was written (ISO 8601).
        public var writtenAt: String
        public var settleVersion: String
        public var rejectedFiles: [RejectedFile]

        public init(
            runID: String?, asOf: String, mode: String, exitStatus: Int32, writtenAt: String,
            settleVersion: String, rejectedFiles: [RejectedFile] = []
        ) {
            self.runID = runID
            self.asOf = asOf
            self.mode = mode
            self.exitStatus = exitStatus
            self.writtenAt = writtenAt
            self.settleVersion = settleVersion
            self.rejectedFiles = rejectedFiles
        }
    }

    /// An input rejected whole (manifest).
    public struct RejectedFile: Sendable {
        public var path: String
        public var code: String
        public var position: String
        public var message: String
        public init(path: String, code: String, position: String, message: String) {
            self.path = path
            self.code = code
            self.position = position
            self.message = message
        }
    }

    /// Rejected and failed lines grouped by status and reason code, with the first few of each.
    public struct ReasonGroups: Sendable {
        public struct Example: Sendable, Equatable {
            public var lineID: String
            public var source: String
            public var reason: String
            public var amount: String
        }

        public struct Group: Sendable {
            public var status: LineStatus
            public var code: String
            public var count = 0
            /// Minor units by currency code.
            public var amounts: [String: Int64] = [:]
            public var examples: [Example] = []
        }

        /// How many lines of each group the page names.
        public static let examplesShown = 5
        private var index: [String: Int] = [:]
        public private(set) var groups: [Group] = []

        public init() {}

        /// Adds one line; `currency` empty or `amountMinor` 0 when its amount did not parse.
        public mutating func add(
            status: LineStatus, code: String, currency: String, amountMinor: Int64, lineID: String, source: String,
            reason: String
        ) {
            let key = "\(status.rawValue)|\(code)"
            let slot: Int
            if let found = index[key] {
                slot = found
            } else {
                slot = groups.count
                index[key] = slot
                groups.append(Group(status: status, code: code))
            }
            groups[slot].count += 1
            var amountText = ""
            if amountMinor > 0, let parsed = Currency(currency) {
                groups[slot].amounts[currency, default: 0] += amountMinor
                amountText = ReportPage.money(amountMinor, code: currency, currency: parsed)
            }
            if groups[slot].examples.count < ReasonGroups.examplesShown {
                groups[slot].examples.append(
                    Example(lineID: lineID, source: source, reason: reason, amount: amountText))
            }
        }

        /// Rejected before failed, then the largest groups first, then by code.
        public var sorted: [Group] {
            groups.sorted {
                ($0.status, -$0.count, $0.code) < ($1.status, -$1.count, $1.code)
            }
        }
    }

    /// The page's bytes; pure, for tests.
    public static func render(
        facts: Facts, sums: ControlSums, counts: [LineStatus: Int], reasons: ReasonGroups
    ) -> [UInt8] {
        var html = ""
        // The sums say whether they are planned or moved, as summary.csv's measures do: the
        // page a `run` writes with its plan, before its apply ends, shows planned money too
        // (audit 65 F3: it called it "Transferred" under "Mode run", and a killed run's page
        // and the next run's showed the same money moved twice).
        let planOnly = sums.planOnly
        html += """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>settle report \(escape(facts.runID ?? facts.asOf))</title>
            <style>\(style)</style>
            </head>
            <body>

            """
        html += "<header><h1>Settlement report</h1>\n<dl class=\"facts\">"
        html += fact("Run", facts.runID ?? "—", id: "run-id")
        html += fact("As of", facts.asOf, id: "as-of")
        let modeText =
            !planOnly
            ? facts.mode
            : facts.mode == "plan"
                ? "plan (nothing sent yet)"
                : "\(facts.mode), planned: its apply has not ended (nothing counted as moved)"
        html += fact("Mode", modeText, id: "mode", data: facts.mode)
        html += fact(
            "Exit status", "\(facts.exitStatus) — \(exitMeaning(facts.exitStatus))", id: "exit-status",
            data: String(facts.exitStatus))
        html += fact("Written", facts.writtenAt, id: "written-at")
        html += "</dl></header>\n"

        if !facts.rejectedFiles.isEmpty {
            html += "<section id=\"rejected-files\"><h2>Files rejected whole</h2>\n"
            html +=
                "<table><thead><tr><th>file</th><th>reason code</th><th>where</th><th>reason</th></tr></thead><tbody>\n"
            for file in facts.rejectedFiles {
                html +=
                    "<tr data-file-rejected=\"\(escape(file.path))\"><td>\(escape(file.path))</td><td><code>\(escape(file.code))</code></td>"
                    + "<td>\(escape(file.position))</td><td>\(escape(file.message))</td></tr>\n"
            }
            html +=
                "</tbody></table><p class=\"note\">None of their lines moves money; fix the file and run again.</p></section>\n"
        }

        html += "<section id=\"money\"><h2>Money per currency</h2>\n"
        if sums.currencies.isEmpty { html += "<p>No amounts.</p>\n" }
        html += "<div class=\"currencies\">\n"
        for code in sums.currencies.keys.sorted() {
            html += currencyTable(code: code, sums: sums.currencies[code]!, planOnly: planOnly)
        }
        html += "</div></section>\n"

        html +=
            "<section id=\"statuses\"><h2>Lines by status</h2>\n<table class=\"statuses\"><thead><tr><th>status</th>"
        html += "<th class=\"num\">lines</th></tr></thead><tbody>\n"
        var total = 0
        for status in LineStatus.allCases {
            guard let count = counts[status], count > 0 else { continue }
            total += count
            html +=
                "<tr><td>\(escape(status.name))</td><td class=\"num\" data-status=\"\(escape(status.name))\" data-count=\"\(count)\">"
                + "\(grouped(Int64(count)))</td></tr>\n"
        }
        html +=
            "<tr class=\"total\"><td>all lines</td><td class=\"num\" data-status=\"all\" data-count=\"\(total)\">\(grouped(Int64(total)))</td></tr>\n"
        html += "</tbody></table></section>\n"

        let groups = reasons.sorted
        html += "<section id=\"reasons\"><h2>Rejected and failed lines by reason</h2>\n"
        if groups.isEmpty {
            html += "<p>None.</p>\n"
        } else {
            html +=
                "<p class=\"note\">Every one is in <code>errors.csv</code>: fix it there and feed the file back in.</p>\n"
            html +=
                "<table class=\"reasons\"><thead><tr><th>status</th><th>reason code</th><th class=\"num\">lines</th>"
            html += "<th class=\"num\">amount</th><th>first lines (file:line)</th></tr></thead><tbody>\n"
            for group in groups {
                let amounts = group.amounts.keys.sorted().map { code in
                    "<span data-currency=\"\(escape(code))\" data-minor=\"\(group.amounts[code]!)\">"
                        + "\(escape(money(group.amounts[code]!, code: code, currency: Currency(code))))</span>"
                }.joined(separator: "<br>")
                let examples = group.examples.map { example in
                    "<li><code>\(escape(example.source))</code> \(escape(example.lineID))"
                        + (example.amount.isEmpty ? "" : " · \(escape(example.amount))")
                        + " — \(escape(example.reason))</li>"
                }.joined()
                let more =
                    group.count > group.examples.count
                    ? "<li class=\"more\">and \(grouped(Int64(group.count - group.examples.count))) more</li>" : ""
                html +=
                    "<tr data-reason-code=\"\(escape(group.code))\" data-reason-status=\"\(escape(group.status.name))\">"
                    + "<td>\(escape(group.status.name))</td><td><code>\(escape(group.code))</code></td>"
                    + "<td class=\"num\" data-count=\"\(group.count)\">\(grouped(Int64(group.count)))</td>"
                    + "<td class=\"num\">\(amounts)</td><td><ul>\(examples)\(more)</ul></td></tr>\n"
            }
            html += "</tbody></table>\n"
        }
        html += "</section>\n"
        html +=
            "<footer>settle \(escape(facts.settleVersion)) · the same sums as <code>summary.csv</code>; "
            + "amounts in major units, integers in minor units in <code>summary.csv</code>.</footer>\n"
        html += "</body>\n</html>\n"
        return Array(html.utf8)
    }

    /// Writes `report.html` (temporary name, fsync, rename).
    public static func write(
        path: String, facts: Facts, sums: ControlSums, counts: [LineStatus: Int], reasons: ReasonGroups,
        into set: FileSet? = nil
    ) throws(WriteFailure) -> (sha256: String, rows: Int) {
        let file = try OutputFile(path: path)
        file.append(bytes: render(facts: facts, sums: sums, counts: counts, reasons: reasons))
        file.endRow()
        let sha = try file.commit(into: set)
        return (sha, 1)
    }

    // MARK: - Parts

    static func currencyTable(code: String, sums: ControlSums.PerCurrency, planOnly: Bool) -> String {
        let currency = Currency(code)
        var html = "<table class=\"currency\" data-currency-table=\"\(escape(code))\">"
        html += "<caption>\(escape(code.uppercased()))</caption><tbody>\n"
        func heading(_ text: String) { html += "<tr class=\"heading\"><th colspan=\"3\">\(escape(text))</th></tr>\n" }
        // A row without a measure repeats one shown above (a status under Waiting): it is not
        // marked again, so each measure of summary.csv is on the page once.
        func row(_ label: String, _ measure: String?, _ amount: Int64, lines: Int? = nil, strong: Bool = false) {
            html += "<tr\(strong ? " class=\"total\"" : "")><td>\(escape(label))</td>"
            html += "<td class=\"num count\">"
            if let lines {
                let marked = measure.map { " data-measure-lines=\"\(escape($0))\"" } ?? ""
                html += "<span\(marked)>\(grouped(Int64(lines)))</span>"
            }
            html += "</td><td class=\"num\""
            if let measure {
                html +=
                    " data-currency=\"\(escape(code))\" data-measure=\"\(escape(measure))\" data-minor=\"\(amount)\""
            }
            html += ">\(escape(money(amount, code: code, currency: currency)))</td></tr>\n"
        }
        heading("Money in")
        row("Charges, gross", "charges_gross", sums.chargesGross, lines: sums.charges)
        row("Stripe fees", "charges_fees", sums.chargesFees)
        let labels: [(ChargeRow.Counting, String)] = [
            (.earlier, "Charges counted by an earlier run"), (.unallocated, "Charges not allocated from yet"),
            (.pending, "Charges pending"), (.failed, "Charges failed"),
        ]
        for (counting, label) in labels {
            let entry = sums.chargesBy[counting] ?? (0, 0)
            row(label, "charges_" + counting.rawValue, entry.gross, lines: entry.count)
        }
        let names = ControlSums.moveNames(planOnly: planOnly)
        heading(planOnly ? "To move (planned, not sent yet)" : "Moved")
        row(planOnly ? "Transfers planned" : "Transferred", names.transferred, sums.transferred, lines: sums.transfers)
        row(planOnly ? "Payouts planned" : "Paid out", names.paidOut, sums.paidOut, lines: sums.payouts)
        row(planOnly ? "Reversals planned" : "Reversed", names.reversed, sums.reversed, lines: sums.reversals)
        row("Reversal lines netted into transfers", "reversals_netted", sums.netted, lines: sums.nettedReversals)
        row(
            "Payouts of earlier runs that came back (lines failed here)", "payouts_returned", sums.returned,
            lines: sums.returnedLines)
        heading("Retained")
        row(
            planOnly ? "Platform retained, once applied" : "Platform retained", names.retained, sums.retained,
            strong: true)
        heading("Waiting")
        let deferred = sums.byStatus[.deferred] ?? (0, 0)
        row("Deferred (deferred.csv)", "status:deferred", deferred.amount, lines: deferred.lines)
        let unknown = sums.byStatus[.unknown]
        if let unknown { row("Outcome not known yet", "status:unknown", unknown.amount, lines: unknown.lines) }
        heading("Lines by status")
        row("Input", "input", sums.amount, lines: sums.lines, strong: true)
        // Every status the currency's lines have, so the rows add up to the input; deferred
        // and unknown are marked once, under Waiting.
        for status in LineStatus.allCases {
            if let entry = sums.byStatus[status] {
                let waiting = status == .deferred || status == .unknown
                row(status.name, waiting ? nil : "status:" + status.name, entry.amount, lines: entry.lines)
            }
        }
        html += "</tbody></table>\n"
        return html
    }

    static func fact(_ label: String, _ value: String, id: String, data: String? = nil) -> String {
        let attribute = data.map { " data-value=\"\(escape($0))\"" } ?? ""
        return "<div><dt>\(escape(label))</dt><dd id=\"\(id)\"\(attribute)>\(escape(value))</dd></div>"
    }

    static func exitMeaning(_ status: Int32) -> String {
        switch status {
        case 0: "every line settled, planned, already settled, netted or deferred"
        case 65: "some lines were rejected or failed: see errors.csv"
        case 75: "some outcomes are not known yet: run again later"
        case 64: "bad command line"
        case 66: "an input could not be read"
        case 73: "the output folder could not be written"
        case 78: "bad configuration"
        default: "internal error"
        }
    }

    /// `1,234.50 USD`: the canonical decimal with thousands grouped, then the code.
    static func money(_ minor: Int64, code: String, currency: Currency?) -> String {
        guard let currency else { return "\(grouped(minor)) (minor units) \(code.uppercased())" }
        let plain = MinorUnits.format(minor, currency: currency)
        let negative = plain.hasPrefix("-")
        let digits = negative ? String(plain.dropFirst()) : plain
        let parts = digits.split(separator: ".", omittingEmptySubsequences: false)
        var text = grouped(Int64(parts[0]) ?? 0)
        if parts.count > 1 { text += "." + parts[1] }
        return (negative ? "-" : "") + text + " " + code.uppercased()
    }

    /// `5,270,112`.
    static func grouped(_ value: Int64) -> String {
        let digits = String(value.magnitude)
        var out = value < 0 ? "-" : ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }

    /// Escapes text for HTML content and attribute values.
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    static let style = """
        @page { size: A4; margin: 12mm; }
        * { box-sizing: border-box; }
        body { font: 10pt/1.35 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif;
          color: #1a1a1a; margin: 16px auto; max-width: 1000px; padding: 0 12px; }
        h1 { font-size: 16pt; margin: 0 0 6px; }
        h2 { font-size: 12pt; margin: 14px 0 6px; border-bottom: 1px solid #999; padding-bottom: 2px; }
        dl.facts { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 0; }
        dl.facts div { display: flex; gap: 6px; }
        dt { color: #555; }
        dd { margin: 0; font-weight: 600; }
        table { border-collapse: collapse; margin: 0 0 8px; }
        th, td { padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
        td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
        td.count { color: #555; }
        tr.heading th { background: #f0f0f0; font-weight: 600; border-bottom: 1px solid #bbb; }
        tr.total td { font-weight: 700; }
        caption { text-align: left; font-weight: 700; font-size: 11pt; padding: 2px 0; }
        .currencies { display: flex; flex-wrap: wrap; gap: 8px 24px; }
        table.currency { min-width: 300px; }
        table.reasons { width: 100%; }
        table.reasons ul { margin: 0; padding-left: 14px; }
        table.reasons li { font-size: 9pt; }
        li.more { color: #555; list-style: none; }
        code { font: 9pt ui-monospace, "DejaVu Sans Mono", monospace; }
        .note { color: #444; margin: 2px 0 6px; }
        footer { margin-top: 12px; color: #666; font-size: 8pt; }
        section, tr { break-inside: avoid; }
        @media print { body { margin: 0; max-width: none; } }
        """
}
