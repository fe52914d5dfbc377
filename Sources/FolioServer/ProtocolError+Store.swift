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
        let details = error.details.map { (key: $0.key, value: String(decoding: $0.value.serialized(), as: UTF8.self)) }
        switch error {
        case .invalid(let message): self.init(.badRequest, message)
        case .notFound, .viewNotFound, .schemaNotFound, .fileNotFound, .blobNotFound:
            self.init(.notFound, error.description)
        case .conflict(let conflict): self.init(.conflict, conflict.message, details: details)
        case .corrupted: self.init(.internal, error.description)
        case .unusable(let message): self.init(.unavailable, message)
        case .unreadable: self.init(.forbidden, error.description, details: details)
        case .schemaViolations: self.init(.badRequest, error.description, details: details)
        case .batchFailed(let index, let underlying):
            let inner = ProtocolError(storeError: underlying)
            self.init(inner.code, "op \(index): \(inner.message)", details: details)
        case .recorded(let code, let message, _):
            self.init(ErrorCode(rawValue: code) ?? .internal, message, details: details)
        }
    }
}
