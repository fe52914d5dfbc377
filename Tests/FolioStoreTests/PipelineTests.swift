import Foundation
import Glibc
import Synchronization
import Testing

@testable import FolioStore

/// `runPipelined`, the two stages of rebuild, verify and import.
@Suite struct PipelineTests {
    /// 0, 1, 2, … one a call, from any thread.
    final class Counter: Sendable {
        private let value = Mutex(0)

        func next() -> Int {
            value.withLock { value in
                defer { value += 1 }
                return value
            }
        }
    }

    /// Which thread freed each batch.
    final class Frees: Sendable {
        let threads = Mutex<[Int: pthread_t]>([:])
    }

    /// A batch that records which thread let go of it last.
    final class Batch: Sendable {
        let number: Int
        let frees: Frees

        init(number: Int, frees: Frees) {
            self.number = number
            self.frees = frees
        }

        deinit {
            let number = number
            frees.threads.withLock { $0[number] = pthread_self() }
        }
    }

    @Test func batchesArriveInOrderAndTheProducerFreesThem() throws {
        let count = 40
        let frees = Frees()
        let counter = Counter()
        var consumed: [Int] = []
        try runPipelined(
            produce: { () -> Batch? in
                let number = counter.next()
                return number < count ? Batch(number: number, frees: frees) : nil
            },
            consume: { batch in consumed.append(batch.number) })
        #expect(consumed == Array(0..<count))
        let freed = frees.threads.withLock { $0 }
        #expect(freed.count == count)
        // The producer is at most two batches ahead (the depth) and frees what was consumed each
        // time it hands one over: only the last three can be left to the consuming thread.
        let consumer = pthread_self()
        let byProducer = freed.values.filter { pthread_equal($0, consumer) == 0 }.count
        #expect(byProducer >= count - 3, "freed by the producer: \(byProducer) of \(count)")
    }

    struct Stop: Error, Equatable { let stage: String }

    @Test func eitherStagesErrorStopsBothAndIsRethrown() throws {
        let frees = Frees()
        let counter = Counter()
        #expect(throws: Stop(stage: "produce")) {
            try runPipelined(
                produce: { () throws -> Batch? in
                    let number = counter.next()
                    if number == 5 { throw Stop(stage: "produce") }
                    return Batch(number: number, frees: frees)
                },
                consume: { _ in })
        }
        var consumed = 0
        #expect(throws: Stop(stage: "consume")) {
            try runPipelined(
                produce: { () -> Batch? in
                    let number = counter.next()
                    return Batch(number: number, frees: frees)
                },
                consume: { _ in
                    consumed += 1
                    if consumed == 3 { throw Stop(stage: "consume") }
                })
        }
        #expect(consumed == 3)
    }
}
