import FolioJSON
import Foundation

/// Encodable → Folio data: `Date` as `{"$date"}`, `Data` as base64 text, `URL` as its string, `Ref`
/// and `FolioFile` as their typed values (their own `encode(to:)`); nil optionals are left out.
enum RecordEncoder {
    static func encode<T: Encodable>(_ value: T) throws -> JSON {
        if let special = try specialValue(value) { return special }
        let node = EncodingNode()
        do {
            try value.encode(to: NodeEncoder(node: node, codingPath: []))
        } catch let error as FolioError {
            throw error
        } catch {
            throw FolioError.encoding("\(error)")
        }
        return node.value
    }

    /// The types whose own `Codable` form is not Folio's.
    fileprivate static func specialValue<T>(_ value: T) throws -> JSON? {
        switch value {
        case let date as Date: return .object(["$date": .string(try FolioDate.format(date))])
        case let data as Data: return .string(data.base64EncodedString())
        case let url as URL: return .string(url.absoluteString)
        default: return nil
        }
    }
}

/// A value being encoded: a scalar, or an object or array whose members are filled in later.
private final class EncodingNode {
    private var scalar: JSON = .null
    private var fields: [(key: String, node: EncodingNode)]?
    private var elements: [EncodingNode]?

    var value: JSON {
        if let fields { return .object(JSONObject(fields.map { JSONObject.Field(key: $0.key, value: $0.node.value) })) }
        if let elements { return .array(elements.map(\.value)) }
        return scalar
    }

    func set(_ value: JSON) { scalar = value }

    func child(forKey key: String) -> EncodingNode {
        if fields == nil { fields = [] }
        let child = EncodingNode()
        if let index = fields!.firstIndex(where: { $0.key == key }) {
            fields![index].node = child
        } else {
            fields!.append((key, child))
        }
        return child
    }

    func makeObject() { if fields == nil { fields = [] } }
    func makeArray() { if elements == nil { elements = [] } }

    func appendElement() -> EncodingNode {
        let child = EncodingNode()
        if elements == nil { elements = [] }
        elements!.append(child)
        return child
    }

    var elementCount: Int { elements?.count ?? 0 }
}

/// Levels a record may nest: foliod reads 128 in a request line, and the line's own fields (a
/// batch's op, its data) take a few. A deeper record is refused here: foliod could not read its
/// line, tag included.
let maxRecordDepth = 120

private func encodeValue<T: Encodable>(_ value: T, into node: EncodingNode, codingPath: [any CodingKey]) throws {
    guard codingPath.count <= maxRecordDepth else {
        throw FolioError.encoding(
            "a value nested deeper than \(maxRecordDepth) levels at \(codingPath.prefix(8).map(\.stringValue).joined(separator: "."))...; foliod reads 128 in a request"
        )
    }
    if let special = try RecordEncoder.specialValue(value) {
        node.set(special)
    } else {
        try value.encode(to: NodeEncoder(node: node, codingPath: codingPath))
    }
}

private func checked(_ value: Double, _ codingPath: [any CodingKey]) throws -> JSON {
    guard value.isFinite else {
        throw FolioError.encoding(
            "\(value) at \(codingPath.map(\.stringValue).joined(separator: ".")) is not a JSON number")
    }
    return .double(value)
}

private func integer<T: BinaryInteger>(_ value: T) -> JSON {
    if let exact = Int64(exactly: value) { return .int(exact) }
    return .double(Double(value))
}

