import FolioJSON
import FolioModel
import LMDB

/// Why a store operation failed. Command errors map one to one onto protocol error codes.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// The command is malformed (`bad_request`).
    case invalid(String)
    /// The object does not exist (`not_found`).
    case notFound(collection: String, id: String)
    /// The view does not exist (`not_found`).
    case viewNotFound(String)
    /// The collection has no schema (`not_found`).
    case schemaNotFound(String)
    /// Objects of the collection do not fit the schema being defined (`bad_request`): how many,
    /// and the first 20 with the reason.
    case schemaViolations(collection: String, count: Int, [SchemaViolation])
    /// Op `index` of an atomic batch failed, so nothing was stored (the op's own code).
    indirect case batchFailed(index: Int, StoreError)
    /// An error recorded in the log: a failed op of a batch retried with its request key.
    case recorded(code: String, message: String)
    /// A version check or a uniqueness rule failed (`conflict`).
    case conflict(Conflict)
    /// Stored bytes are not what the store wrote: a damaged environment (`internal`).
    case corrupted(String)
    /// The data directory is in use or of another format.
    case unusable(String)

    public var description: String {
        switch self {
        case .invalid(let message): return message
        case .notFound(let collection, let id): return "\(collection)/\(id) not found"
        case .viewNotFound(let name): return "view \(Names.quoted(name)) not found"
        case .schemaNotFound(let collection): return "\(collection) has no schema"
        case .schemaViolations(let collection, let count, let violations):
            let shown = violations.map { "\($0.id): \($0.reason)" }.joined(separator: "; ")
            return "cannot define the schema of \(collection): \(count) object(s) do not fit it: \(shown)\(count > violations.count ? "; …" : "")"
        case .batchFailed(let index, let error): return "op \(index): \(error.description)"
        case .recorded(_, let message): return message
        case .conflict(let conflict): return conflict.message
        case .corrupted(let message): return "store corrupted: \(message)"
        case .unusable(let message): return message
        }
    }
}

/// The details a `conflict` answer carries.
public struct Conflict: Equatable, Sendable {
    public enum Reason: Equatable, Sendable {
        /// `ifVersion` did not match; `current` is the object's version.
        case version(expected: UInt64, current: UInt64)
        /// A client-chosen id is taken.
        case exists
        /// A unique view already holds an object with the same sort key.
        case unique(view: String, key: JSON, existingID: String)
        /// A view of that name exists.
        case viewExists
        /// A unique view cannot be defined over data with duplicates.
        case duplicates(view: String, groups: [[String]])
        /// A request key was used for another request.
        case requestKeyReused(key: String)
        /// Objects refer to the one to delete from fields whose rule is `deny`.
        case denied(referrers: [String])
    }

    public var reason: Reason
    public var message: String

    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }
}

extension StoreError {
    init(_ error: ValidationError) { self = .invalid(error.message) }
}

extension StoreError {
    /// The protocol's name for the error's kind, as the log records a failed op of a batch.
    public var code: String {
        switch self {
        case .invalid, .schemaViolations: return "bad_request"
        case .notFound, .viewNotFound, .schemaNotFound: return "not_found"
        case .conflict: return "conflict"
        case .corrupted: return "internal"
        case .unusable: return "unavailable"
        case .batchFailed(_, let error): return error.code
        case .recorded(let code, _): return code
        }
    }
}

/// An object that does not fit a schema being defined, and why.
public struct SchemaViolation: Equatable, Sendable {
    public let id: String
    public let reason: String
}
