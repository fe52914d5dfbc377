import FolioJSON
import FolioModel
import LMDB

extension StoreWriter {
    /// Runs the ops of a batch in order, each with the `{"$result": n}` of earlier ops resolved.
    /// Atomic: all of them or none (the first failure throws `batchFailed` with its index, and the
    /// caller's nested transaction takes back what the earlier ops did). Otherwise each op succeeds
    /// or fails on its own, in a nested transaction of its own.
    func executeBatch(
        _ operations: [BatchOperation], atomic: Bool, _ acceptance: Acceptance, ids: inout ObjectIDGenerator,
        _ txn: StoreTransaction
    ) throws -> WriteOutcome {
        var results: [(collection: String, id: String)?] = []
        var items: [WriteResult.BatchItem] = []
        var appended: [Applied] = []
        for (index, operation) in operations.enumerated() {
            do {
                let command: Command
                do { command = try operation.resolved(results) } catch { throw StoreError(error) }
                let made: [Applied]
                if atomic {
                    made = try executeObjectCommand(command, acceptance, ids: &ids, txn, isolated: true)
                } else {
                    made = try nested(in: txn) { child in
                        try executeObjectCommand(command, acceptance, ids: &ids, child, isolated: true)
                    }
                }
                appended += made
                results.append(made[0].event.object)
                items.append(.success(try Self.result(of: made[0])))
            } catch let error as StoreError {
                if atomic { throw StoreError.batchFailed(index: index, error) }
                results.append(nil)
                items.append(.failure(error))
            }
        }
        return WriteOutcome(appended: appended, result: .batch(items), replayed: false)
    }
}
