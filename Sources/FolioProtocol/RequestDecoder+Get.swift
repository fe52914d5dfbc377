import FolioJSON
import FolioModel

extension RequestDecoder {
    /// The `get` of almost every client, decoded without building its JSON: a flat object whose keys
    /// are `op` ("get"), `collection`, `id` and an optional `tag`, each once, whose strings are plain
    /// printable ASCII (no escape) and whose tag is such a string or a non-negative integer of at
    /// most 18 digits, with a valid collection name and id. Nil for any other line, which the general
    /// decoder then reads: this gives exactly what it would give (`RequestDecoderTests` and the
    /// request-decoder fuzz target compare the two), for about a fifth of its instructions. A get is
    /// the one request whose decoding is most of its cost (docs/BENCHMARKS.md "Get and pipelined get").
    static func plainGet(_ line: UnsafeRawBufferPointer) -> Request? {
        var scan = FlatScan(line)
        scan.skipSpace()
        guard scan.take(UInt8(ascii: "{")) else { return nil }
        var op: Range<Int>?
        var collection: Range<Int>?
        var id: Range<Int>?
        var tag: Tag?
        var sawTag = false
        scan.skipSpace()
        while true {
            guard let key = scan.plainString() else { return nil }
            scan.skipSpace()
            guard scan.take(UInt8(ascii: ":")) else { return nil }
            scan.skipSpace()
            switch scan.key(key) {
            case .op:
                guard op == nil, let value = scan.plainString() else { return nil }
                op = value
            case .collection:
                guard collection == nil, let value = scan.plainString() else { return nil }
                collection = value
            case .id:
                guard id == nil, let value = scan.plainString() else { return nil }
                id = value
            case .tag:
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
        guard scan.atEnd, let op, scan.equals(op, "get"), let collection, let id,
            Names.isCollectionName(UnsafeRawBufferPointer(rebasing: line[collection])), Names.isID(UnsafeRawBufferPointer(rebasing: line[id]))
        else { return nil }
        return Request(
            tag: tag, operation: .read(.get(collection: scan.string(collection), id: scan.string(id), at: nil, include: [])), spec: getSpec)
    }

    private static let getSpec = OperationTable.spec(named: "get")!
}

/// A cursor over a request line for `RequestDecoder.plainGet`: it recognizes only the plain forms,
/// and says nil (not an error) to anything else.
private struct FlatScan {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var atEnd: Bool { position == bytes.count }

    enum Key { case op, collection, id, tag }

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
    mutating func plainString() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
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

    /// A plain string, or a non-negative integer of 1 to 18 digits without leading zeros (so that it
    /// is an `Int64` and its text its one spelling), as the general decoder's tag.
    mutating func tag() -> Tag? {
        let start = position
        if position < bytes.count, bytes[position] == UInt8(ascii: "\"") {
            // A string that is not plain is the general decoder's, whatever follows the byte it stopped at.
            guard let characters = plainString() else { return nil }
            return Tag(value: .string(string(characters)), text: Array(UnsafeRawBufferPointer(rebasing: bytes[start..<position])))
        }
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
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") || bytes[position] | 0x20 == UInt8(ascii: "e") { return nil }
        return Tag(value: .int(value), text: Array(UnsafeRawBufferPointer(rebasing: bytes[start..<position])))
    }

    func key(_ range: Range<Int>) -> Key? {
        switch range.count {
        case 2:
            if equals(range, "op") { return .op }
            if equals(range, "id") { return .id }
        case 3: if equals(range, "tag") { return .tag }
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

    func string(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}
