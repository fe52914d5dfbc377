/// The stable error codes of protocol v1.
public enum ErrorCode: String, Sendable, CaseIterable {
    /// The line is not a well-formed request: not JSON, not an object, a missing or mistyped field.
    case badRequest = "bad_request"
    case unknownOp = "unknown_op"
    /// The object (or view) does not exist, or no longer does.
    case notFound = "not_found"
    /// A version check or a uniqueness rule failed; nothing changed.
    case conflict
    /// The line is longer than the server's maximum.
    case tooLarge = "too_large"
    /// The server cannot take the request now (its storage is full); it may succeed later.
    case unavailable
    /// A fault in the server or its storage.
    case `internal`
    /// A watch fell too far behind and was ended; resume after `lastSeq`.
    case lagging
    /// The peer's role in the access policy does not allow the op on that collection.
    case forbidden
}

/// An error answer: code, message, and optional details (e.g. the current version of a conflict).
public struct ProtocolError: Error, Sendable {
    public var code: ErrorCode
    public var message: String
    /// Extra fields of the error object, serialized as `"key":value` pairs without braces.
    public var details: [(key: String, value: String)]

    public init(_ code: ErrorCode, _ message: String, details: [(key: String, value: String)] = []) {
        self.code = code
        self.message = message
        self.details = details
    }
}
