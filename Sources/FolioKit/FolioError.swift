import FolioJSON

/// What a FolioKit call throws: the server's error codes (PROTOCOL.md §3), and the client's own
/// failures (connection, encoding, decoding).
///
/// ```swift
/// do { try await item.save(on: folio) }
/// catch FolioError.conflict(let current) { ... }   // someone else saved first
/// catch FolioError.notFound { ... }
/// ```
public enum FolioError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `not_found`: the object, view, file or watch does not exist.
    case notFound
    /// `conflict`: a precondition failed and nothing changed. `current` is the object's version
    /// when an `ifVersion` did not match; nil for the other conflicts (an id that exists, a unique
    /// view's key, a request key used for another request).
    case conflict(current: Int?)
    /// `bad_request`, with the server's message.
    case badRequest(String)
    /// `forbidden`: the peer's role does not allow the op.
    case forbidden(String)
    /// `unavailable`: the write was not stored (a full disk, a failed commit) or the server is
    /// refusing clients; retrying later may succeed.
    case unavailable(String)
    /// `too_large`: a request line beyond the server's `maxLine`.
    case tooLarge(String)
    /// `lagging`: a watch fell behind and ended after `lastSeq`.
    case lagging(lastSeq: Int)
    /// `internal`: a fault in the server or its storage.
    case serverFault(String)
    /// A code this version of FolioKit does not know (`unknown_op` among them).
    case server(code: String, message: String)
    /// No daemon answers on the socket (and none came back within the reconnect timeout).
    case cannotConnect(path: String, reason: String)
    /// The connection dropped before the answer arrived, and the request could not be sent again.
    case connectionLost(String)
    /// The connection was closed with `Folio.close()`.
    case closed
    /// A value could not be turned into Folio data (a NaN, a record without a collection name...).
    case encoding(String)
    /// The server's answer does not fit the record type.
    case decoding(String)
    /// A record operation needs an `id` (get, delete) and the value has none.
    case missingID
    /// A key path FolioKit cannot name: give the type a `fieldNames` entry for it.
    case unknownField(String)

    public var description: String {
        switch self {
        case .notFound: return "not found"
        case .conflict(let current?): return "conflict: the object is at version \(current)"
        case .conflict(nil): return "conflict"
        case .badRequest(let message): return "bad request: \(message)"
        case .forbidden(let message): return "forbidden: \(message)"
        case .unavailable(let message): return "unavailable: \(message)"
        case .tooLarge(let message): return "too large: \(message)"
        case .lagging(let lastSeq): return "lagging: the watch ended after seq \(lastSeq)"
        case .serverFault(let message): return "internal server error: \(message)"
        case .server(let code, let message): return "\(code): \(message)"
        case .cannotConnect(let path, let reason): return "cannot connect to foliod at \(path): \(reason)"
        case .connectionLost(let reason): return "connection to foliod lost: \(reason)"
        case .closed: return "the Folio connection was closed"
        case .encoding(let message): return "cannot encode: \(message)"
        case .decoding(let message): return "cannot decode: \(message)"
        case .missingID: return "the record has no id"
        case .unknownField(let message): return message
        }
    }

    /// The error an `ok: false` answer carries.
    init(serverError error: JSONObject) {
        let code = error["code"]?.stringValue ?? "internal"
        let message = error["message"]?.stringValue ?? ""
        switch code {
        case "not_found": self = .notFound
        case "conflict": self = .conflict(current: error["currentVersion"]?.integerValue.map { Int($0) })
        case "bad_request": self = .badRequest(message)
        case "forbidden": self = .forbidden(message)
        case "unavailable": self = .unavailable(message)
        case "too_large": self = .tooLarge(message)
        case "lagging": self = .lagging(lastSeq: Int(error["lastSeq"]?.integerValue ?? 0))
        case "internal": self = .serverFault(message)
        default: self = .server(code: code, message: message)
        }
    }
}
