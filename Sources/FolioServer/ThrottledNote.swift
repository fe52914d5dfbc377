/// Counts occurrences of something worth a log line, and says when to write one: at most once per
/// `interval`, with the count since the last line, so a flood of failures is one line per interval.
struct ThrottledNote {
    let intervalMilliseconds: UInt64
    private var count = 0
    private var lastLogged: UInt64 = 0
    private var logged = false

    init(intervalMilliseconds: UInt64 = 10_000) { self.intervalMilliseconds = intervalMilliseconds }

    /// Records `occurrences` at `now`; returns the count to report if a line is due now.
    mutating func note(_ occurrences: Int = 1, now: UInt64) -> Int? {
        count += occurrences
        guard !logged || now >= lastLogged + intervalMilliseconds else { return nil }
        defer {
            count = 0
            lastLogged = now
            logged = true
        }
        return count
    }

    /// What was counted since the last line, to report (and forget) when the loop is idle again.
    mutating func flush(now: UInt64) -> Int? {
        guard count > 0, now >= lastLogged + intervalMilliseconds else { return nil }
        defer {
            count = 0
            lastLogged = now
        }
        return count
    }
}
