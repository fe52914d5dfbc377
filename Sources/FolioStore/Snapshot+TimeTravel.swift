import FolioModel

extension Snapshot {
    /// The object as it was at `point`, nil if it did not exist then. O(log n) seeks and at most
    /// `HistoryIndex.checkpointInterval` events folded, however many versions the object has.
    public func object(_ collection: String, _ id: String, at point: PointInTime) throws -> StoredObject? {
        let sequence: UInt64
        switch point {
        case .sequence(let given): sequence = given
        case .instant(let instant): sequence = try lastSequence(atOrBefore: instant)
        }
        guard sequence > 0 else { return nil }
        return try store.applier.history.state(collection, id, through: sequence, log: log, txn)
    }

    /// The last event accepted at or before `instant`, 0 if none: a binary search of the log, whose
    /// timestamps never decrease (the writer makes them so, and import and replay refuse a log
    /// where they do), reading O(log n) event headers.
    public func lastSequence(atOrBefore instant: Instant) throws -> UInt64 {
        var low: UInt64 = 0
        var high = try head().sequence
        while low < high {
            let middle = low + (high - low + 1) / 2
            guard let record = try log.record(middle, txn) else {
                throw StoreError.corrupted("the log lacks event \(middle), below its head \(high)")
            }
            if try EventLog.timestamp(of: record, sequence: middle).instant <= instant {
                low = middle
            } else {
                high = middle - 1
            }
        }
        return low
    }
}
