import FolioJSON
import FolioModel

#if canImport(Glibc)
    import Glibc
#endif

/// A `get` of the plain form (`RequestDecoder.decodeLine`), its collection and id still bytes of the
/// line, and valid names (so their bytes are their JSON): what an event loop answers without making
/// a `Request` or a `String`. Valid only while the line is.
public struct PlainGet {
    public let collection: UnsafeRawBufferPointer
    public let id: UnsafeRawBufferPointer
    public let tag: Tag?

    public static let spec = OperationTable.spec(named: "get")!

    /// What the general decoder gives for the same line.
    public var request: Request {
        let get = Request.ReadOperation.get(
            collection: String(decoding: collection, as: UTF8.self), id: String(decoding: id, as: UTF8.self), at: nil,
            include: [])
        return Request(tag: tag, operation: .read(get), spec: Self.spec)
    }
}

extension RequestDecoder {
    /// A decoded line: a plain `get`, left in the line, or any other request (or the error).
    public enum LineDecoding {
        case plainGet(PlainGet)
        case request(Result<Request, TaggedError>)
    }

    /// `decode`, with a plain `get` left as a `PlainGet`.
    public static func decodeLine(_ line: UnsafeRawBufferPointer) -> LineDecoding {
        switch plain(line) {
        case .get(let get)?: return .plainGet(get)
        case .request(let request)?: return .request(.success(request))
        case nil: return .request(decodeInGeneral(line))
        }
    }

    /// `plain`'s request, a get too as a `Request`: what `decode` tries before the general decoder.
    static func plainRequest(_ line: UnsafeRawBufferPointer) -> Request? {
        switch plain(line) {
        case .get(let get)?: return get.request
        case .request(let request)?: return request
        case nil: return nil
        }
    }

    private enum Plain {
        case get(PlainGet)
        case request(Request)
    }

    /// The commonest reads, decoded without building their JSON: a flat object whose
    /// keys are `op`, an optional `tag` and the op's own, each once, whose strings are plain
    /// printable ASCII (no escape), whose numbers are non-negative integers of at most 18 digits and
    /// whose tag is such a string or number:
    ///
    /// - a `get` of `collection` and `id`;
    /// - a `list` of one `view` or `collection`, with optional `limit`, `offset` or `after` (a
    ///   cursor), and `explain`: a page of a view, or of a collection in creation order;
    /// - a `count` of one `view` or `collection`, with optional `explain`.
    ///
    /// Nil for any other line, and for one whose values the general decoder would refuse (an invalid
    /// name, a limit out of range, a damaged cursor), which the general decoder then reads: this
    /// gives exactly what it would give (`PlainRequestTests` and the request-decoder fuzz target
    /// compare the two), for a fraction of its instructions. For these requests decoding is a large
    /// part of the cost (docs/BENCHMARKS.md, "Get and pipelined get" and "Views over 1,000,000 objects").
    private static func plain(_ line: UnsafeRawBufferPointer) -> Plain? {
        if let get = compactGet(line) { return .get(get) }
        var scan = FlatScan(line)
        scan.skipSpace()
        guard scan.take(UInt8(ascii: "{")) else { return nil }
        var op: Range<Int>?
        var collection: Range<Int>?
        var id: Range<Int>?
        var view: Range<Int>?
        var after: Range<Int>?
        var limit: Int64?
        var offset: Int64?
        var explain: Bool?
        var tag: Tag?
        var sawTag = false
        scan.skipSpace()
        while true {
            guard let key = scan.plainString() else { return nil }
            scan.skipSpace()
            guard scan.take(UInt8(ascii: ":")) else { return nil }
            scan.skipSpace()
            switch scan.key(key) {
            case .op?:
                guard op == nil, let value = scan.plainString() else { return nil }
                op = value
            case .collection?:
                guard collection == nil, let value = scan.plainString() else { return nil }
                collection = value
            case .id?:
                guard id == nil, let value = scan.plainString() else { return nil }
                id = value
            case .view?:
                guard view == nil, let value = scan.plainString() else { return nil }
                view = value
            case .after?:
                guard after == nil, let value = scan.plainString() else { return nil }
                after = value
            case .limit?:
                guard limit == nil, let value = scan.plainInteger() else { return nil }
                limit = value.value
            case .offset?:
                guard offset == nil, let value = scan.plainInteger() else { return nil }
                offset = value.value
            case .explain?:
                guard explain == nil, let value = scan.literalBool() else { return nil }
                explain = value
            case .tag?:
                guard !sawTag, let value = scan.tag() else { return nil }
                sawTag = true
                tag = value
            case nil: return nil
            }
            scan.skipSpace()
            if scan.take(UInt8(ascii: ",")) {
                scan.skipSpace()
                continue
            }
            guard scan.take(UInt8(ascii: "}")) else { return nil }
            break
        }
        scan.skipSpace()
        guard scan.atEnd, let op else { return nil }
        if scan.equals(op, "get") {
            guard let collection, let id, view == nil, after == nil, limit == nil, offset == nil, explain == nil,
                scan.isCollectionName(collection), scan.isID(id)
            else { return nil }
            return .get(PlainGet(collection: scan.bytes(collection), id: scan.bytes(id), tag: tag))
        }
        let paging = scan.equals(op, "list")
        guard paging || scan.equals(op, "count"), id == nil, paging || (limit == nil && offset == nil && after == nil),
            offset == nil || after == nil
        else { return nil }
        let source: Query.Source
        switch (view, collection) {
        case (let view?, nil) where scan.isCollectionName(view): source = .view(scan.string(view))
        case (nil, let collection?) where scan.isCollectionName(collection):
            source = .collection(scan.string(collection))
        default: return nil
        }
        let pageLimit = limit ?? Int64(Query.defaultLimit)
        guard pageLimit <= Int64(Query.maxLimit) else { return nil }
        var start = Query.Start.offset(Int(offset ?? 0))
        if let after {
            guard let cursor = try? PageCursor(token: scan.string(after)) else { return nil }
            start = .after(cursor)
        }
        guard let query = try? Query(source: source, limit: Int(pageLimit), start: start, explain: explain ?? false)
        else { return nil }
        return .request(
            Request(
                tag: tag, operation: .read(paging ? .list(query) : .count(query)), spec: paging ? listSpec : countSpec))
    }

