import FolioJSON

/// A `list` or `count`: which objects, in which order, which page.
public struct Query: Sendable {
    public enum Source: Sendable, Equatable {
        case collection(String)
        case view(String)
        /// The objects the field of one object refers to (`links`): in the field's array order.
        case links(collection: String, id: String, field: [String])
        /// The objects of `sourceCollection` whose field `path` refers to one object (`backlinks`).
        case backlinks(collection: String, id: String, sourceCollection: String, path: String)
    }

    public enum Start: Sendable, Equatable {
        case offset(Int)
        case after(PageCursor)
    }

    public static let defaultLimit = 100
    public static let maxLimit = 1000

    public var source: Source
    public var filter: Filter?
    /// The `where` as given, part of the query's identity for cursors.
    public var whereJSON: JSON?
    /// Nil: creation order for a collection, the view's own order for a view.
    public var sort: SortOrder?
    /// Read the order backwards (ties by id included): `order: "desc"`.
    public var descending: Bool
    public var limit: Int
    public var start: Start
    public var explain: Bool
    /// Reference paths whose targets the answer holds in place of the references.
    public var include: [IncludePath]
    /// Whether objects of a collection may be shown, when the asker may not see every collection:
    /// linked and included objects of others stay references, marked `"$forbidden": true`.
    public var readable: (@Sendable (String) -> Bool)?

    public init(
        source: Source, whereJSON: JSON? = nil, sort: SortOrder? = nil, descending: Bool = false,
        limit: Int = defaultLimit,
        start: Start = .offset(0), explain: Bool = false, include: [IncludePath] = []
    ) throws(ValidationError) {
        self.source = source
        (self.whereJSON, self.filter) = try Filter.parse(optional: whereJSON)
        self.sort = sort
        self.descending = descending
        self.limit = limit
        self.start = start
        self.explain = explain
        self.include = include
        readable = nil
    }

    /// Identifies the query's order and filter, so a cursor is only accepted by the query that made
    /// it (however its where and sort were spelled).
    public var fingerprint: [UInt8] {
        // Written piece by piece into one buffer: a page that has more computes it for its `next`.
        var writer = JSONWriter(capacity: 256)
        func add(_ text: String) { writer.bytes.append(contentsOf: text.utf8) }
        var order = sort
        switch source {
        case .collection(let name):
            add("c:")
            add(name)
            order = sort ?? SortOrder.creation
        case .view(let name):
            add("v:")
            add(name)
        case .links(let collection, let id, let field):
            add("l:\(collection)/\(id)\u{0}")
            add(field.joined(separator: "."))
        case .backlinks(let collection, let id, let sourceCollection, let path):
            add("b:\(collection)/\(id)\u{0}\(sourceCollection).\(path)")
        }
        writer.bytes.append(0)
        if let order { add(order.description) }
        writer.bytes.append(contentsOf: [0, descending ? 1 : 0, 0])
        whereJSON?.writeCanonical(to: &writer)
        return PageCursor.digest(writer.bytes)
    }
}

/// One path of `include`: dotted field names, each step into an object's field; a reference met on
/// the way is replaced by its target (at most `maxReferences` on one path), inside arrays too.
public struct IncludePath: Sendable, Equatable {
    public static let maxReferences = 3
    public static let maxPaths = 8

    public let segments: [String]

    public init(parsing text: String) throws(ValidationError) {
        let segments = text.asciiSegments(separatedBy: ".")
        guard !segments.isEmpty, !segments.contains(where: { $0.isEmpty || $0.hasPrefix("$") }) else {
            throw ValidationError("include: \(Names.quoted(text)) is not a field path")
        }
        self.segments = segments
    }

    public var text: String { segments.joined(separator: ".") }
}

/// The opaque `next` of a page: where the page ended (the last item's sort key), bound to its query.
/// Paging with it is stable under concurrent changes: the next page starts after that key.
public struct PageCursor: Sendable, Equatable {
    public let fingerprint: [UInt8]
    public let key: [UInt8]

    static let format: UInt8 = 2

    public init(fingerprint: [UInt8], key: [UInt8]) {
        self.fingerprint = fingerprint
        self.key = key
    }

