import FolioHarness
import Foundation
import Testing

@testable import FolioKit

@Suite("FolioKit reconnects")
struct ReconnectTests {
    @Test func aRestartedDaemonIsReconnected() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let saved = try await TodoListItem(title: "before").save(on: folio)
            daemon.stop()
            try daemon.start()
            // The first request finds the old connection dead when it writes: even a file.put, which
            // has no request key, is sent again, since foliod never saw it.
            #expect(try await folio.putFile(Data("x".utf8), name: "after-restart").size == 1)
            #expect(try await TodoListItem.get(saved.id!, on: folio) == saved)
            #expect(try await TodoListItem(title: "after").save(on: folio).version == 1)
        }
    }

    /// foliod killed with writes in flight: each is sent again with its request key after the
    /// restart, and the server runs it once (those it had committed are answered from the key).
    @Test func writesInFlightAreAppliedOnceAcrossAKill() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath, reconnectTimeout: .seconds(30))
            let count = 2000
            let answered = Counter()
            // The killer is a thread of its own, not a task: on a machine running the whole suite the
            // cooperative pool ran a killer task only after all 2,000 writes had been answered.
            let killed = Locked<Result<Int, any Error>?>(nil)
            let killer = Thread {
                while answered.value < 20 { usleep(200) }
                let before = answered.value
                daemon.killHard()
                let outcome = Result { try daemon.start() }.map { before }
                killed.withLock { $0 = outcome }
            }
            killer.start()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    group.addTask {
                        // A chosen id: a write run twice would be a conflict.
                        let saved = try await TodoListItem(id: "w\(index)", title: "write \(index)").save(on: folio)
                        #expect(saved.version == 1)
                        answered.add()
                    }
                }
                try await group.waitForAll()
            }
            while killed.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(10)) }
            let answeredBeforeKill = try killed.withLock { $0 }!.get()
            // The kill came with writes in flight.
            #expect(answeredBeforeKill < count)
            #expect(try await TodoListItem.query().count(on: folio) == count)
        }
    }

    @Test func connectFailsAtOnceWithoutADaemon() async throws {
        await #expect(throws: FolioError.self) { try await Folio.connect("/tmp/foliokit-no-such.sock") }
    }

    @Test func closeFailsLaterRequests() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            folio.close()
            await #expect(throws: FolioError.closed) { try await folio.hello() }
        }
    }
}

final class Counter: Sendable {
    private let count = Locked(0)
    var value: Int { count.withLock { $0 } }
    func add() { count.withLock { $0 += 1 } }
}
