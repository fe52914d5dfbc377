/// A point in time with nanosecond precision: seconds since the Unix epoch and the nanoseconds into
/// that second. Orders chronologically. Parsed from and formatted as RFC 3339.
public struct Instant: Sendable, Hashable, Comparable {
    public let seconds: Int64
    /// 0 ..< 1_000_000_000
    public let nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(milliseconds: Int64) {
        let (quotient, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        if remainder < 0 {
            self.init(seconds: quotient - 1, nanoseconds: Int32(remainder + 1000) * 1_000_000)
        } else {
            self.init(seconds: quotient, nanoseconds: Int32(remainder) * 1_000_000)
        }
    }

    public var milliseconds: Int64 { seconds * 1000 + Int64(nanoseconds / 1_000_000) }

    public static func < (lhs: Instant, rhs: Instant) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }
}

extension Instant {
    /// Parses an RFC 3339 date-time: `2026-11-29T10:00:00Z`, `2026-11-29T10:00:00.5+01:00`
    /// (`t`, `z` and a space for `T` accepted too; up to 9 fraction digits). Nil if malformed.
    public init?(rfc3339 text: String) {
        var text = text
        guard let parsed = text.withUTF8({ Instant.parse(UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// The same, from the text's UTF-8 bytes.
    public init?(rfc3339 bytes: UnsafeRawBufferPointer) {
        guard let parsed = Instant.parse(bytes) else { return nil }
        self = parsed
    }

    private static func parse(_ b: UnsafeRawBufferPointer) -> Instant? {
        var i = 0
        func number(_ digits: Int) -> Int64? {
            guard i + digits <= b.count else { return nil }
            var value: Int64 = 0
            for _ in 0..<digits {
                let c = b[i]
                guard c >= 0x30 && c <= 0x39 else { return nil }
                value = value * 10 + Int64(c - 0x30)
                i += 1
            }
            return value
        }
        func expect(_ chars: UInt8...) -> Bool {
            guard i < b.count, chars.contains(b[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), expect(0x2D), let month = number(2), expect(0x2D), let day = number(2),
            expect(UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")),
            let hour = number(2), expect(0x3A), let minute = number(2), expect(0x3A), let second = number(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var nanos: Int64 = 0
        if i < b.count && b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
                guard digits < 9 else { return nil }
                nanos = nanos * 10 + Int64(b[i] - 0x30)
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<9 { nanos *= 10 }
        }
        var offset: Int64 = 0
        if expect(UInt8(ascii: "Z"), UInt8(ascii: "z")) {
        } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign: Int64 = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let offsetHours = number(2), expect(0x3A), let offsetMinutes = number(2),
                offsetHours <= 23, offsetMinutes <= 59
            else { return nil }
            offset = sign * (offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Instant(seconds: seconds, nanoseconds: Int32(nanos))
    }

    /// RFC 3339 in UTC with millisecond precision, the form of every timestamp Folio writes:
    /// `2026-11-29T10:00:00.000Z`.
    public var rfc3339Milliseconds: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        appendRFC3339Milliseconds(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    public func appendRFC3339Milliseconds(to bytes: inout [UInt8]) {
        // Written into 24 bytes on the stack and appended once: an append per character cost about
        // 700 instructions a timestamp, and a create writes several.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { text in
            let end = writeRFC3339Milliseconds(to: text)
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[..<end]))
        }
    }

    /// The same text written at the start of `text`, which holds at least 24 bytes; returns how many
    /// it wrote (24 for the years 0000 to 9999).
    public func writeRFC3339Milliseconds(to text: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var end = writeDateTime(to: text)
        text[end] = UInt8(ascii: ".")
        end = writeDigits(Int64(nanoseconds / 1_000_000), 3, to: text, at: end + 1)
        text[end] = UInt8(ascii: "Z")
        return end + 1
    }

    /// RFC 3339 in UTC with every nanosecond it has (trailing fraction zeros dropped, no fraction
    /// for a whole second), so that reading it back gives this instant: `2026-11-29T10:00:00.000000123Z`.
    /// For the years 0000 to 9999.
    public var rfc3339: String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 30) { text in
            var end = writeDateTime(to: text)
            if nanoseconds > 0 {
                var fraction = Int64(nanoseconds)
                var digits = 9
                while fraction % 10 == 0 {
                    fraction /= 10
                    digits -= 1
                }
                text[end] = UInt8(ascii: ".")
                end = writeDigits(fraction, digits, to: text, at: end + 1)
            }
            text[end] = UInt8(ascii: "Z")
            return String(decoding: UnsafeBufferPointer(rebasing: text[..<(end + 1)]), as: UTF8.self)
        }
    }

    /// Writes `YYYY-MM-DDThh:mm:ss` in UTC at the start of `text` (19 bytes); returns where it ends.
    private func writeDateTime(to text: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civilFromDays(days)
        var end = writeDigits(year, 4, to: text, at: 0)
        text[end] = UInt8(ascii: "-")
        end = writeDigits(month, 2, to: text, at: end + 1)
        text[end] = UInt8(ascii: "-")
        end = writeDigits(day, 2, to: text, at: end + 1)
        text[end] = UInt8(ascii: "T")
        end = writeDigits(secondOfDay / 3600, 2, to: text, at: end + 1)
        text[end] = UInt8(ascii: ":")
        end = writeDigits(secondOfDay / 60 % 60, 2, to: text, at: end + 1)
        text[end] = UInt8(ascii: ":")
        return writeDigits(secondOfDay % 60, 2, to: text, at: end + 1)
    }
}

/// Writes `value` in exactly `digits` decimal digits, zeros first, at `start`; returns where they end.
private func writeDigits(_ value: Int64, _ digits: Int, to text: UnsafeMutableBufferPointer<UInt8>, at start: Int)
    -> Int
{
    var value = value
    var index = start + digits
    while index > start {
        index -= 1
        text[index] = 0x30 + UInt8(truncatingIfNeeded: value % 10)
        value /= 10
    }
    return start + digits
}

private func floorDivision(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
    let (q, r) = a.quotientAndRemainder(dividingBy: b)
    return r < 0 ? (q - 1, r + b) : (q, r)
}

private func isLeapYear(_ year: Int64) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

private func daysInMonth(year: Int64, month: Int64) -> Int64 {
    switch month {
    case 2: return isLeapYear(year) ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}

// Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian calendar).
private func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    return era * 146_097 + dayOfEra - 719_468
}

private func civilFromDays(_ days: Int64) -> (Int64, Int64, Int64) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let dayOfEra = z - era * 146_097
    let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
    let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
    let mp = (5 * dayOfYear + 2) / 153
    let day = dayOfYear - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
}
