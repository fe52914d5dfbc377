import Foundation
import Synchronization
import Testing

@testable import FolioServer

@Suite struct ThreadPoolTests {
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    final class Payload: Sendable {
        let freed: Counter
        init(_ freed: Counter) { self.freed = freed }
        deinit { freed.value.add(1, ordering: .relaxed) }
    }

    /// The pool kept every taken job (and what it captured: a long line's bytes, for the decoders)
    /// until its queue ran empty; under a steady stream of long lines it never did, and 20 clients
    /// leaving their writes behind held 1.3 GiB of line copies that had long been decoded.
    @Test func aFinishedJobReleasesWhatItCapturedWhileOthersWait() throws {
        let pool = ThreadPool<Void>(name: "test-pool", contexts: [()])
        defer { pool.stop() }
        let freed = Counter()
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        do {
            let payload = Payload(freed)
            pool.submit { _ in withExtendedLifetime(payload) {} }
        }
        // The second job holds the only thread, with a third one queued behind it.
        pool.submit { _ in
            started.signal()
            release.wait()
        }
        pool.submit { _ in }
        started.wait()
        #expect(freed.value.load(ordering: .relaxed) == 1, "the first job's capture is still held by the queue")
        release.signal()
    }
}
