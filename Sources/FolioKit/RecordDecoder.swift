import FolioJSON
import Foundation

/// Folio data → Decodable: `Date` from a `{"$date"}` or from the RFC 3339 text of `createdAt` and
/// `updatedAt`, `Data` from base64 text, `URL` from a string; integers from integral doubles.
enum RecordDecoder {
    static func decode<T: Decodable>(_ type: T.Type, from value: JSON) throws -> T {
        do {
            return try decodeValue(type, from: value, codingPath: [])
        } catch let error as FolioError {
            throw error
        } catch {
            throw FolioError.decoding("\(T.self): \(error)")
        }
    }
}

private func decodeValue<T: Decodable>(_ type: T.Type, from value: JSON, codingPath: [any CodingKey]) throws -> T {
    if T.self == Date.self {
        let text: String?
        switch value {
        case .string(let string): text = string
        case .object(let object) where object.count == 1: text = object["$date"]?.stringValue
        default: text = nil
        }
        guard let text, let date = FolioDate.parse(text) else { throw mismatch(T.self, value, codingPath) }
        return date as! T
    }
    if T.self == Data.self {
        guard case .string(let text) = value, let data = Data(base64Encoded: text) else {
            throw mismatch(T.self, value, codingPath)
        }
        return data as! T
    }
    if T.self == URL.self {
        guard case .string(let text) = value, let url = URL(string: text) else {
            throw mismatch(T.self, value, codingPath)
        }
        return url as! T
    }
    return try T(from: ValueDecoder(value: value, codingPath: codingPath))
}

private func mismatch(_ type: Any.Type, _ value: JSON, _ codingPath: [any CodingKey]) -> DecodingError {
    DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found \(value.kindDescription)"))
}

private func integer<T: FixedWidthInteger>(_ type: T.Type, _ value: JSON, _ codingPath: [any CodingKey]) throws -> T {
    switch value {
    case .int(let integer): if let exact = T(exactly: integer) { return exact }
    case .double(let double): if let exact = T(exactly: double) { return exact }
    default: break
    }
    throw mismatch(T.self, value, codingPath)
}

private func double(_ value: JSON, _ codingPath: [any CodingKey]) throws -> Double {
    switch value {
    case .int(let integer): return Double(integer)
    case .double(let double): return double
    default: throw mismatch(Double.self, value, codingPath)
    }
}

private func string(_ value: JSON, _ codingPath: [any CodingKey]) throws -> String {
    guard case .string(let string) = value else { throw mismatch(String.self, value, codingPath) }
    return string
}

private func bool(_ value: JSON, _ codingPath: [any CodingKey]) throws -> Bool {
    guard case .bool(let bool) = value else { throw mismatch(Bool.self, value, codingPath) }
    return bool
}

private struct ValueDecoder: Decoder {
    let value: JSON
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch(JSONObject.self, value, codingPath) }
        return KeyedDecodingContainer(KeyedContainer(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSON].self, value, codingPath) }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleContainer(value: value, codingPath: codingPath)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    let codingPath: [any CodingKey]

    var allKeys: [Key] { object.fields.compactMap { Key(stringValue: $0.key) } }

    func contains(_ key: Key) -> Bool { object.index(of: key.stringValue) != nil }

    private func value(_ key: Key) throws -> JSON {
        guard let value = object[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "no field \"\(key.stringValue)\""))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { object[key.stringValue]?.isNull ?? true }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try bool(value(key), codingPath + [key]) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try string(value(key), codingPath + [key]) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try double(value(key), codingPath + [key]) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        Float(try double(value(key), codingPath + [key]))
    }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try integer(Int.self, value(key), codingPath + [key])
    }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try integer(Int64.self, value(key), codingPath + [key])
    }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decodeValue(type, from: value(key), codingPath: codingPath + [key])
    }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        guard let value = object[key.stringValue], !value.isNull else { return nil }
        return try string(value, codingPath + [key])
    }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
        guard let value = object[key.stringValue], !value.isNull else { return nil }
        return try integer(Int.self, value, codingPath + [key])
    }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        guard let value = object[key.stringValue], !value.isNull else { return nil }
        return try decodeValue(type, from: value, codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: value(key), codingPath: codingPath + [key]).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder { ValueDecoder(value: object["super"] ?? .null, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: object[key.stringValue] ?? .null, codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSON]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [JSON], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private mutating func next() throws -> (JSON, [any CodingKey]) {
        let path = codingPath + [IndexKey(currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                JSON.self, .init(codingPath: path, debugDescription: "the array has ended"))
        }
        defer { currentIndex += 1 }
        return (elements[currentIndex], path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex].isNull else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode(_ type: Bool.Type) throws -> Bool {
        let (value, path) = try next()
        return try bool(value, path)
    }
    mutating func decode(_ type: String.Type) throws -> String {
        let (value, path) = try next()
        return try string(value, path)
    }
    mutating func decode(_ type: Double.Type) throws -> Double {
        let (value, path) = try next()
        return try double(value, path)
    }
    mutating func decode(_ type: Int.Type) throws -> Int {
        let (value, path) = try next()
        return try integer(Int.self, value, path)
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (value, path) = try next()
        return try decodeValue(type, from: value, codingPath: path)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<
        NestedKey
    > {
        let (value, path) = try next()
        return try ValueDecoder(value: value, codingPath: path).container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let (value, path) = try next()
        return try ValueDecoder(value: value, codingPath: path).unkeyedContainer()
    }
    mutating func superDecoder() throws -> any Decoder {
        let (value, path) = try next()
        return ValueDecoder(value: value, codingPath: path)
    }
}

private struct SingleContainer: SingleValueDecodingContainer {
    let value: JSON
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try double(value, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try integer(Int.self, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(Int8.self, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(Int16.self, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(Int32.self, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(Int64.self, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(UInt.self, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(UInt8.self, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(UInt16.self, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(UInt32.self, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(UInt64.self, value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type, from: value, codingPath: codingPath) }
}
