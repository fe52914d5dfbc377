/// Short-lived connections, in the ways a client can come and go: connect and close at once; ask
/// `hello` and read the answer; send half a line and close; send a durable `create` and close
/// before its answer (foliod still applies the write, `PROTOCOL.md` §1).
enum ConnectionChurn {
    enum Shape: Int, CaseIterable {
        case bare
        case hello
        case partialLine
        case unansweredWrite
    }

    static let collection = "Churn"
    private static let hello = Array(#"{"op":"hello"}"#.utf8) + [0x0A]
    private static let partialLine = Array(#"{"op":"hel"#.utf8)
    private static let create = Array(#"{"op":"create","collection":"\#(collection)","data":{"n":1}}"#.utf8) + [0x0A]
    private static let success = Array(#"{"ok":true"#.utf8)

    /// The shape of the `serial`-th connection: each in turn.
    static func shape(_ serial: Int) -> Shape { Shape(rawValue: serial % Shape.allCases.count)! }

    /// Opens one connection of `shape` and closes it; throws when foliod refuses it or answers
    /// `hello` with anything but success.
    static func cycle(_ shape: Shape, socket: String) throws {
        let connection = try SocketStream(path: socket)
        switch shape {
        case .bare:
            break
        case .hello:
            try connection.send(Self.hello)
            let answer = try connection.withLine {
                $0.starts(with: Self.success) ? nil : String(decoding: $0, as: UTF8.self)
            }
            if let answer { throw BenchError.protocolViolation("hello answered \(answer)") }
        case .partialLine:
            try connection.send(Self.partialLine)
        case .unansweredWrite:
            try connection.send(Self.create)
        }
    }
}
