import FolioModel

extension Snapshot {
    /// The object as it was at `point`, folded from its own history (not from the whole log);
    /// nil if it did not exist then.
    public func object(_ collection: String, _ id: String, at point: PointInTime) throws -> StoredObject? {
        var object: StoredObject?
        let limit: UInt64
        if case .sequence(let sequence) = point { limit = sequence } else { limit = .max }
        for entry in try store.applier.history.entries(collection, id, through: limit, txn) {
            guard let event = try log.event(entry.sequence, txn) else {
                throw StoreError.corrupted("history names event \(entry.sequence), which the log lacks")
            }
            if case .instant(let instant) = point, event.timestamp.instant > instant { break }
            object = event.applied(to: object)
        }
        return object
    }
}