private struct NodeEncoder: Encoder {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.makeObject()
        return KeyedEncodingContainer(KeyedContainer(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.makeArray()
        return UnkeyedContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleContainer(node: node, codingPath: codingPath)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    func encodeNil(forKey key: Key) throws { node.child(forKey: key.stringValue).set(.null) }
    func encode(_ value: Bool, forKey key: Key) throws { node.child(forKey: key.stringValue).set(.bool(value)) }
    func encode(_ value: String, forKey key: Key) throws { node.child(forKey: key.stringValue).set(.string(value)) }
    func encode(_ value: Double, forKey key: Key) throws {
        node.child(forKey: key.stringValue).set(try checked(value, codingPath + [key]))
    }
    func encode(_ value: Float, forKey key: Key) throws { try encode(Double(value), forKey: key) }
    func encode(_ value: Int, forKey key: Key) throws { node.child(forKey: key.stringValue).set(.int(Int64(value))) }
    func encode(_ value: Int64, forKey key: Key) throws { node.child(forKey: key.stringValue).set(.int(value)) }
    func encode(_ value: UInt64, forKey key: Key) throws { node.child(forKey: key.stringValue).set(integer(value)) }
    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encodeValue(value, into: node.child(forKey: key.stringValue), codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        let child = node.child(forKey: key.stringValue)
        child.makeObject()
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, codingPath: codingPath + [key]))
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = node.child(forKey: key.stringValue)
        child.makeArray()
        return UnkeyedContainer(node: child, codingPath: codingPath + [key])
    }

    func superEncoder() -> any Encoder { NodeEncoder(node: node.child(forKey: "super"), codingPath: codingPath) }
    func superEncoder(forKey key: Key) -> any Encoder {
        NodeEncoder(node: node.child(forKey: key.stringValue), codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]
    var count: Int { node.elementCount }

    private var nextPath: [any CodingKey] { codingPath + [IndexKey(count)] }

    func encodeNil() throws { node.appendElement().set(.null) }
    func encode(_ value: Bool) throws { node.appendElement().set(.bool(value)) }
    func encode(_ value: String) throws { node.appendElement().set(.string(value)) }
    func encode(_ value: Double) throws { node.appendElement().set(try checked(value, nextPath)) }
    func encode(_ value: Float) throws { try encode(Double(value)) }
    func encode(_ value: Int) throws { node.appendElement().set(.int(Int64(value))) }
    func encode(_ value: Int64) throws { node.appendElement().set(.int(value)) }
    func encode(_ value: UInt64) throws { node.appendElement().set(integer(value)) }
    func encode<T: Encodable>(_ value: T) throws {
        let path = nextPath
        try encodeValue(value, into: node.appendElement(), codingPath: path)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let path = nextPath
        let child = node.appendElement()
        child.makeObject()
        return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, codingPath: path))
    }

    func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let path = nextPath
        let child = node.appendElement()
        child.makeArray()
        return UnkeyedContainer(node: child, codingPath: path)
    }

    func superEncoder() -> any Encoder { NodeEncoder(node: node.appendElement(), codingPath: nextPath) }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let node: EncodingNode
    let codingPath: [any CodingKey]

    func encodeNil() throws { node.set(.null) }
    func encode(_ value: Bool) throws { node.set(.bool(value)) }
    func encode(_ value: String) throws { node.set(.string(value)) }
    func encode(_ value: Double) throws { node.set(try checked(value, codingPath)) }
    func encode(_ value: Float) throws { try encode(Double(value)) }
    func encode(_ value: Int) throws { node.set(.int(Int64(value))) }
    func encode(_ value: Int8) throws { node.set(.int(Int64(value))) }
    func encode(_ value: Int16) throws { node.set(.int(Int64(value))) }
    func encode(_ value: Int32) throws { node.set(.int(Int64(value))) }
    func encode(_ value: Int64) throws { node.set(.int(value)) }
    func encode(_ value: UInt) throws { node.set(integer(value)) }
    func encode(_ value: UInt8) throws { node.set(.int(Int64(value))) }
    func encode(_ value: UInt16) throws { node.set(.int(Int64(value))) }
    func encode(_ value: UInt32) throws { node.set(.int(Int64(value))) }
    func encode(_ value: UInt64) throws { node.set(integer(value)) }
    func encode<T: Encodable>(_ value: T) throws { try encodeValue(value, into: node, codingPath: codingPath) }
}
