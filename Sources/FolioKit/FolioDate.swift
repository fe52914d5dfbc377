import FolioModel
import Foundation

/// `Date` ⇄ the RFC 3339 text of a `{"$date"}` (PROTOCOL.md §4), by the server's own `Instant`: UTC,
/// up to 9 fraction digits, so that a `Date` read back equals the one written.
enum FolioDate {
    /// Seconds from 1970-01-01 to 2001-01-01, `Date`'s reference.
    private static let referenceOffset: Int64 = 978_307_200

    /// `2026-12-01T09:00:00.123456789Z`. Years outside 0000–9999 have no RFC 3339 form and throw.
    static func format(_ date: Date) throws -> String {
        let interval = date.timeIntervalSinceReferenceDate
        // 0000-01-01 and 10000-01-01, in seconds from 2001.
        guard interval >= -63_145_526_400, interval < 252_423_993_600 else {
            throw FolioError.encoding("date \(date) is outside the years 0000 to 9999")
        }
        var whole = interval.rounded(.down)
        var nanoseconds = Int32(((interval - whole) * 1e9).rounded())
        if nanoseconds >= 1_000_000_000 {
            whole += 1
            nanoseconds -= 1_000_000_000
        }
        return Instant(seconds: Int64(whole) + referenceOffset, nanoseconds: nanoseconds).rfc3339
    }

    /// Reads `YYYY-MM-DD(T|t| )hh:mm:ss(.fraction)?(Z|z|±hh:mm)` as foliod does; nil if `text` is not that.
    static func parse(_ text: String) -> Date? {
        guard let instant = Instant(rfc3339: text) else { return nil }
        return Date(
            timeIntervalSinceReferenceDate: Double(instant.seconds - referenceOffset) + Double(instant.nanoseconds)
                / 1e9)
    }
}
