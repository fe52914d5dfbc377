import FolioJSON
import Foundation
import Testing

@testable import FolioKit

extension Tag {
    /// Tests of live queries against the real foliod (`swift test --filter .tags:live`).
    @Tag static var live: Self
}

@Suite("FolioKit live queries")
struct LiveQueryTests {
    /// The window rules of the protocol note, without a server.
    @Test func windowAppliesChangesAsSpecified() throws {
        func object(_ id: String, _ title: String) -> JSON {
            .object(["collection": "TodoListItem", "id": .string(id), "version": 1, "title": .string(title)])
        }
        var window = LiveWindow<TodoListItem>()
        try window.replace(with: ["a", "b", "c", "d", "e"].map { object($0, $0) }, total: 5)
        // Remove c (2), move e (4) to the front, insert x at 2 of the new window, update b.
        let change: JSONObject = [
            "seq": 9,
            "removed": [.object(["index": 2, "id": "c"])],
            "inserted": [.object(["index": 2, "object": object("x", "x")])],
            "updated": [.object(["index": 3, "object": object("b", "b2")])],
            "moved": [.object(["from": 4, "to": 0, "id": "e"])],
            "total": 6,
        ]
        let applied = try window.apply(change)
        #expect(window.ids == ["e", "a", "x", "b", "d"])
        #expect(window.records[3].title == "b2")
        #expect(window.total == 6)
        #expect(applied.moved == [LiveChange.Move(from: 4, to: 0, id: "e")])
        #expect(throws: FolioError.self) {
            try window.apply([
                "removed": [.object(["index": 9, "id": "z"])], "inserted": [], "updated": [], "moved": [],
            ])
        }
    }

    /// After each write, the window equals the query run again (once the change has arrived).
    @Test(.tags(.live)) func windowFollowsEachCommit() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let query = Chore.query(\.done == false).sort(\.n).sort(\.title).limit(10)
            var random = SystemRandomNumberGenerator()
            var ids: [String] = []
            for index in 0..<15 { ids.append(try await Chore(title: "c\(index)", n: index % 6).save(on: folio).id!) }
            let live = query.live(on: folio).makeAsyncIterator()
            var snapshot = try #require(try await live.next())
            #expect(snapshot.change == nil)
            #expect(snapshot.items == (try await query.find(on: folio)))
            for step in 0..<60 {
                // With every chore deleted (a run of deletes can get there), the step creates one.
                let id = ids.randomElement(using: &random) ?? ""
                switch ids.isEmpty ? 0 : Int.random(in: 0..<4, using: &random) {
                case 0:
                    ids.append(
                        try await Chore(title: "new \(step)", n: Int.random(in: 0..<6, using: &random)).save(on: folio)
                            .id!)
                case 1:
                    try await Chore.delete(id, on: folio)
                    ids.removeAll { $0 == id }
                default:
                    var chore = try await Chore.get(id, on: folio)
                    chore.n = Int.random(in: 0..<6, using: &random)
                    chore.done = Bool.random(using: &random)
                    try await chore.save(on: folio)
                }
                let expected = try await query.find(on: folio)
                let total = try await query.count(on: folio)
                while snapshot.items != expected || snapshot.total != total {
                    snapshot = try #require(
                        try await withTimeout(closing: folio) { try await live.next() }, "step \(step)")
                    #expect(snapshot.items.count <= 10)
                }
            }
        }
    }

    /// Writers on other connections at once; the window ends equal to the query's answer.
    @Test(.tags(.live)) func windowUnderConcurrentWriters() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let query = Chore.query(.prefix(\.title, "w")).sort(\.n, descending: true).limit(20)
            let live = query.live(on: folio).makeAsyncIterator()
            var snapshot = try #require(try await live.next())
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        let own = try await Folio.connect(daemon.socketPath)
                        for step in 0..<50 {
                            var chore = try await Chore(title: "w\(writer)-\(step)", n: (step * 7 + writer) % 30).save(
                                on: own)
                            if step % 3 == 0 {
                                chore.n = 100 + step
                                try await chore.save(on: own)
                            }
                            if step % 5 == 0 { try await Chore.delete(chore.id!, on: own) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Changes that only move total may come after the window's last one.
            let expected = try await query.find(on: folio)
            let total = try await query.count(on: folio)
            while snapshot.items != expected || snapshot.total != total {
                snapshot = try #require(try await withTimeout(closing: folio) { try await live.next() })
                #expect(snapshot.items.count <= 20)
            }
        }
    }

    /// `for try await` from the main actor, with records that are not `Sendable` (a `Chore` is, but
    /// this is what an app writes).
    @MainActor @Test(.tags(.live)) func loopFromTheMainActor() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            for index in 0..<3 { try await TodoListItem(title: "t\(index)").save(on: folio) }
            let query = TodoListItem.query().sort(\.title, descending: true).limit(2)
            var snapshots = 0
            for try await snapshot in query.live(on: folio) {
                snapshots += 1
                if snapshots == 1 {
                    #expect(snapshot.items.map(\.title) == ["t2", "t1"])
                    #expect(snapshot.total == 3)
                    try await TodoListItem(title: "t9").save(on: folio)
                } else {
                    #expect(snapshot.items.map(\.title) == ["t9", "t2"])
                    #expect(snapshot.change?.inserted == [0])
                    #expect(snapshot.change?.removed.map(\.index) == [1])
                    break
                }
            }
        }
    }

    /// The daemon restarts under a live query, with writes meanwhile: it resumes where it stopped.
    @Test(.tags(.live)) func resumesAcrossARestart() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath, reconnectTimeout: .seconds(30))
            let query = TodoListItem.query().sort(\.title).limit(5)
            for index in 0..<3 { try await TodoListItem(title: "t\(index)").save(on: folio) }
            let live = query.live(on: folio).makeAsyncIterator()
            _ = try #require(try await live.next())
            daemon.stop()
            try daemon.start()
            let other = try await Folio.connect(daemon.socketPath)
            try await TodoListItem(title: "a first").save(on: other)
            let expected = try await query.find(on: other)
            var snapshot = try #require(try await withTimeout(closing: folio) { try await live.next() })
            while snapshot.items != expected {
                snapshot = try #require(try await withTimeout(closing: folio) { try await live.next() })
            }
            #expect(snapshot.items.first?.title == "a first")
        }
    }
}

/// `body`'s result; after `seconds`, closes `folio` so that whatever `body` waits for fails.
func withTimeout<T>(
    closing folio: Folio, seconds: Double = 10, isolation: isolated (any Actor)? = #isolation,
    _ body: () async throws -> T
) async throws -> T {
    let timer = Task {
        try await Task.sleep(for: .seconds(seconds))
        Issue.record("timed out after \(seconds) s")
        folio.close()
    }
    defer { timer.cancel() }
    return try await body()
}
