/// Why a command, value or query is malformed; the message says what and where.
/// Always answered as the protocol's `bad_request`.
public struct ValidationError: Error, Equatable, CustomStringConvertible, Sendable {
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
