import Foundation
import Synchronization

/// Values the probe makes itself and recognizes by a sentinel string (`Ref` by its id, `FolioFile`
/// by its name).
protocol ProbeValue {
    static func probe(_ sentinel: String) -> Self
    var probeSentinel: String { get }
}

/// Names the stored field a key path of a record type reads: Swift on Linux has no key path →
/// name reflection, so the record type is decoded from a probe decoder that gives every field a
/// distinct sentinel (strings, integers, doubles, dates, references), and the key path is read on
/// that probe to see which sentinel it holds. Bool fields get one more probe each, with only that
/// field true. CodingKeys renames are honoured because the keys are the decoder's. A type whose
/// fields the probe cannot make (an enum that is not `CaseIterable`, a validating `init(from:)`)
/// names them in `FolioRecord.fieldNames`.
final class FieldProbe<Record: FolioRecord>: @unchecked Sendable {
    /// The record's top-level coding keys (what `save` may have to unset); empty if the probe failed.
    let topLevelKeys: [String]
    private let base: Record?
    private let failure: String?
    private let sentinels: ProbeRecorder
    private let boolProbes: [(path: String, record: Record)]
    /// Names found so far, under `namesLock` (key paths are not `Sendable`, so no `Mutex`).
    private var names: [AnyKeyPath: String] = [:]
    private let namesLock = NSLock()

    /// The probe of `Record`, made once per type.
    static var shared: FieldProbe {
        let key = ObjectIdentifier(Record.self)
        if let probe = probeCache.withLock({ $0[key] }) { return probe as! FieldProbe }
        let probe = FieldProbe()
        return probeCache.withLock { cache in
            if let existing = cache[key] { return existing as! FieldProbe }
            cache[key] = probe
            return probe
        }
    }

    private init() {
        let recorder = ProbeRecorder(trueBool: nil)
        do {
            base = try Record(from: ProbeDecoder(recorder: recorder, codingPath: []))
            failure = nil
        } catch {
            base = nil
            failure = "\(error)"
        }
        sentinels = recorder
        topLevelKeys = recorder.topLevelKeys
        boolProbes = recorder.boolPaths.compactMap { path in
            let probe = ProbeRecorder(trueBool: path)
            return (try? Record(from: ProbeDecoder(recorder: probe, codingPath: []))).map { (path, $0) }
        }
    }

    /// The field path (`title`, `meta.by`) that `keyPath` reads.
    func name(of keyPath: PartialKeyPath<Record>) throws -> String {
        if let name = Record.fieldNames[keyPath] { return name }
        if let name = namesLock.withLock({ names[keyPath] }) { return name }
        guard let base else {
            throw FolioError.unknownField(
                "FolioKit cannot probe the fields of \(Record.self) (\(failure ?? "")); name \(keyPath) in \(Record.self).fieldNames"
            )
        }
        let value = unwrapped(base[keyPath: keyPath])
        var name: String?
        if value is Bool {
            name = boolProbes.first { unwrapped($0.record[keyPath: keyPath]) as? Bool == true }?.path
        } else if let value {
            name = sentinels.path(of: value)
        }
        guard let name else {
            throw FolioError.unknownField(
                "FolioKit cannot tell which field of \(Record.self) \(keyPath) reads; name it in \(Record.self).fieldNames"
            )
        }
        namesLock.withLock { names[keyPath] = name }
        return name
    }
}

private let probeCache = Mutex<[ObjectIdentifier: any Sendable]>([:])

/// The value inside any number of Optionals, or nil.
private func unwrapped(_ value: Any) -> Any? {
    let mirror = Mirror(reflecting: value)
    guard mirror.displayStyle == .optional else { return value }
    guard let child = mirror.children.first else { return nil }
    return unwrapped(child.value)
}

/// The sentinels of one probe decode, and which field path each went to.
private final class ProbeRecorder {
    let trueBool: String?
    var counter = 0
    var strings: [String: String] = [:]
    var integers: [Int64: String] = [:]
    var doubles: [Double: String] = [:]
    var boolPaths: [String] = []
    var topLevelKeys: [String] = []

    init(trueBool: String?) { self.trueBool = trueBool }

    private func next() -> Int {
        counter += 1
        return counter
    }

    func string(_ path: String) -> String {
        let sentinel = "folio-probe-\(next())"
        strings[sentinel] = path
        return sentinel
    }

    func integer<T: FixedWidthInteger>(_ path: String) -> T {
        let value = next()
        integers[Int64(value)] = path
        return T(truncatingIfNeeded: value)
    }

    func double(_ path: String) -> Double {
        let value = Double(next()) + 0.5
        doubles[value] = path
        return value
    }

