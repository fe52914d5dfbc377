import Foundation

/// One row of the storms' table: a figure before, during and after a storm, and the bound it was
/// held to, if any.
struct StormFigure {
    enum Verdict {
        /// Measured and shown; no bound.
        case shown
        case held
        case broken
    }

    let storm: String
    let measure: String
    let before: String
    let during: String
    let after: String
    /// The bound and how the figures compare to it, e.g. `during / before = 1.08 ≤ 2`.
    let check: String
    let verdict: Verdict
    /// A bound on latency or throughput: on a shared machine it can break from noise alone, so
    /// `--timing report` shows it without failing the run.
    let isTiming: Bool

    init(
        _ storm: String, _ measure: String, before: String = "", during: String = "", after: String = "",
        check: String = "", holds: Bool? = nil, isTiming: Bool = false
    ) {
        self.storm = storm
        self.measure = measure
        self.before = before
        self.during = during
        self.after = after
        self.check = check
        verdict = holds.map { $0 ? .held : .broken } ?? .shown
        self.isTiming = isTiming
    }

    func verdictText(judgingTiming: Bool) -> String {
        switch verdict {
        case .shown: return ""
        case .held: return "ok"
        case .broken: return isTiming && !judgingTiming ? "over (timing, not judged)" : "FAILED"
        }
    }

    func fails(judgingTiming: Bool) -> Bool { verdict == .broken && (judgingTiming || !isTiming) }

    static func table(_ figures: [StormFigure], judgingTiming: Bool) -> TextTable {
        var table = TextTable(
            header: ["storm", "measure", "before", "during", "after", "bound", "result"], leftAligned: 2)
        for figure in figures {
            table.append([
                figure.storm, figure.measure, figure.before, figure.during, figure.after, figure.check,
                figure.verdictText(judgingTiming: judgingTiming),
            ])
        }
        return table
    }

    /// Bytes in B, KiB or MiB.
    static func bytes(_ count: Int) -> String {
        switch abs(count) {
        case ..<1024: return "\(count) B"
        case ..<(1 << 20): return String(format: "%.1f KiB", Double(count) / 1024)
        default: return String(format: "%.1f MiB", Double(count) / 1_048_576)
        }
    }

    static func kibibytes(_ kib: Int) -> String { bytes(kib * 1024) }

    static func ratio(_ value: Double) -> String { String(format: "%.2f", value) }
}
