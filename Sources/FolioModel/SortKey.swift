import FolioJSON

/// Order-preserving byte encodings: comparing two encodings with memcmp gives the order of the
/// values (`Value`'s total order). Each component is prefix-free, so a descending component is the
/// same bytes inverted, and a tuple's encoding is a prefix of the encoding of every longer tuple
/// that starts with it.
public enum SortKey {
    /// Appends one component; `descending` inverts its bytes.
    public static func append(_ value: Value?, descending: Bool, to bytes: inout [UInt8]) {
        let start = bytes.count
        if let value { append(value, to: &bytes) } else { bytes.append(Value.Kind.missing.rawValue) }
        if descending {
            for index in start..<bytes.count { bytes[index] = ~bytes[index] }
        }
    }

    /// `append(Value(json), ...)` without making the `Value`, for the scalars a key mostly holds.
    public static func append(json: JSON?, descending: Bool, to bytes: inout [UInt8]) {
        let start = bytes.count
        switch json {
        case nil: bytes.append(Value.Kind.missing.rawValue)
        case .null?: bytes.append(Value.Kind.null.rawValue)
        case .bool(let flag)?: bytes.append(flag ? 4 : 3)
        case .int(let number)?:
            bytes.append(Value.Kind.number.rawValue)
            appendNumber(primary: Double(number), secondary: exactRemainder(number), to: &bytes)
        case .double(let number)?:
            // As `Value` has it: 0.0 is the integer 0.
            bytes.append(Value.Kind.number.rawValue)
            appendNumber(primary: number, secondary: 0, to: &bytes)
        case .string(let string)?:
            bytes.append(Value.Kind.string.rawValue)
            appendString(string, to: &bytes)
        case let other?: append(Value(other), to: &bytes)
        }
        if descending {
            for index in start..<bytes.count { bytes[index] = ~bytes[index] }
        }
    }

    /// `append(.date(instant), ...)` without making the `Value`.
    public static func append(date instant: Instant, descending: Bool, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(Value.Kind.date.rawValue)
        appendDate(instant, to: &bytes)
        if descending {
            for index in start..<bytes.count { bytes[index] = ~bytes[index] }
        }
    }

    static func appendDate(_ instant: Instant, to bytes: inout [UInt8]) {
        appendSigned(instant.seconds, to: &bytes)
        appendBigEndian(UInt32(instant.nanoseconds), to: &bytes)
    }

    /// Appends the id that breaks ties: its bytes, a 0 terminator and its length, so that the id can be
    /// read back from the end of a key (ids never contain a 0 byte).
    public static func appendID(_ id: String, to bytes: inout [UInt8]) {
        var id = id
        id.withUTF8 { utf8 in
            bytes.append(contentsOf: utf8)
            bytes.append(0)
            bytes.append(UInt8(truncatingIfNeeded: utf8.count))
        }
    }

    /// The id at the end of a key written by `appendID`.
    public static func id(in key: UnsafeRawBufferPointer) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: key[idRange(in: key)]), as: UTF8.self)
    }

    /// Where the id's bytes lie in a sort key (see `id(in:)`).
    public static func idRange(in key: UnsafeRawBufferPointer) -> Range<Int> {
        let length = Int(key[key.count - 1])
        let end = key.count - 2
        return (end - length)..<end
    }

    static func append(_ value: Value, to bytes: inout [UInt8]) {
        bytes.append(value.kind.rawValue)
        switch value {
        case .null: break
        case .bool(let flag): bytes[bytes.count - 1] = flag ? 4 : 3
        case .int(let number): appendNumber(primary: Double(number), secondary: exactRemainder(number), to: &bytes)
        case .double(let number): appendNumber(primary: number, secondary: 0, to: &bytes)
        case .string(let string), .reference(let string): appendString(string, to: &bytes)
        case .date(let instant): appendDate(instant, to: &bytes)
        case .array(let elements):
            for element in elements { append(element, to: &bytes) }
            bytes.append(0)
        case .object(let fields):
            for field in fields {
                bytes.append(1)
                appendString(field.key, to: &bytes)
                append(field.value, to: &bytes)
            }
            bytes.append(0)
        }
    }

    /// Bytes, 0 escaped as 0 FF, then the terminator 0 1: shorter strings sort first.
    static func appendString(_ string: String, to bytes: inout [UInt8]) {
        var string = string
        string.withUTF8 { utf8 in
            if !utf8.contains(0) {
                // Most strings: their bytes in one copy.
                bytes.append(contentsOf: utf8)
            } else {
                for byte in utf8 {
                    bytes.append(byte)
                    if byte == 0 { bytes.append(0xFF) }
                }
            }
        }
        bytes.append(0)
        bytes.append(1)
    }

    /// A number as the nearest double, then how far an integer lies from that double, so integers
    /// beyond 2^53 keep their exact order and 1 and 1.0 encode alike.
    static func appendNumber(primary: Double, secondary: Int64, to bytes: inout [UInt8]) {
        let normalized = primary == 0 ? 0.0 : primary
        let bits = normalized.bitPattern
        appendBigEndian(bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63), to: &bytes)
        appendSigned(secondary, to: &bytes)
    }

    /// `number` minus the exact value of the double nearest to it.
    static func exactRemainder(_ number: Int64) -> Int64 {
        let nearest = Double(number)
        if nearest >= 9_223_372_036_854_775_808.0 { return (number - Int64.max) - 1 }
        return number - Int64(nearest)
    }

    static func appendSigned(_ number: Int64, to bytes: inout [UInt8]) {
        appendBigEndian(UInt64(bitPattern: number) ^ (1 << 63), to: &bytes)
    }

    static func appendBigEndian<T: FixedWidthInteger>(_ number: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: number.bigEndian) { bytes.append(contentsOf: $0) }
    }
}

extension Value {
    /// Bytes equal exactly for equal values (`1` and `1.0`, dates at one instant): a key for sets
    /// of values.
    public var hashKey: [UInt8] {
        var bytes: [UInt8] = []
        SortKey.append(self, to: &bytes)
        return bytes
    }
}
