import FolioHarness
import FolioJSON
import Foundation
import Testing

@Suite struct WatchTests {
    /// Reads watch lines until the event with sequence `last` arrived; returns the sequences seen.
    private func collectEvents(_ connection: TestConnection, tag: JSON, through last: Int64) throws -> [Int64] {
        var sequences: [Int64] = []
        while sequences.last ?? 0 < last {
            guard let line = try connection.readJSON() else {
                throw DaemonError("watch connection closed after \(sequences.count) events")
            }
            if line["tag"] == tag, let event = line["event"] {
                sequences.append(try #require(event["seq"]?.integerValue))
            } else if line.errorCode != nil {
                throw DaemonError("watch failed: \(line)")
            }
        }
        return sequences
    }

    @Test func aWatcherStartedMidLoadSeesEverySequenceExactlyOnce() throws {
        try withRunningDaemon { daemon in
            let socket = daemon.socketPath
            for index in 0..<300 {
                _ = try daemon.request(["op": "create", "collection": "Task", "data": ["n": .int(Int64(index))]])
            }
            let writing = runOnThreadsInBackground(4) { worker in
                let connection = try TestConnection(path: socket)
                for index in 0..<250 {
                    let response = try connection.request([
                        "op": "create", "collection": "Task",
                        "data": ["w": .int(Int64(worker)), "i": .int(Int64(index))],
                    ])
                    guard response.isOK else { throw DaemonError("write failed: \(response)") }
                }
            }
            usleep(50_000)
            let watcher = try daemon.connect()
            let ok = try watcher.request(["op": "watch", "tag": "w1", "after": 100])
            #expect(ok.result?["watching"] == true)
            #expect(writing.wait().isEmpty)
            let last = try #require(try daemon.request(["op": "stats"]).result?["lastSeq"]?.integerValue)
            let seen = try collectEvents(watcher, tag: "w1", through: last)
            #expect(seen == Array(101...last), "every sequence after 100 exactly once, in order")
        }
    }

    @Test func aWatchWithoutAfterStartsAtTheCurrentEndAndFiltersByCollection() throws {
        try withRunningDaemon { daemon in
            _ = try daemon.request(["op": "create", "collection": "Task", "data": ["old": true]])
            let watcher = try daemon.connect()
            let ok = try watcher.request(["op": "watch", "tag": 7, "collection": "Photo"])
            #expect(ok.result?["after"] == 1)
            _ = try daemon.request(["op": "create", "collection": "Task", "data": ["n": 1]])
            let photo = try daemon.request(["op": "create", "collection": "Photo", "data": ["n": 2]])
            let line = try #require(try watcher.readJSON())
            #expect(line["tag"] == 7)
            #expect(line["event"]?["id"] == photo.result?["id"])
            #expect(line["event"]?["seq"] == 3)
            #expect(line["event"]?["hash"]?.stringValue?.count == 64)
        }
    }

    @Test func otherRequestsKeepWorkingWhileAWatchRunsAndUnwatchEndsIt() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            _ = try connection.request(["op": "watch", "tag": "feed"])
            let created = try connection.request(["op": "create", "collection": "Task", "tag": "c", "data": ["n": 1]])
            // The event line and the create's answer may come in either order; read both.
            var answers: [JSON] = [created]
            if created["tag"] != "c" { answers.append(try #require(try connection.readJSON())) }
            let answer = try #require(answers.first { $0["tag"] == "c" })
            #expect(answer.isOK)
            var sawEvent = answers.contains { $0["event"] != nil }
            let unwatch = try connection.request(["op": "unwatch", "tag": "u", "watch": "feed"])
            var reply = unwatch
            while reply["event"] != nil {
                sawEvent = true
                reply = try #require(try connection.readJSON())
            }
            #expect(sawEvent)
            #expect(reply["tag"] == "u")
            #expect(reply.result?["lastSeq"] == 1)
            _ = try daemon.request(["op": "create", "collection": "Task", "data": ["n": 2]])
            let after = try connection.request([
                "op": "get", "collection": "Task", "id": .string(try #require(answer.result?["id"]?.stringValue)),
            ])
            #expect(after.isOK, "no more event lines after unwatch: the next line is the get's answer")
            #expect(try connection.request(["op": "unwatch", "watch": "feed"]).errorCode == "not_found")
            #expect(try connection.request(["op": "watch"]).errorCode == "bad_request", "a watch needs a tag")
        }
    }

    /// A watch from the start of a long log on a collection no event names sends nothing while it
    /// reads the log: it reads it a chunk an iteration of its loop, and the loop's other
    /// connections are answered in between. (It read the whole log in one iteration: every other
    /// request on the loop waited for all of it.)
    @Test func aCatchUpThatSendsNothingDoesNotHoldUpItsLoop() throws {
        try withRunningDaemon(arguments: ["--threads", "1"]) { daemon in
            let writer = try daemon.connect()
            let batches = 60
            for batch in 0..<batches {
                let operations: [JSON] = (0..<1000).map {
                    ["op": "create", "collection": "Task", "data": ["n": .int(Int64(batch * 1000 + $0))]]
                }
                #expect(try writer.request(["op": "batch", "ops": .array(operations)]).isOK)
            }
            let other = try daemon.connect()
            _ = try other.request(["op": "hello"])
            let watcher = try daemon.connect()
            try watcher.send(["op": "watch", "tag": "w", "after": 0, "collection": "Nothing"])
            let started = Date()
            var slowest = 0.0
            var hellos = 0
            while Date().timeIntervalSince(started) < 3 {
                let sent = Date()
                #expect(try other.request(["op": "hello"]).isOK)
                slowest = max(slowest, Date().timeIntervalSince(sent))
                hellos += 1
            }
            #expect(slowest < 0.25, "a hello waited \(Int(slowest * 1000)) ms behind the catch-up (\(hellos) hellos)")
            // The watch caught up and follows the log: the next event of its collection comes.
            _ = try writer.request(["op": "create", "collection": "Nothing", "data": ["n": 1]])
            let line = try #require(try watcher.readJSON())
            #expect(line["tag"] == "w" && line["result"]?["watching"] == true, "\(line)")
            let event = try #require(try watcher.readJSON())
            #expect(event["event"]?["seq"] == .int(Int64(batches * 1000 + 1)), "\(event)")
        }
    }

    @Test func aLaggingWatcherIsCutOffAndResumesWithoutLoss() throws {
        try withRunningDaemon(arguments: ["--watch-buffer", "4096"]) { daemon in
            let slow = try daemon.connect()
            try slow.send(["op": "watch", "tag": "slow", "after": 0])
            // The slow watcher reads nothing while a lot is written.
            let socket = daemon.socketPath
            let payload = String(repeating: "x", count: 2000)
            let writing = runOnThreadsInBackground(4) { _ in
                let connection = try TestConnection(path: socket)
                for _ in 0..<150 {
                    let response = try connection.request([
                        "op": "create", "collection": "Blob", "data": ["payload": .string(payload)],
                    ])
                    guard response.isOK else { throw DaemonError("write failed: \(response)") }
                }
            }
            #expect(writing.wait().isEmpty, "writers were not slowed into failing by the watcher")
            let last = try #require(try daemon.request(["op": "stats"]).result?["lastSeq"]?.integerValue)

            var delivered: [Int64] = []
            var lagging: JSON?
            while lagging == nil, let line = try slow.readJSON() {
                if let event = line["event"] { delivered.append(try #require(event["seq"]?.integerValue)) }
                if line.errorCode == "lagging" { lagging = line }
            }
            let cut = try #require(lagging, "the slow watcher was cut off")
            let lastSeq = try #require(cut["error"]?["lastSeq"]?.integerValue)
            #expect(lastSeq < last)
            #expect(delivered == Array(1...lastSeq), "everything up to lastSeq was delivered before the error")

            let resumed = try daemon.connect()
            _ = try resumed.request(["op": "watch", "tag": "again", "after": .int(lastSeq)])
            let rest = try collectEvents(resumed, tag: "again", through: last)
            #expect(rest == Array((lastSeq + 1)...last), "resuming after lastSeq loses nothing")
        }
    }
}

/// Starts `count` threads running `body` and returns at once; `wait()` collects their errors.
func runOnThreadsInBackground(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) -> BackgroundThreads {
    let result = BackgroundThreads()
    let group = result.group
    let errors = result.errors
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            defer { group.leave() }
            do { try body(index) } catch { errors.withLock { $0.append("\(index): \(error)") } }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    return result
}

final class BackgroundThreads: Sendable {
    let group = DispatchGroup()
    let errors = Locked<[String]>([])

    func wait(timeout: Double = 120) -> [String] {
        if group.wait(timeout: .now() + timeout) == .timedOut { return ["threads still running after \(timeout) s"] }
        return errors.current
    }
}
