/// Speaks Redis's RESP over a raw socket: `SET key payload` and `GET key`, plus the few commands
/// the report needs (`CONFIG GET`, `INFO`).
final class RESPClient: LoadClient {
    /// A reply; bulk strings keep their bytes only when asked, so the load path does not copy them.
    enum Value {
        case status
        case error(String)
        case integer(Int)
        case bulk([UInt8])
        case null
        case array([Value])
    }

    private static let setHead = Array("*3\r\n$3\r\nSET\r\n".utf8)
    private static let getHead = Array("*2\r\n$3\r\nGET\r\n".utf8)

    private let stream: SocketStream
    private var output: [UInt8] = []

    init(path: String) throws {
        stream = try SocketStream(path: path)
        output.reserveCapacity(64 << 10)
    }

    func send(_ operations: [Operation]) throws {
        output.removeAll(keepingCapacity: true)
        for operation in operations {
            switch operation.kind {
            case .create, .createNamed, .update:
                output.append(contentsOf: Self.setHead)
                appendKey(operation.key)
                appendBulk(Payload.bytes)
            case .get:
                output.append(contentsOf: Self.getHead)
                appendKey(operation.key)
            case .createBatch:
                throw BenchError.setup("no Redis peer for an atomic batch of creates: run it against foliod only")
            }
        }
        try stream.send(output)
    }

    func receive() throws -> Reply {
        switch try readValue(keepingBulk: false) {
        case .status, .bulk, .integer: return .success
        case .error(let message): return .failure(message)
        case .null: return .failure("nil reply (the key does not exist)")
        case .array: return .failure("unexpected array reply")
        }
    }

    func describeServer() throws -> String {
        let info = try String(decoding: bulkBytes(command(["INFO", "server"])), as: UTF8.self)
        let version =
            info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("redis_version:") }?.dropFirst(14) ?? "?"
        let settings = try ["appendonly", "appendfsync", "save"].map { name in
            guard case .array(let pair) = try command(["CONFIG", "GET", name]), pair.count == 2 else {
                throw BenchError.protocolViolation("CONFIG GET \(name)")
            }
            return "\(name) '\(String(decoding: try bulkBytes(pair[1]), as: UTF8.self))'"
        }
        return "redis-server \(version), " + settings.joined(separator: ", ")
    }

    /// Sends one command and returns its reply, bulk bytes kept.
    func command(_ words: [String]) throws -> Value {
        try pipeline([words])[0]
    }

    /// Sends the commands at once, then reads their replies in order (bulk bytes kept).
    func pipeline(_ commands: [[String]]) throws -> [Value] {
        output.removeAll(keepingCapacity: true)
        for words in commands {
            output.append(UInt8(ascii: "*"))
            output.appendDecimal(words.count)
            output.append(contentsOf: [0x0D, 0x0A])
            for word in words { appendBulk(Array(word.utf8)) }
        }
        try stream.send(output)
        return try commands.map { _ in try readValue(keepingBulk: true) }
    }

    private func bulkBytes(_ value: Value) throws -> [UInt8] {
        guard case .bulk(let bytes) = value else {
            throw BenchError.protocolViolation("expected a bulk string, got \(value)")
        }
        return bytes
    }

    private func appendBulk(_ bytes: some Collection<UInt8>) {
        output.append(UInt8(ascii: "$"))
        output.appendDecimal(bytes.count)
        output.append(contentsOf: [0x0D, 0x0A])
        output.append(contentsOf: bytes)
        output.append(contentsOf: [0x0D, 0x0A])
    }

    private func appendKey(_ key: Key) {
        output.append(UInt8(ascii: "$"))
        output.appendDecimal(key.byteCount)
        output.append(contentsOf: [0x0D, 0x0A])
        key.append(to: &output)
        output.append(contentsOf: [0x0D, 0x0A])
    }

    private func readValue(keepingBulk: Bool) throws -> Value {
        enum Header {
            case value(Value)
            case bulk(Int)
            case array(Int)
        }
        let header: Header = try stream.withLine { line in
            guard let type = line.first else { throw BenchError.protocolViolation("an empty RESP line") }
            let rest = UnsafeRawBufferPointer(rebasing: line.dropFirst())
            switch type {
            case UInt8(ascii: "+"): return .value(.status)
            case UInt8(ascii: "-"): return .value(.error(String(decoding: rest, as: UTF8.self)))
            case UInt8(ascii: ":"): return .value(.integer(try Self.integer(rest)))
            case UInt8(ascii: "$"):
                let count = try Self.integer(rest)
                return count < 0 ? .value(.null) : .bulk(count)
            case UInt8(ascii: "*"):
                let count = try Self.integer(rest)
                return count < 0 ? .value(.null) : .array(count)
            default: throw BenchError.protocolViolation("RESP line \(String(decoding: line, as: UTF8.self))")
            }
        }
        switch header {
        case .value(let value): return value
        case .bulk(let count):
            return try stream.withBytes(count: count + 2) { bytes in
                .bulk(keepingBulk ? Array(bytes.prefix(count)) : [])
            }
        case .array(let count):
            return .array(try (0..<count).map { _ in try readValue(keepingBulk: keepingBulk) })
        }
    }

    private static func integer(_ digits: UnsafeRawBufferPointer) throws -> Int {
        guard let value = Int(String(decoding: digits, as: UTF8.self)) else {
            throw BenchError.protocolViolation("a RESP length or integer: \(String(decoding: digits, as: UTF8.self))")
        }
        return value
    }
}