    /// The `get` as our clients write it: compact, `op`, `collection` and `id` in that order, and a
    /// tag first (FolioKit), after `op` (the Python client), last or not at all. Its fixed pieces are
    /// compared whole instead of each key being read and looked up, which halves a get's decoding.
    /// Nil for any other line, which `plain`'s general scan then reads: the same `PlainGet` for
    /// the same line, whichever way it went (`PlainRequestTests`).
    private static func compactGet(_ line: UnsafeRawBufferPointer) -> PlainGet? {
        var scan = FlatScan(line)
        guard scan.take(UInt8(ascii: "{")) else { return nil }
        var tag: Tag?
        if scan.literal(#""tag":"#) {
            guard let value = scan.tag(), scan.take(UInt8(ascii: ",")) else { return nil }
            tag = value
        }
        guard scan.literal(#""op":"get","#) else { return nil }
        if tag == nil, scan.literal(#""tag":"#) {
            guard let value = scan.tag(), scan.take(UInt8(ascii: ",")) else { return nil }
            tag = value
        }
        guard scan.literal(#""collection":"#), let collection = scan.plainString(), scan.literal(#","id":"#),
            let id = scan.plainString()
        else { return nil }
        if tag == nil, scan.literal(#","tag":"#) {
            guard let value = scan.tag() else { return nil }
            tag = value
        }
        guard scan.take(UInt8(ascii: "}")), scan.atEnd, scan.isCollectionName(collection), scan.isID(id) else {
            return nil
        }
        return PlainGet(collection: scan.bytes(collection), id: scan.bytes(id), tag: tag)
    }

    private static let listSpec = OperationTable.spec(named: "list")!
    private static let countSpec = OperationTable.spec(named: "count")!
}

/// A cursor over a request line for `RequestDecoder.plainRequest`: it recognizes only the plain
/// forms, and says nil or false (not an error) to anything else.
private struct FlatScan {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    enum Key { case op, collection, id, tag, view, after, limit, offset, explain }

    mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// A string of printable ASCII without `\`: the range of its characters, past its closing quote.
    /// Eight bytes at a time while eight remain: the first byte that is a quote, a backslash, a
    /// control byte, DEL or not ASCII ends the string or rules it out.
    mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        if let base = bytes.baseAddress {
            while position + 8 <= bytes.count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                let stops =
                    Self.zeroBytes(word ^ Self.eachByte(0x22)) | Self.zeroBytes(word ^ Self.eachByte(0x5C))
                    | Self.zeroBytes(word ^ Self.eachByte(0x7F)) | Self.bytesBelow(0x20, in: word)
                    | (word & Self.eachByte(0x80))
                if stops == 0 {
                    position += 8
                    continue
                }
                // Each term's lowest flag marks a byte that matches it (a flag above one may be a
                // borrow's), so the lowest flag of all is the first byte that stops the string.
                let end = position + stops.trailingZeroBitCount / 8
                guard bytes[end] == UInt8(ascii: "\"") else { return nil }
                position = end + 1
                return start..<end
            }
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return start..<(position - 1)
            }
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
            position += 1
        }
        return nil
    }

    private static func eachByte(_ byte: UInt8) -> UInt64 { 0x0101_0101_0101_0101 &* UInt64(byte) }

    /// The high bit of each byte of `word` that is zero, and perhaps of bytes after one that is.
    private static func zeroBytes(_ word: UInt64) -> UInt64 { (word &- eachByte(1)) & ~word & eachByte(0x80) }

    /// The high bit of each byte of `word` below `limit` (at most 0x80), and perhaps of bytes after one that is.
    private static func bytesBelow(_ limit: UInt8, in word: UInt64) -> UInt64 {
        (word &- eachByte(limit)) & ~word & eachByte(0x80)
    }

    /// A non-negative integer of 1 to 18 digits without leading zeros (so that it is an `Int64` and
    /// its text its one spelling): its value and its text's range.
    mutating func plainInteger() -> (value: Int64, range: Range<Int>)? {
        let start = position
        var value: Int64 = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            // 18 digits always fit in an Int64; a 19th might not, and is left to the general decoder.
            if position - start == 18 { return nil }
            value = value * 10 + Int64(bytes[position] - UInt8(ascii: "0"))
            position += 1
        }
        let digits = position - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        // A number must end here: `1.5`, `1e3` are other numbers.
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") || bytes[position] | 0x20 == UInt8(ascii: "e") {
            return nil
        }
        return (value, start..<position)
    }

    /// `true` or `false`.
    mutating func literalBool() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// Steps past `text` if it comes next. Texts of 8 to 16 bytes are compared as two words (their
    /// first and last eight bytes), shorter ones byte by byte.
    @inline(__always)
    mutating func literal(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount
        let end = position + count
        guard end <= bytes.count, let base = bytes.baseAddress else { return false }
        let expected = UnsafeRawPointer(text.utf8Start)
        let found = base + position
        if count >= 8 && count <= 16 {
            guard found.loadUnaligned(as: UInt64.self) == expected.loadUnaligned(as: UInt64.self),
                found.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
                    == expected.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
            else { return false }
        } else {
            guard memcmp(found, expected, count) == 0 else { return false }
        }
        position = end
        return true
    }

    /// A plain string or a plain integer, as the general decoder's tag.
    mutating func tag() -> Tag? {
        let start = position
        if position < bytes.count, bytes[position] == UInt8(ascii: "\"") {
            // A string that is not plain is the general decoder's, whatever follows the byte it stopped at.
            guard let characters = plainString() else { return nil }
            return Tag(
                value: .string(string(characters)),
                text: Array(UnsafeRawBufferPointer(rebasing: bytes[start..<position])))
        }
        guard let number = plainInteger() else { return nil }
        return Tag(value: .int(number.value), text: Array(UnsafeRawBufferPointer(rebasing: bytes[number.range])))
    }

    func key(_ range: Range<Int>) -> Key? {
        switch range.count {
        case 2:
            if equals(range, "op") { return .op }
            if equals(range, "id") { return .id }
        case 3: if equals(range, "tag") { return .tag }
        case 4: if equals(range, "view") { return .view }
        case 5:
            if equals(range, "after") { return .after }
            if equals(range, "limit") { return .limit }
        case 6: if equals(range, "offset") { return .offset }
        case 7: if equals(range, "explain") { return .explain }
        case 10: if equals(range, "collection") { return .collection }
        default: break
        }
        return nil
    }

    func equals(_ range: Range<Int>, _ text: StaticString) -> Bool {
        guard range.count == text.utf8CodeUnitCount else { return false }
        let expected = text.utf8Start
        for offset in 0..<range.count where bytes[range.lowerBound + offset] != expected[offset] { return false }
        return true
    }

    func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[range]) }

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// A collection's or a view's name (they follow one rule), checked on its bytes.
    func isCollectionName(_ range: Range<Int>) -> Bool {
        Names.isCollectionName(UnsafeRawBufferPointer(rebasing: bytes[range]))
    }

    func isID(_ range: Range<Int>) -> Bool { Names.isID(UnsafeRawBufferPointer(rebasing: bytes[range])) }
}