    /// base64url of: format (2), fingerprint (8 bytes), key, check (8 bytes over everything before).
    public var token: String {
        var text: [UInt8] = []
        appendToken(to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `token`'s characters (which need no escaping in JSON) to `text`, composing the bytes
    /// on the stack: a page's `next` is written once per page.
    public func appendToken(to text: inout [UInt8]) {
        let checked = 9 + key.count
        withUnsafeTemporaryAllocation(byteCount: checked + 8, alignment: 8) { body in
            body[0] = Self.format
            fingerprint.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: body[1..<9]).copyMemory(from: $0) }
            key.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: body[9..<checked]).copyMemory(from: $0) }
            let check = Self.checkValue(UnsafeRawBufferPointer(rebasing: body[..<checked]))
            body.storeBytes(of: check.bigEndian, toByteOffset: checked, as: UInt64.self)
            Base64URL.encode(UnsafeRawBufferPointer(body), appendingTo: &text)
        }
    }

    /// Refuses anything `token` did not write: a changed byte fails the check (but for a chance of
    /// 2^-64), so a damaged cursor never resumes at an arbitrary position.
    public init(token: String) throws(ValidationError) {
        // Checked and cut where the decoded bytes lie: every page after a cursor comes here.
        guard let bytes = Base64URL.decode(token), bytes.count > 17, bytes[0] == Self.format,
            let parts = bytes.withUnsafeBytes({ raw -> (fingerprint: [UInt8], key: [UInt8])? in
                let end = raw.count - 8
                let stored = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: end, as: UInt64.self))
                guard stored == Self.checkValue(UnsafeRawBufferPointer(rebasing: raw[..<end])) else { return nil }
                return (
                    Array(UnsafeRawBufferPointer(rebasing: raw[1..<9])),
                    Array(UnsafeRawBufferPointer(rebasing: raw[9..<end]))
                )
            })
        else {
            throw ValidationError(
                "after: not a cursor returned by list, or a damaged one (use the \"next\" of a previous page as it came)"
            )
        }
        (fingerprint, key) = parts
    }

    /// An 8-byte FNV-1a digest: enough to tell queries apart, not a security measure.
    static func digest(_ bytes: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: fnv1a(bytes).bigEndian) { Array($0) }
    }

    /// FNV-1a with a final avalanche (SplitMix64's mixer), so that every changed bit of the body
    /// changes about half the check's bits.
    private static func checkValue(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var hash = fnv1a(bytes) ^ 0x9E37_79B9_7F4A_7C15
        hash = (hash ^ (hash >> 30)) &* 0xBF58_476D_1CE4_E5B9
        hash = (hash ^ (hash >> 27)) &* 0x94D0_49BB_1331_11EB
        hash ^= hash >> 31
        return hash
    }

    private static func fnv1a(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }
}

/// RFC 4648 base64 with the URL alphabet and no padding.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Base64's digits with `-` and `_` for `+` and `/`, and no padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        bytes.withUnsafeBytes { encode($0, appendingTo: &text) }
        return String(decoding: text, as: UTF8.self)
    }

    /// Appends `encode`'s characters for `bytes` to `text`.
    public static func encode(_ bytes: UnsafeRawBufferPointer, appendingTo text: inout [UInt8]) {
        let start = text.count
        Base64.encode(bytes, appendingTo: &text)
        while text.count > start && text.last == UInt8(ascii: "=") { text.removeLast() }
        text.withUnsafeMutableBufferPointer { buffer in
            for index in start..<buffer.count {
                if buffer[index] == UInt8(ascii: "+") {
                    buffer[index] = UInt8(ascii: "-")
                } else if buffer[index] == UInt8(ascii: "/") {
                    buffer[index] = UInt8(ascii: "_")
                }
            }
        }
    }

    private static let digits: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (digit, character) in alphabet.enumerated() { table[Int(character)] = Int8(digit) }
        return table
    }()

    /// Nil unless `text` is exactly what `encode` writes: no padding, and no bits set past the last byte.
    public static func decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { utf8 -> [UInt8]? in
            var valid = true
            // Into an array of the decoded size, through the digits' table once looked up.
            let bytes = [UInt8](unsafeUninitializedCapacity: utf8.count * 3 / 4 + 1) { out, count in
                digits.withUnsafeBufferPointer { digits in
                    var value: UInt32 = 0
                    var bits = 0
                    for character in utf8 {
                        let digit = digits[Int(character)]
                        guard digit >= 0 else {
                            valid = false
                            break
                        }
                        value = (value << 6 | UInt32(digit)) & 0xFFFF
                        bits += 6
                        if bits >= 8 {
                            bits -= 8
                            out[count] = UInt8((value >> UInt32(bits)) & 0xFF)
                            count += 1
                        }
                    }
                    if bits >= 6 || value & ((1 << UInt32(bits)) - 1) != 0 { valid = false }
                }
            }
            return valid ? bytes : nil
        }
    }
}
