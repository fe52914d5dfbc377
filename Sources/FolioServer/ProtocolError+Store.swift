import FolioJSON
import FolioProtocol
import FolioStore
import LMDB

extension ProtocolError {
    /// The answer for a failed command or read.
    init(_ error: any Error) {
        switch error {
        case let error as StoreError: self.init(storeError: error)
        case let error as ProtocolError: self = error
        case let error as LMDBError where error.isOutOfSpace:
            self.init(.unavailable, "storage is full: \(error)")
        default: self.init(.internal, "\(error)")
        }
    }

    init(storeError error: StoreError) {
        func json(_ value: JSON) -> String { String(decoding: value.serialized(), as: UTF8.self) }
        switch error {
        case .invalid(let message): self.init(.badRequest, message)
        case .notFound, .viewNotFound, .schemaNotFound: self.init(.notFound, error.description)
        case .conflict(let conflict): self.init(.conflict, conflict.message, details: ProtocolError.details(of: conflict))
        case .corrupted: self.init(.internal, error.description)
        case .unusable(let message): self.init(.unavailable, message)
        case .schemaViolations(_, let count, let violations):
            self.init(
                .badRequest, error.description,
                details: [
                    ("violations", json(.array(violations.map { ["id": .string($0.id), "reason": .string($0.reason)] }))),
                    ("violationCount", String(count)),
                ])
        case .batchFailed(let index, let underlying):
            let inner = ProtocolError(storeError: underlying)
            self.init(inner.code, "op \(index): \(inner.message)", details: [("index", String(index))] + inner.details)
        case .recorded(let code, let message):
            self.init(ErrorCode(rawValue: code) ?? .internal, message)
        }
    }

    private static func details(of conflict: Conflict) -> [(key: String, value: String)] {
        func json(_ value: JSON) -> String { String(decoding: value.serialized(), as: UTF8.self) }
        switch conflict.reason {
        case .version(let expected, let current):
            return [("expectedVersion", String(expected)), ("currentVersion", String(current))]
        case .exists, .viewExists:
            return []
        case .unique(let view, let key, let existingID):
            return [("view", json(.string(view))), ("key", json(key)), ("existingId", json(.string(existingID)))]
        case .duplicates(let view, let groups):
            return [("view", json(.string(view))), ("duplicates", json(.array(groups.map { .array($0.map(JSON.string)) })))]
        case .requestKeyReused(let key):
            return [("requestKey", json(.string(key)))]
        case .denied(let referrers):
            return [("referrers", json(.array(referrers.map(JSON.string))))]
        }
    }
}
