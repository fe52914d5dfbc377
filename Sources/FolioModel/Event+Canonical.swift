import FolioJSON
import Glibc

extension Event {
    /// An object event (`created`, `updated`, `deleted`) read from its canonical bytes by their
    /// layout, which `write(to:)` fixes:
    ///
    ///     {"seq":N,"type":"T","at":"A","collection":"C","id":"I","version":V
    ///      [,"data":{…} | ,"patch":{…}[,"ops":…]][,"cause":N][,"request":{…}],"by":{"uid":U,"gid":G,"pid":P}}
    ///
    /// Only the values of unbounded shape (the data, the patch, the ops, the request) go through the
    /// JSON parser; the head is compared and read in place. The general decoder built a JSON tree of
    /// the whole event first, then looked each field up in it: about 27,000 instructions an event,
    /// on every path that reads the log (a cluster node applying other nodes' events, rebuild,
    /// verify, history).
    ///
    /// nil when the bytes are not laid out so, or anything in them fails a check: the caller then
    /// decodes them the general way, which accepts what this accepts with the same result (the same
    /// checks, made on the same values) and says what is wrong with the rest. So this needs no error
    /// messages of its own, and a layout it does not know (another key order, whitespace, an escape
    /// in a name) costs only the general decoding.
    @_spi(Fuzzing) public static func decodingCanonicalObjectEvent(
        _ bytes: UnsafeRawBufferPointer, dataRange: inout Range<Int>?, checkingData: Bool
    ) -> Event? {
        var scan = CanonicalScanner(bytes)
        guard scan.literal("{\"seq\":"), let sequence = scan.unsigned(), sequence > 0, scan.literal(",\"type\":\""),
            let kind = scan.literal("created\"")
                ? 0 : scan.literal("updated\"") ? 1 : scan.literal("deleted\"") ? 2 : nil,
            scan.literal(",\"at\":"), let at = scan.plainStringBytes(), let timestamp = Timestamp(rfc3339: at),
            scan.literal(",\"collection\":"), let collection = scan.plainString(), scan.literal(",\"id\":"),
            let id = scan.plainString(),
            scan.literal(",\"version\":"), let version = scan.unsigned(), version > 0
        else { return nil }
        do {
            try Names.validateCollection(collection)
            try Names.validateID(id)
        } catch { return nil }
        let change: Change
        var data: Range<Int>?
        switch kind {
        case 0:
            guard scan.literal(",\"data\":"), let (value, range) = scan.value(), case .object(let object) = value else {
                return nil
            }
            if checkingData {
                do { try RecordData.validate(data: object) } catch { return nil }
            }
            data = range
            change = .created(collection: collection, id: id, data: object)
        case 1:
            guard scan.literal(",\"patch\":"), let (value, _) = scan.value(), case .object(let patch) = value else {
                return nil
            }
            if checkingData {
                do { try RecordData.validate(patch: patch) } catch { return nil }
            }
            var ops: FieldOperations?
            if scan.literal(",\"ops\":") {
                guard let (json, _) = scan.value() else { return nil }
                do { ops = try FieldOperations(parsing: json, beside: patch) } catch { return nil }
            }
            change = .updated(collection: collection, id: id, patch: patch, ops: ops)
        default:
            change = .deleted(collection: collection, id: id)
        }
        var cause: UInt64?
        if scan.literal(",\"cause\":") {
            guard let number = scan.unsigned(), number > 0, number < sequence else { return nil }
            cause = number
        }
        var request: RequestRecord?
        if scan.literal(",\"request\":") {
            guard let (json, _) = scan.value() else { return nil }
            do { request = try RequestRecord(parsing: json) } catch { return nil }
        }
        guard scan.literal(",\"by\":{\"uid\":"), let uid = scan.unsigned(), uid <= UInt64(UInt32.max),
            scan.literal(",\"gid\":"),
            let gid = scan.unsigned(), gid <= UInt64(UInt32.max), scan.literal(",\"pid\":"), let pid = scan.signed(),
            let pidValue = Int32(exactly: pid), scan.literal("}}"), scan.atEnd
        else { return nil }
        dataRange = data
        return Event(
            sequence: sequence, timestamp: timestamp, origin: Origin(uid: UInt32(uid), gid: UInt32(gid), pid: pidValue),
            version: version,
            change: change, cause: cause, request: request)
    }
}

/// Reads canonical JSON text piece by piece, each piece in the one form the canonical writer gives
/// it; any other form answers nil.
private struct CanonicalScanner {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    /// Passes over `text` if it comes next.
    mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        guard bytes.count - position >= count, let base = bytes.baseAddress,
            memcmp(base + position, text.utf8Start, count) == 0
        else { return false }
        position += count
        return true
    }

    /// A non-negative integer up to `Int64.max` as the writer gives it: `0`, or digits without a
    /// leading zero. What follows must be checked by the caller (a `.` or an exponent makes it a
    /// double, which the next literal refuses).
    mutating func unsigned() -> UInt64? {
        guard position < bytes.count else { return nil }
        let first = bytes[position]
        if first == UInt8(ascii: "0") {
            position += 1
            return position < bytes.count && isDigit(bytes[position]) ? nil : 0
        }
        guard isDigit(first) else { return nil }
        var value: UInt64 = 0
        var digits = 0
        while position < bytes.count, isDigit(bytes[position]) {
            digits += 1
            guard digits <= 19 else { return nil }
            value = value * 10 + UInt64(bytes[position] - UInt8(ascii: "0"))
            position += 1
        }
        return value <= UInt64(Int64.max) ? value : nil
    }

    /// An integer that may be negative: `-` then a positive one (never `-0`).
    mutating func signed() -> Int64? {
        guard position < bytes.count else { return nil }
        guard bytes[position] == UInt8(ascii: "-") else { return unsigned().map { Int64($0) } }
        position += 1
        guard let magnitude = unsigned(), magnitude > 0 else { return nil }
        return -Int64(magnitude)
    }

    /// A string of printable ASCII without a quote or a backslash: one that needs no escape and
    /// reads the same as bytes and as text.
    mutating func plainString() -> String? {
        plainStringBytes().map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes of such a string, where they lie.
    mutating func plainStringBytes() -> UnsafeRawBufferPointer? {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
        let start = position + 1
        var end = start
        while end < bytes.count {
            let byte = bytes[end]
            if byte == UInt8(ascii: "\"") { break }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end < bytes.count else { return nil }
        position = end + 1
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// A value of the event's object, through the JSON parser (one level deep already), and where
    /// it lies.
    mutating func value() -> (JSON, Range<Int>)? {
        guard let (value, end) = try? JSONParser.parseValue(in: bytes, at: position, depth: 1) else { return nil }
        defer { position = end }
        return (value, position..<end)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
