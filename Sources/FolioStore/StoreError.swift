import FolioJSON
import FolioModel
import Glibc
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
    /// No file has this name (`not_found`).
    case fileNotFound(String)
    /// No blob of this SHA-256 is stored (`not_found`).
    case blobNotFound(String)
    /// Objects of the collection do not fit the schema being defined (`bad_request`): how many,
    /// and the first 20 with the reason.
    case schemaViolations(collection: String, count: Int, [SchemaViolation])
    /// Op `index` of an atomic batch failed, so nothing was stored (the op's own code).
    indirect case batchFailed(index: Int, StoreError)
    /// An error recorded in the log: a failed op of a batch retried with its request key, with
    /// the details its answer carried.
    case recorded(code: String, message: String, details: JSONObject)
    /// A version check or a uniqueness rule failed (`conflict`).
    case conflict(Conflict)
    /// Stored bytes are not what the store wrote: a damaged environment (`internal`).
    case corrupted(String)
    /// The data directory is in use or of another format.
    case unusable(String)
    /// The query's view lists a collection its asker may not read (`forbidden`).
    case unreadable(collection: String, view: String)

    /// A system call on one of the store's files failed: `what` names the call and the file.
    static func io(_ what: String, _ code: Int32) -> StoreError {
        .unusable("\(what): \(String(cString: strerror(code)))")
    }

    public var description: String {
        switch self {
        case .invalid(let message): return message
        case .notFound(let collection, let id): return "\(collection)/\(id) not found"
        case .viewNotFound(let name): return "view \(Names.quoted(name)) not found"
        case .schemaNotFound(let collection): return "\(collection) has no schema"
        case .fileNotFound(let name): return "file \(Names.quoted(name)) not found"
        case .blobNotFound(let sha256): return "no content \(sha256) is stored"
        case .schemaViolations(let collection, let count, let violations):
            let shown = violations.map { "\($0.id): \($0.reason)" }.joined(separator: "; ")
            return
                "cannot define the schema of \(collection): \(count) object(s) do not fit it: \(shown)\(count > violations.count ? "; …" : "")"
        case .batchFailed(let index, let error): return "op \(index): \(error.description)"
        case .recorded(_, let message, _): return message
        case .conflict(let conflict): return conflict.message
        case .corrupted(let message): return "store corrupted: \(message)"
        case .unusable(let message): return message
        case .unreadable(let collection, let view):
            return "view \(Names.quoted(view)) lists collection \(collection), which this peer may not read"
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
        /// A file of that name exists, and the put did not ask to replace it.
        case fileExists
        /// A unique view cannot be defined over data with duplicates.
        case duplicates(view: String, groups: [[String]])
        /// A request key was used for another request.
        case requestKeyReused(key: String)
        /// Objects refer to the one to delete from fields whose rule is `deny`.
        case denied(referrers: [String])
        /// Records refer to the file to delete, and the delete did not force it: the first of
        /// them, and how many there are.
        case fileReferenced(referrers: [Referrer], count: Int)
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
        case .notFound, .viewNotFound, .schemaNotFound, .fileNotFound, .blobNotFound: return "not_found"
        case .conflict: return "conflict"
        case .corrupted: return "internal"
        case .unusable: return "unavailable"
        case .unreadable: return "forbidden"
        case .batchFailed(_, let error): return error.code
        case .recorded(let code, _, _): return code
        }
    }
}

extension StoreError {
    /// What an answer carries beside the code and the message (`expectedVersion`, `existingId`,
    /// `referrers`, ...), as the log also records it for a failed op of a batch with a request key.
    public var details: JSONObject {
        switch self {
        case .conflict(let conflict): return conflict.details
        case .schemaViolations(_, let count, let violations):
            return [
                "violations": .array(violations.map { ["id": .string($0.id), "reason": .string($0.reason)] }),
                "violationCount": .int(Int64(count)),
            ]
        case .batchFailed(let index, let underlying):
            var details: JSONObject = ["index": .int(Int64(index))]
            for field in underlying.details { details[field.key] = field.value }
            return details
        case .recorded(_, _, let details): return details
        case .invalid, .notFound, .viewNotFound, .schemaNotFound, .fileNotFound, .blobNotFound, .corrupted, .unusable:
            return [:]
        case .unreadable(let collection, _): return ["collection": .string(collection)]
        }
    }
}

extension Conflict {
    public var details: JSONObject {
        switch reason {
        case .version(let expected, let current):
            return ["expectedVersion": .int(Int64(expected)), "currentVersion": .int(Int64(current))]
        case .exists, .viewExists, .fileExists:
            return [:]
        case .unique(let view, let key, let existingID):
            return ["view": .string(view), "key": key, "existingId": .string(existingID)]
        case .duplicates(let view, let groups):
            return ["view": .string(view), "duplicates": .array(groups.map { .array($0.map(JSON.string)) })]
        case .requestKeyReused(let key):
            return ["requestKey": .string(key)]
        case .denied(let referrers):
            return ["referrers": .array(referrers.map(JSON.string))]
        case .fileReferenced(let referrers, let count):
            return ["referrers": .array(referrers.map(\.json)), "referrerCount": .int(Int64(count))]
        }
    }
}

/// An object that does not fit a schema being defined, and why.
public struct SchemaViolation: Equatable, Sendable {
    public let id: String
    public let reason: String
}
