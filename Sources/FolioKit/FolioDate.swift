import Foundation

/// `Date` ⇄ the RFC 3339 text of a `{"$date"}` (PROTOCOL.md §4), without a formatter: UTC, up to 9
/// fraction digits, so that a `Date` read back equals the one written.
enum FolioDate {
    /// Seconds from 1970-01-01 to 2001-01-01, `Date`'s reference.
    private static let referenceOffset: Int64 = 978_307_200

    /// `2026-12-01T09:00:00.123456789Z`, trailing fraction zeros dropped. Years outside 0000–9999
    /// have no RFC 3339 form and throw.
    static func format(_ date: Date) throws -> String {
        let interval = date.timeIntervalSinceReferenceDate
        guard interval.isFinite else { throw FolioError.encoding("date \(interval) is not finite") }
        var whole = interval.rounded(.down)
        var nanos = Int64(((interval - whole) * 1e9).rounded())
        if nanos >= 1_000_000_000 {
            whole += 1
            nanos -= 1_000_000_000
        }
        guard abs(whole) < 4e11 else { throw FolioError.encoding("date \(date) is outside the years 0000 to 9999") }
        let unix = Int64(whole) + referenceOffset
        let days = unix >= 0 ? unix / 86_400 : (unix - 86_399) / 86_400
        let secondOfDay = unix - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        guard (0...9999).contains(year) else { throw FolioError.encoding("date \(date) is outside the years 0000 to 9999") }
        var text = ""
        text.reserveCapacity(30)
        append(year, digits: 4, to: &text)
        text.append("-")
        append(month, digits: 2, to: &text)
        text.append("-")
        append(day, digits: 2, to: &text)
        text.append("T")
        append(secondOfDay / 3600, digits: 2, to: &text)
        text.append(":")
        append(secondOfDay / 60 % 60, digits: 2, to: &text)
        text.append(":")
        append(secondOfDay % 60, digits: 2, to: &text)
        if nanos > 0 {
            var digits = 9
            while nanos % 10 == 0 {
                nanos /= 10
                digits -= 1
            }
            text.append(".")
            append(nanos, digits: digits, to: &text)
        }
        text.append("Z")
        return text
    }

    /// Reads `YYYY-MM-DD(T|t| )hh:mm:ss(.fraction)?(Z|z|±hh:mm)`; nil if `text` is not that.
    static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes -> Date? in
            func number(_ start: Int, _ count: Int) -> Int64? {
                guard start + count <= bytes.count else { return nil }
                var value: Int64 = 0
                for index in start..<start + count {
                    let digit = Int64(bytes[index]) - 48
                    guard (0...9).contains(digit) else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            guard bytes.count >= 20, let year = number(0, 4), bytes[4] == UInt8(ascii: "-"), let month = number(5, 2),
                bytes[7] == UInt8(ascii: "-"), let day = number(8, 2),
                [UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")].contains(bytes[10]),
                let hour = number(11, 2), bytes[13] == UInt8(ascii: ":"), let minute = number(14, 2),
                bytes[16] == UInt8(ascii: ":"), let second = number(17, 2),
                (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
            else { return nil }
            var index = 19
            var nanos: Int64 = 0
            if bytes[index] == UInt8(ascii: ".") {
                index += 1
                var digits = 0
                while index < bytes.count, (48...57).contains(bytes[index]) {
                    if digits < 9 {
                        nanos = nanos * 10 + Int64(bytes[index]) - 48
                        digits += 1
                    }
                    index += 1
                }
                guard digits > 0 else { return nil }
                for _ in digits..<9 { nanos *= 10 }
            }
            guard index < bytes.count else { return nil }
            var offset: Int64 = 0
            switch bytes[index] {
            case UInt8(ascii: "Z"), UInt8(ascii: "z"):
                index += 1
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                guard let hours = number(index + 1, 2), bytes.count > index + 3, bytes[index + 3] == UInt8(ascii: ":"),
                    let minutes = number(index + 4, 2), hours < 24, minutes < 60
                else { return nil }
                offset = (hours * 3600 + minutes * 60) * (bytes[index] == UInt8(ascii: "-") ? -1 : 1)
                index += 6
            default:
                return nil
            }
            guard index == bytes.count else { return nil }
            let unix = days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset
            return Date(timeIntervalSinceReferenceDate: Double(unix - referenceOffset) + Double(nanos) / 1e9)
        }
    }

    private static func append(_ value: Int64, digits: Int, to text: inout String) {
        let decimal = String(value)
        if decimal.count < digits { text.append(String(repeating: "0", count: digits - decimal.count)) }
        text.append(decimal)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let year = month <= 2 ? year - 1 : year
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
