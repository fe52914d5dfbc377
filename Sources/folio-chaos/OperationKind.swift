import FolioHarness

/// The kinds of request the workload mixes, with their weights. A new kind is one more entry.
struct OperationKind: Sendable {
    let name: String
    let weight: Int
    /// A request of this kind for the client, or nil when the client has nothing it applies to.
    let make: @Sendable (inout SplitMix64, ClientLedger) -> (any WorkloadOperation)?

    static let all: [OperationKind] = [
        OperationKind(name: "create with id", weight: 16) { random, ledger in
            let collection = DataGenerator.collections.randomElement(using: &random)!
            // Now and then an id the client deleted: its versions go on.
            let deleted = ledger.keys(in: collection).filter { ledger.known($0)?.isPresent == false }
            let key =
                !deleted.isEmpty && Int.random(in: 0..<3, using: &random) == 0
                ? deleted.randomElement(using: &random)! : ObjectKey(collection: collection, id: ledger.nextName("k"))
            ledger.track(key)
            let nonce = ledger.nextName("w")
            return CreateOperation(
                collection: collection, id: key.id,
                data: DataGenerator.data(nonce: nonce, collection: collection, &random), nonce: nonce)
        },
        OperationKind(name: "create", weight: 8) { random, ledger in
            let collection = DataGenerator.collections.randomElement(using: &random)!
            let nonce = ledger.nextName("w")
            return CreateOperation(
                collection: collection, id: nil,
                data: DataGenerator.data(nonce: nonce, collection: collection, &random), nonce: nonce)
        },
        OperationKind(name: "update", weight: 26) { random, ledger in
            guard let key = pick(&random, ledger, present: true) else { return nil }
            let nonce = ledger.nextName("w")
            let patch = DataGenerator.patch(nonce: nonce, collection: key.collection, &random)
            // One in three with field operations too.
            let ops = Int.random(in: 0..<3, using: &random) == 0 ? DataGenerator.fieldOps(besides: patch, &random) : nil
            return UpdateOperation(key: key, patch: patch, ops: ops, ifVersion: nil, nonce: nonce)
        },
        OperationKind(name: "update ifVersion", weight: 16) { random, ledger in
            guard let key = pick(&random, ledger, present: true), let version = ledger.known(key)?.version else {
                return nil
            }
            let nonce = ledger.nextName("w")
            // One in five is stale, and must be refused.
            let expected = Int.random(in: 0..<5, using: &random) == 0 ? max(1, version - 1) : version
            return UpdateOperation(
                key: key, patch: DataGenerator.patch(nonce: nonce, collection: key.collection, &random),
                ifVersion: expected, nonce: nonce)
        },
        OperationKind(name: "update of a missing object", weight: 1) { random, ledger in
            guard let key = pick(&random, ledger, present: false) else { return nil }
            let nonce = ledger.nextName("w")
            return UpdateOperation(key: key, patch: ["w": .string(nonce)], ifVersion: nil, nonce: nonce)
        },
        OperationKind(name: "delete", weight: 7) { random, ledger in
            pick(&random, ledger, present: true).map { DeleteOperation(key: $0, ifVersion: nil) }
        },
        OperationKind(name: "delete ifVersion", weight: 4) { random, ledger in
            guard let key = pick(&random, ledger, present: true), let version = ledger.known(key)?.version else {
                return nil
            }
            return DeleteOperation(
                key: key, ifVersion: Int.random(in: 0..<4, using: &random) == 0 ? version + 1 : version)
        },
        OperationKind(name: "view.define", weight: 2) { random, ledger in
            let live = ledger.viewNames.filter { ledger.views[$0]?.single != .absent }
            guard live.count < 2 else { return nil }
            let dropped = ledger.viewNames.filter { ledger.views[$0]?.single == .absent }
            let name =
                !dropped.isEmpty && Bool.random(using: &random)
                ? dropped.randomElement(using: &random)! : ledger.nextName("v")
            ledger.trackView(name)
            return ViewDefineOperation(definition: DataGenerator.view(name: name, &random))
        },
        OperationKind(name: "view.drop", weight: 1) { random, ledger in
            // Now and then a view that is not there, which must be refused.
            guard let name = ledger.viewNames.randomElement(using: &random) else { return nil }
            return ViewDropOperation(name: name)
        },
        // Writes the model works out in full: folders, docs, notes and pins with delete rules,
        // counters and tasks; half of them with a request key.
        OperationKind(name: "write with rules", weight: 14) { random, ledger in
            ModelWriteGenerator.write(&random, ledger, form: .single, keyed: Bool.random(using: &random))
        },
        OperationKind(name: "atomic batch", weight: 9) { random, ledger in
            ModelWriteGenerator.write(
                &random, ledger, form: .batch(atomic: true), keyed: Int.random(in: 0..<5, using: &random) < 2)
        },
        OperationKind(name: "batch atomic false", weight: 4) { random, ledger in
            ModelWriteGenerator.write(
                &random, ledger, form: .batch(atomic: false), keyed: Int.random(in: 0..<5, using: &random) < 2)
        },
        OperationKind(name: "retry", weight: 5) { random, ledger in
            ledger.requestKeys.suffix(100).randomElement(using: &random).flatMap { RetryOperation.retry($0, ledger) }
        },
        OperationKind(name: "request key reused", weight: 1) { random, ledger in
            let applied = ledger.requestKeys.suffix(100).filter { ledger.keyedRequests[$0]!.isApplied }
            guard let key = applied.randomElement(using: &random), let entry = ledger.keyedRequests[key],
                let write = ModelWriteGenerator.write(&random, ledger, form: .single, keyed: false)
            else { return nil }
            // The same request again (a delete without ifVersion of the same object) is a retry,
            // which foliod rightly answers as a replay: not a reuse.
            let reuse = RetryOperation.reuse(key, for: write)
            guard reuse.request != ModelWrite.request(entry.commands, form: entry.form, requestKey: key) else {
                return nil
            }
            return reuse
        },
    ]

    private static let totalWeight = all.reduce(0) { $0 + $1.weight }

    /// The next request for `ledger`'s client.
    static func next(_ random: inout SplitMix64, _ ledger: ClientLedger) -> any WorkloadOperation {
        // A write whose answer the last kill took, retried first in half the cases.
        if let key = ledger.lostAnswers.popLast(), Bool.random(using: &random),
            let retry = RetryOperation.retry(key, ledger)
        {
            return retry
        }
        while true {
            var draw = Int.random(in: 0..<totalWeight, using: &random)
            for kind in all {
                draw -= kind.weight
                if draw < 0 {
                    if let operation = kind.make(&random, ledger) { return operation }
                    break
                }
            }
        }
    }

    /// One of the client's objects whose single expected state is present (or absent).
    private static func pick(_ random: inout SplitMix64, _ ledger: ClientLedger, present: Bool) -> ObjectKey? {
        // Recent objects are picked more often, so that objects collect versions.
        let candidates = DataGenerator.collections.flatMap { ledger.keys(in: $0).suffix(100) }.filter {
            ledger.known($0)?.isPresent == present
        }
        return candidates.randomElement(using: &random)
    }
}