    func date(_ path: String) -> Date {
        let interval = Double(next()) * 1000 + 0.25
        doubles[interval] = path
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    func bool(_ path: String) -> Bool {
        if trueBool == nil { boolPaths.append(path) }
        return path == trueBool
    }

    func path(of value: Any) -> String? {
        switch value {
        case let string as String: return strings[string]
        case let special as any ProbeValue: return strings[special.probeSentinel]
        case let date as Date: return doubles[date.timeIntervalSinceReferenceDate]
        case let url as URL: return strings[url.absoluteString]
        case let double as Double: return doubles[double]
        case let float as Float: return doubles[Double(float)]
        case let integer as any BinaryInteger: return Int64(exactly: integer).flatMap { integers[$0] }
        case let array as [Any]: return array.first.flatMap(unwrapped).flatMap(path(of:))
        default: return nil
        }
    }
}

private func joined(_ codingPath: [any CodingKey]) -> String {
    codingPath.filter { $0.intValue == nil }.map(\.stringValue).joined(separator: ".")
}

/// Makes a value of `T` at `codingPath` with fresh sentinels.
private func probeValue<T: Decodable>(_ type: T.Type, _ recorder: ProbeRecorder, _ codingPath: [any CodingKey]) throws
    -> T
{
    let path = joined(codingPath)
    if T.self == Date.self { return recorder.date(path) as! T }
    if T.self == URL.self { return URL(string: "https://probe.invalid/" + recorder.string(path))! as! T }
    if let special = T.self as? any ProbeValue.Type { return special.probe(recorder.string(path)) as! T }
    do {
        return try T(from: ProbeDecoder(recorder: recorder, codingPath: codingPath))
    } catch {
        // An enum whose raw value the sentinel is not: any case will do (the field cannot be named).
        if let cases = T.self as? any CaseIterable.Type, let first = firstCase(of: cases) as? T { return first }
        throw error
    }
}

private func firstCase<C: CaseIterable>(of type: C.Type) -> Any? { C.allCases.first }

private struct ProbeDecoder: Decoder {
    let recorder: ProbeRecorder
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ProbeKeyed<Key>(recorder: recorder, codingPath: codingPath))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        ProbeUnkeyed(recorder: recorder, codingPath: codingPath)
    }
    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        ProbeSingle(recorder: recorder, codingPath: codingPath)
    }
}

private struct ProbeKeyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let recorder: ProbeRecorder
    let codingPath: [any CodingKey]
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }
    func decodeNil(forKey key: Key) throws -> Bool { false }

    private func single(_ key: Key) -> ProbeSingle {
        if codingPath.isEmpty { recorder.topLevelKeys.append(key.stringValue) }
        return ProbeSingle(recorder: recorder, codingPath: codingPath + [key])
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { single(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { single(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { single(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { single(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { single(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { single(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { single(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { single(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { single(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { single(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { single(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { single(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { single(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { single(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try single(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        KeyedDecodingContainer(ProbeKeyed<NestedKey>(recorder: recorder, codingPath: single(key).codingPath))
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        ProbeUnkeyed(recorder: recorder, codingPath: single(key).codingPath)
    }
    func superDecoder() throws -> any Decoder { ProbeDecoder(recorder: recorder, codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        ProbeDecoder(recorder: recorder, codingPath: codingPath + [key])
    }
}

/// An array of one element, whose sentinel stands for the array's own path (paths pass through
/// arrays, PROTOCOL.md §4).
private struct ProbeUnkeyed: UnkeyedDecodingContainer {
    let recorder: ProbeRecorder
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(recorder: ProbeRecorder, codingPath: [any CodingKey]) {
        self.recorder = recorder
        self.codingPath = codingPath
    }

    var count: Int? { 1 }
    var isAtEnd: Bool { currentIndex >= 1 }

    private mutating func single() -> ProbeSingle {
        currentIndex += 1
        return ProbeSingle(recorder: recorder, codingPath: codingPath)
    }

    mutating func decodeNil() throws -> Bool { false }
    mutating func decode(_ type: Bool.Type) throws -> Bool { single().decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { single().decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { single().decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { single().decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try single().decode(type) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<
        NestedKey
    > {
        currentIndex += 1
        return KeyedDecodingContainer(ProbeKeyed<NestedKey>(recorder: recorder, codingPath: codingPath))
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        currentIndex += 1
        return ProbeUnkeyed(recorder: recorder, codingPath: codingPath)
    }
    mutating func superDecoder() throws -> any Decoder {
        currentIndex += 1
        return ProbeDecoder(recorder: recorder, codingPath: codingPath)
    }
}

private struct ProbeSingle: SingleValueDecodingContainer {
    let recorder: ProbeRecorder
    let codingPath: [any CodingKey]
    private var path: String { joined(codingPath) }

    func decodeNil() -> Bool { false }
    func decode(_ type: Bool.Type) -> Bool { recorder.bool(path) }
    func decode(_ type: String.Type) -> String { recorder.string(path) }
    func decode(_ type: Double.Type) -> Double { recorder.double(path) }
    func decode(_ type: Float.Type) -> Float { Float(recorder.double(path)) }
    func decode(_ type: Int.Type) -> Int { recorder.integer(path) }
    func decode(_ type: Int8.Type) -> Int8 { recorder.integer(path) }
    func decode(_ type: Int16.Type) -> Int16 { recorder.integer(path) }
    func decode(_ type: Int32.Type) -> Int32 { recorder.integer(path) }
    func decode(_ type: Int64.Type) -> Int64 { recorder.integer(path) }
    func decode(_ type: UInt.Type) -> UInt { recorder.integer(path) }
    func decode(_ type: UInt8.Type) -> UInt8 { recorder.integer(path) }
    func decode(_ type: UInt16.Type) -> UInt16 { recorder.integer(path) }
    func decode(_ type: UInt32.Type) -> UInt32 { recorder.integer(path) }
    func decode(_ type: UInt64.Type) -> UInt64 { recorder.integer(path) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try probeValue(type, recorder, codingPath) }
}
