import CFolioKernels

/// Why a text is not acceptable JSON, and at which byte offset.
public struct JSONError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String
    public let offset: Int

    public var description: String { "\(message) at byte \(offset)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes: rejects invalid UTF-8, control characters in strings,
/// lone surrogates, duplicate keys, trailing data and nesting deeper than `maxDepth`.
public struct JSONParser: ~Copyable {
    public static let defaultMaxDepth = 128

    private let bytes: UnsafeRawBufferPointer
    private var position = 0
    private let maxDepth: Int
    private var depth = 0
    /// The top-level key whose value's byte range is wanted, and that range once found.
    private var rangeKey: String?
    private var keyRange: Range<Int>?
    /// The top-level key whose value, if a plain string, is left unread (see `parse(_:rangeOf:range:deferring:deferred:)`).
    private var deferredKey: String?
    private var deferredRange: Range<Int>?

    private init(_ bytes: UnsafeRawBufferPointer, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth) throws(JSONError)
        -> JSON
    {
        var parser = JSONParser(bytes, maxDepth: maxDepth)
        return try parser.parseWhole()
    }

    /// The one value `bytes` holds, with nothing but whitespace around it.
    private mutating func parseWhole() throws(JSONError) -> JSON {
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        if position != bytes.count { throw error("unexpected data after the JSON value") }
        return value
    }

    /// Parses, and tells where the value of top-level field `key` lies in `bytes` (to echo it verbatim).
    public static func parse(_ bytes: UnsafeRawBufferPointer, rangeOf key: String, range: inout Range<Int>?)
        throws(JSONError) -> JSON
    {
        var parser = JSONParser(bytes, maxDepth: defaultMaxDepth)
        parser.rangeKey = key
        let value = try parser.parseWhole()
        range = parser.keyRange
        return value
    }

    /// Parses as `parse(_:rangeOf:range:)` does, but leaves the value of top-level field
    /// `deferredKey` unread when it is a plain string (no escape, ASCII without control characters): it is
    /// checked like any string, stands in the result as the empty string, and `deferred` tells where
    /// its characters (without the quotes) lie in `bytes`. A long string (a file's base64) is then
    /// read once, where it is used, not copied into a `String` first. Any other value is parsed as
    /// usual and `deferred` is nil.
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, rangeOf key: String, range: inout Range<Int>?, deferring deferredKey: String,
        deferred: inout Range<Int>?
    ) throws(JSONError) -> JSON {
        var parser = JSONParser(bytes, maxDepth: defaultMaxDepth)
        parser.rangeKey = key
        parser.deferredKey = deferredKey
        let value = try parser.parseWhole()
        range = parser.keyRange
        deferred = parser.deferredRange
        return value
    }

    /// The one value that starts at `start` in `bytes` (no whitespace before it), read as if inside
    /// `depth` levels of arrays and objects (which count toward `defaultMaxDepth`), and where it ends.
    /// What follows it is not looked at: a caller that knows the text around the value (an event's
    /// canonical bytes) reads only the values it needs with the full parser.
    public static func parseValue(in bytes: UnsafeRawBufferPointer, at start: Int, depth: Int) throws(JSONError) -> (
        value: JSON, end: Int
    ) {
        var parser = JSONParser(bytes, maxDepth: defaultMaxDepth)
        parser.position = start
        parser.depth = depth
        let value = try parser.parseValue()
        return (value, parser.position)
    }

    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSON {
        let result: Result<JSON, JSONError> = bytes.withUnsafeBytes { buffer in
            Result { () throws(JSONError) in try parse(buffer, maxDepth: maxDepth) }
        }
        return try result.get()
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSON {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    private func error(_ message: String) -> JSONError {
        JSONError(message: message, offset: position)
    }

    private var atEnd: Bool { position >= bytes.count }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONError) -> JSON {
        guard !atEnd else { throw error("unexpected end of input") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character '\(printable(bytes[position]))'")
        }
    }

    private func printable(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONError) {
        let count = literal.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw error("unexpected end of input") }
        for i in 0..<count where bytes[position + i] != literal.utf8Start[i] {
            throw error("invalid literal, expected '\(literal)'")
        }
        position += count
    }

    private mutating func enter() throws(JSONError) {
        depth += 1
        if depth > maxDepth { throw error("nesting deeper than \(maxDepth) levels") }
    }

    private mutating func parseObject() throws(JSONError) -> JSON {
        try enter()
        position += 1
        var fields: [JSONObject.Field] = []
        // Duplicate keys: a linear search while the object is small, then a table of positions.
        var positions: [String: Int]?
        skipWhitespace()
        if !atEnd && bytes[position] == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(JSONObject())
        }
        // Room for eight fields at once: growing from one by doubling took four allocations for an
        // object of five to eight fields (an event, or a typical record).
        fields.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard !atEnd else { throw error("unexpected end of input in an object") }
            guard bytes[position] == UInt8(ascii: "\"") else { throw error("expected a string key in an object") }
            let keyOffset = position
            let key = try parseString()
            if positions != nil {
                if positions!.updateValue(fields.count, forKey: key) != nil { throw duplicateKey(key, at: keyOffset) }
            } else {
                for field in fields where field.key == key { throw duplicateKey(key, at: keyOffset) }
                if fields.count == JSONObject.indexThreshold {
                    var table = [String: Int](minimumCapacity: 2 * JSONObject.indexThreshold)
                    for (index, field) in fields.enumerated() { table[field.key] = index }
                    table[key] = fields.count
                    positions = table
                }
            }
            skipWhitespace()
            guard !atEnd, bytes[position] == UInt8(ascii: ":") else { throw error("expected ':' after a key") }
            position += 1
            skipWhitespace()
            let valueStart = position
            if depth == 1, let deferredKey, key == deferredKey, let content = skipPlainString() {
                deferredRange = content
                fields.append(JSONObject.Field(key: key, value: .string("")))
            } else {
                fields.append(JSONObject.Field(key: key, value: try parseValue()))
            }
            if depth == 1, let rangeKey, key == rangeKey { keyRange = valueStart..<position }
            skipWhitespace()
            guard !atEnd else { throw error("unexpected end of input in an object") }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                depth -= 1
                return .object(JSONObject(fields: fields, positions: positions))
            default: throw error("expected ',' or '}' in an object")
            }
        }
    }

    private func duplicateKey(_ key: String, at offset: Int) -> JSONError {
        JSONError(message: "duplicate key \"\(key)\"", offset: offset)
    }

    private mutating func parseArray() throws(JSONError) -> JSON {
        try enter()
        position += 1
        var elements: [JSON] = []
        skipWhitespace()
        if !atEnd && bytes[position] == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(elements)
        }
        elements.reserveCapacity(4)
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard !atEnd else { throw error("unexpected end of input in an array") }
            switch bytes[position] {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                depth -= 1
                return .array(elements)
            default: throw error("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func parseString() throws(JSONError) -> String {
        position += 1
        let start = position
        var ascii = true
        if bytes.count - position >= 64 { skipPlainRun() }
        // Fast path: no escapes.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
                position += 1
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw JSONError(message: "invalid UTF-8 in a string", offset: start)
                }
                return string
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character in a string (escape it)") }
            if byte >= 0x80 { ascii = false }
            position += 1
        }
        guard position < bytes.count else { throw JSONError(message: "unterminated string", offset: start - 1) }
        var utf8 = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let string = String(validating: utf8, as: UTF8.self) else {
                    throw JSONError(message: "invalid UTF-8 in a string", offset: start)
                }
                return string
            case UInt8(ascii: "\\"):
                position += 1
                guard position < bytes.count else { break }
                let escape = bytes[position]
                position += 1
                switch escape {
                case UInt8(ascii: "\""): utf8.append(0x22)
                case UInt8(ascii: "\\"): utf8.append(0x5C)
                case UInt8(ascii: "/"): utf8.append(0x2F)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"): try appendUnicodeEscape(to: &utf8)
                default:
                    position -= 1
                    throw error("invalid escape '\\\(printable(escape))'")
                }
            default:
                if byte < 0x20 { throw error("control character in a string (escape it)") }
                utf8.append(byte)
                position += 1
            }
        }
        throw JSONError(message: "unterminated string", offset: start - 1)
    }

    /// Passes over a string that starts here if it holds nothing but printable ASCII (no escape, no
    /// control character, no multi-byte UTF-8), and answers where its characters lie; otherwise
    /// moves nothing and answers nil (the string is parsed as usual, and any error found there).
    private mutating func skipPlainString() -> Range<Int>? {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
        let opening = position
        position += 1
        if bytes.count - position >= 64 { skipPlainRun() }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return opening + 1..<position - 1
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            position += 1
        }
        position = opening
        return nil
    }

    /// The fastest path of a string: 32 bytes at a time (AVX2), then 16, while none of them ends it, escapes or
    /// needs a look (a control character, or a byte of multi-byte UTF-8). Long strings (base64
    /// pieces of files) are mostly that; short ones do not come here, where it would cost more
    /// than it saves.
    private mutating func skipPlainRun() {
        guard let base = bytes.baseAddress else { return }
        position += folio_json_plain_prefix(base + position, bytes.count - position)
        let quote = SIMD16<UInt8>(repeating: UInt8(ascii: "\""))
        let backslash = SIMD16<UInt8>(repeating: UInt8(ascii: "\\"))
        let space = SIMD16<UInt8>(repeating: 0x20)
        let high = SIMD16<UInt8>(repeating: 0x80)
        while position + 16 <= bytes.count {
            let chunk = (base + position).loadUnaligned(as: SIMD16<UInt8>.self)
            if any((chunk .== quote) .| (chunk .== backslash) .| (chunk .< space) .| (chunk .>= high)) { return }
            position += 16
        }
    }

    private mutating func readHex4() throws(JSONError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in a \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private mutating func appendUnicodeEscape(to utf8: inout [UInt8]) throws(JSONError) {
        var scalar = try readHex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard position + 6 <= bytes.count, bytes[position] == UInt8(ascii: "\\"),
                bytes[position + 1] == UInt8(ascii: "u")
            else { throw error("lone high surrogate in a \\u escape") }
            position += 2
            let low = try readHex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid low surrogate in a \\u escape") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw error("lone low surrogate in a \\u escape")
        }
        utf8.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar)!)!)
    }

    private mutating func parseNumber() throws(JSONError) -> JSON {
        let start = position
        var negative = false
        if bytes[position] == UInt8(ascii: "-") {
            negative = true
            position += 1
        }
        guard position < bytes.count, isDigit(bytes[position]) else { throw error("invalid number") }
        var magnitude: UInt64 = 0
        var overflow = false
        // Any digit of the significand other than 0: such a number must not read as zero.
        var nonzero = false
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
            if position < bytes.count, isDigit(bytes[position]) { throw error("leading zero in a number") }
        } else {
            while position < bytes.count, isDigit(bytes[position]) {
                nonzero = nonzero || bytes[position] != UInt8(ascii: "0")
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
                overflow = overflow || o1 || o2
                magnitude = sum
                position += 1
            }
        }
        var integral = true
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            integral = false
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else {
                throw error("invalid number: digit expected after '.'")
            }
            while position < bytes.count, isDigit(bytes[position]) {
                nonzero = nonzero || bytes[position] != UInt8(ascii: "0")
                position += 1
            }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            integral = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard position < bytes.count, isDigit(bytes[position]) else {
                throw error("invalid number: digit expected in the exponent")
            }
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        if integral && !overflow {
            if !negative && magnitude <= UInt64(Int64.max) { return .int(Int64(magnitude)) }
            if negative && magnitude <= UInt64(Int64.max) + 1 { return .int(Int64(bitPattern: 0 &- magnitude)) }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        // Beyond a double's range either way is refused alike: too large would read as infinity,
        // too small (below the least subnormal) as zero.
        guard let value = Double(text), value.isFinite, value != 0 || !nonzero else {
            throw JSONError(
                message: "number out of range (a double holds magnitudes from about 4.9e-324 to 1.8e308)", offset: start
            )
        }
        return .double(value)
    }

    @inline(__always)
    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
