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
