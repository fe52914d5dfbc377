import FolioJSON

/// Speaks foliod's JSON-lines protocol over a raw socket: `create` (with an id foliod assigns, or a
/// client-given one), `update`, an atomic `batch` of such creates, and `get` by id in the `Bench`
/// collection, without tags (answers come back in request order).
final class FolioLoadClient: LoadClient {
    static let collection = "Bench"

    private static let createHead = Array(#"{"op":"create","collection":"\#(collection)","data":"#.utf8)
    private static let createNamedHead = Array(#"{"op":"create","collection":"\#(collection)","id":""#.utf8)
    private static let createNamedData = Array(#"","data":"#.utf8)
    private static let createTail = Array("}".utf8) + [0x0A]
    private static let batchHead = Array(#"{"op":"batch","atomic":true,"ops":["#.utf8)
    private static let batchCreate =
        Array(#"{"op":"create","collection":"\#(collection)","data":"#.utf8) + Payload.bytes + Array("}".utf8)
    private static let batchTail = Array("]}".utf8) + [0x0A]
    private static let getHead = Array(#"{"op":"get","collection":"\#(collection)","id":""#.utf8)
    private static let getTail = Array(#""}"#.utf8) + [0x0A]
    private static let updateHead = Array(#"{"op":"update","collection":"\#(collection)","id":""#.utf8)
    private static let updateTail = Array(#"","patch":{"done":true}}"#.utf8) + [0x0A]
    /// An answer without a tag starts so when it succeeds.
    private static let successPrefix = Array(#"{"ok":true"#.utf8)

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
            case .get:
                output.append(contentsOf: Self.getHead)
                operation.key.append(to: &output)
                output.append(contentsOf: Self.getTail)
                continue
            case .update:
                output.append(contentsOf: Self.updateHead)
                operation.key.append(to: &output)
                output.append(contentsOf: Self.updateTail)
                continue
            case .createBatch:
                output.append(contentsOf: Self.batchHead)
                for index in 0..<Operation.batchSize {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    output.append(contentsOf: Self.batchCreate)
                }
                output.append(contentsOf: Self.batchTail)
                continue
            case .create:
                output.append(contentsOf: Self.createHead)
            case .createNamed:
                output.append(contentsOf: Self.createNamedHead)
                operation.key.append(to: &output)
                output.append(contentsOf: Self.createNamedData)
            }
            output.append(contentsOf: Payload.bytes)
            output.append(contentsOf: Self.createTail)
        }
        try stream.send(output)
    }

    func receive() throws -> Reply {
        try stream.withLine { line in
            if line.starts(with: Self.successPrefix) { return .success }
            return .failure(String(decoding: line, as: UTF8.self))
        }
    }

    func describeServer() throws -> String {
        try stream.send(Array(#"{"op":"hello"}"#.utf8) + [0x0A])
        let hello = try stream.withLine { line in try JSONParser.parse(line) }
        guard let result = hello.objectValue?["result"]?.objectValue else {
            throw BenchError.protocolViolation("hello answered \(hello)")
        }
        let version = result["version"]?.stringValue ?? "?"
        let durability = result["durability"]?.stringValue ?? "?"
        return "foliod \(version), durability \(durability)"
    }
}
