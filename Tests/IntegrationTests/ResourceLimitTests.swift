import FolioClient
import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// What foliod does when clients ask for more than it can give: descriptors, connections, memory,
/// time. Each limit answers with an error or a closed connection; none crashes foliod or costs the
/// other clients their answers.
@Suite struct ResourceLimitTests {
    /// Connections that were refused (an `unavailable` line, then the end of the stream) and those
    /// that were kept (nothing to read).
    private func classify(_ connections: [TestConnection]) throws -> (refused: Int, kept: [TestConnection]) {
        var refused = 0
        var kept: [TestConnection] = []
        usleep(500_000)
        for connection in connections {
            if connection.waitReadable(timeout: 0.01) {
                let line = try connection.readJSON()
                #expect(line?.errorCode == "unavailable", "\(String(describing: line))")
                #expect(try connection.readJSON() == nil)
                refused += 1
            } else {
                kept.append(connection)
            }
        }
        return (refused, kept)
    }

    /// With its descriptors used up, foliod still answers the clients it has, refuses new ones with
    /// a line instead of leaving them in the backlog, logs that once per interval, and serves the
    /// first request that needs a worker thread (this crashed it with SIGILL).
    @Test func descriptorExhaustionRefusesClientsAndCrashesNothing() throws {
        try withRunningDaemon { daemon in
            let first = try daemon.connect(timeout: 10)
            _ = try first.request(["op": "create", "collection": "T", "data": ["n": 1]])
            let limit = try CommandRun.run("/usr/bin/prlimit", ["--pid", "\(daemon.pid!)", "--nofile=96:96"])
            #expect(limit.status == 0, "\(limit)")
            var connections: [TestConnection] = []
            for _ in 0..<160 { connections.append(try daemon.connect(timeout: 10)) }
            let (refused, kept) = try classify(connections)
            #expect(refused > 60 && kept.count > 20, "refused \(refused), kept \(kept.count)")
            // A worker read, a scan, a verify (which needs descriptors of its own) and a write on a kept connection.
            let stats = try first.request(["op": "stats"])
            #expect(stats.isOK, "\(stats)")
            #expect((stats.result?["connectionsRefused"]?.integerValue ?? 0) >= Int64(refused))
            #expect(try kept[0].request(["op": "list", "collection": "T", "where": ["n": 1]]).result?["total"] == 1)
            let verify = try kept[1].request(["op": "verify"])
            #expect(verify.isOK || verify.errorCode == "unavailable" || verify.errorCode == "internal", "\(verify)")
            #expect(try kept[2].request(["op": "create", "collection": "T", "data": ["n": 2]]).isOK)
            // One log line for the burst, not one per refused client.
            let lines = daemon.log.split(separator: "\n").filter { $0.contains("no file descriptor left") }
            #expect(lines.count >= 1 && lines.count <= 2, "\(lines)")
            // Once clients leave, new ones are served again.
            connections.removeAll()
            for connection in kept { connection.close() }
            usleep(200_000)
            #expect(try daemon.connect(timeout: 10).request(["op": "hello"]).isOK)
            #expect(daemon.isRunning)
        }
    }

    /// An accept the kernel cannot serve (ENOMEM) pauses accepting for 100 ms; a listening socket
    /// that then cannot be watched again at once (ENOMEM) is logged and watched at the next try, so
    /// the client waiting in the backlog is served. Before, that failure was dropped, and foliod
    /// never accepted another connection, without a word in its log.
    @Test func acceptingResumesWhenTheListenerCannotBeWatchedAgainAtOnce() throws {
        try withShimmedDaemon { daemon, shim in
            let first = try daemon.connect(timeout: 10)
            #expect(try first.request(["op": "hello"]).isOK)
            try shim.set([
                .init(calls: "accept", nth: 1, error: "ENOMEM", sticky: false, path: daemon.socketPath),
                .init(calls: "watch", nth: 1, error: "ENOMEM", sticky: false, path: daemon.socketPath),
            ])
            let second = try daemon.connect(timeout: 10)
            #expect(try second.request(["op": "hello"]).isOK)
            let injected = shim.injected
            #expect(injected.contains { $0.hasPrefix("accept4 ENOMEM \(daemon.socketPath)") }, "\(injected)")
            #expect(injected.contains { $0.hasPrefix("epoll_ctl ENOMEM \(daemon.socketPath)") }, "\(injected)")
            #expect(daemon.log.contains("cannot accept connections: accept4"), "\(daemon.log)")
            #expect(daemon.log.contains("cannot watch the listening socket again"), "\(daemon.log)")
            #expect(try daemon.connect(timeout: 10).request(["op": "hello"]).isOK)
            #expect(try first.request(["op": "hello"]).isOK)
        }
    }

    @Test func clientsBeyondMaxConnectionsAreToldSo() throws {
        try withRunningDaemon(arguments: ["--max-connections", "3"]) { daemon in
            // Until foliod has seen the start-up probe's connection close, it takes a place.
            for _ in 0..<100 {
                let probe = try daemon.connect(timeout: 10)
                if try probe.request(["op": "stats"]).result?["connections"] == 1 { break }
                probe.close()
                usleep(20_000)
            }
            usleep(50_000)
            let open = try (0..<3).map { _ in try daemon.connect(timeout: 10) }
            for connection in open { #expect(try connection.request(["op": "hello"]).isOK) }
            let extra = try daemon.connect(timeout: 10)
            let answer = try extra.readJSON()
            #expect(answer?.errorCode == "unavailable")
            #expect(answer?.errorMessage?.contains("at most 3 connections") == true)
            #expect(try extra.readJSON() == nil)
            open[0].close()
            usleep(100_000)
            let again = try daemon.connect(timeout: 10)
            #expect(try again.request(["op": "stats"]).result?["connectionsRefused"] == 1)
        }
    }

    /// Over the client memory budget the largest holders are closed first; small clients go on.
    @Test func clientMemoryIsBoundedByClosingTheLargestHolders() throws {
        try withRunningDaemon(arguments: ["--client-memory", "4194304", "--threads", "1"]) { daemon in
            let small = try daemon.connect(timeout: 10)
            #expect(try small.request(["op": "hello"]).isOK)
            let half =
                Array(#"{"op":"create","collection":"T","data":{"s":""#.utf8) + [UInt8](repeating: 0x61, count: 700_000)
            var large: [TestConnection] = []
            for _ in 0..<10 {
                let connection = try daemon.connect(timeout: 10)
                do {
                    try connection.send(bytes: half)
                } catch let failure as TestConnection.Failure where failure.code == EPIPE || failure.code == ECONNRESET
                {
                    // Shed while its line was still arriving (the largest holder is often the one being
                    // sent to): what the test expects of some of them. Counted as closed below.
                }
                large.append(connection)
            }
            usleep(300_000)
            let stats = try small.request(["op": "stats"])
            let held = stats.result?["clientMemory"]?.integerValue ?? -1
            #expect(held >= 0 && held <= 4_194_304, "clientMemory \(held)")
            #expect((stats.result?["connectionsShed"]?.integerValue ?? 0) >= 4, "\(stats)")
            var closed = 0
            for connection in large where connection.waitReadable(timeout: 0.5) {
                if (try? connection.readJSON()) == nil { closed += 1 }
            }
            #expect(closed >= 4)
            #expect(try small.request(["op": "hello"]).isOK)
        }
    }

    @Test func aLineThatNeverEndsTimesOut() throws {
        try withRunningDaemon(arguments: ["--partial-line-timeout", "1"]) { daemon in
            let slow = try daemon.connect(timeout: 10)
            try slow.send(bytes: Array(#"{"op":"hel"#.utf8))
            let steady = try daemon.connect(timeout: 10)
            let started = Date()
            for _ in 0..<6 {
                #expect(try steady.request(["op": "hello"]).isOK)
                usleep(400_000)
            }
            let answer = try slow.readJSON()
            #expect(answer?.errorCode == "bad_request")
            #expect(answer?.errorMessage?.contains("no end of line within 1 s") == true)
            #expect(try slow.readJSON() == nil)
            #expect(Date().timeIntervalSince(started) < 10)
            #expect(try steady.request(["op": "stats"]).result?["slowLinesClosed"] == 1)
        }
    }

    /// A watcher that stops reading is not given a queue: what the server holds for it stays near
    /// its output allowance however much is written, and it is cut off with the sequence to resume
    /// from.
    @Test func aStuckWatcherHoldsNoQueueAndResumesFromLastSeq() throws {
        try withRunningDaemon(arguments: ["--watch-buffer", "65536"]) { daemon in
            let watcher = try daemon.connect(timeout: 10)
            var small: Int32 = 4096
            _ = watcher.withDescriptor {
                setsockopt($0, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            }
            let watching = try watcher.request(["op": "watch", "tag": "w", "after": 0])
            #expect(watching.isOK)
            let writer = try daemon.connect(timeout: 10)
            let text = String(repeating: "x", count: 2000)
            for batch in 0..<10 {
                for index in 0..<200 {
                    try writer.send([
                        "op": "create", "collection": "Note", "id": .string("n\(batch)-\(index)"),
                        "data": ["text": .string(text)],
                    ])
                }
                for _ in 0..<200 { #expect(try writer.readResponse().isOK) }
            }
            let held = try writer.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? -1
            #expect(held >= 0 && held < 1 << 20, "clientMemory \(held) for one watcher after 4 MB of events")
            try Self.expectCutOffThenResume(watcher, tag: "w", within: nil)
        }
    }

    /// A watcher still catching up from an early `after` when its client stopped reading was never
    /// cut off: it was skipped for live events and counted no lag. It now falls behind like a live one.
    @Test func aWatcherStuckInItsCatchUpIsCutOffAndResumes() throws {
        try withRunningDaemon(arguments: ["--watch-buffer", "65536"]) { daemon in
            let writer = try daemon.connect(timeout: 10)
            let text = String(repeating: "x", count: 2000)
            func write(_ batch: Int) throws {
                for index in 0..<200 {
                    try writer.send([
                        "op": "create", "collection": "Note", "id": .string("n\(batch)-\(index)"),
                        "data": ["text": .string(text)],
                    ])
                }
                for _ in 0..<200 { #expect(try writer.readResponse().isOK) }
            }
            for batch in 0..<5 { try write(batch) }
            let watcher = try daemon.connect(timeout: 10)
            var small: Int32 = 4096
            _ = watcher.withDescriptor {
                setsockopt($0, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            }
            #expect(try watcher.request(["op": "watch", "tag": "w", "after": 0]).isOK)
            for batch in 5..<15 { try write(batch) }
            try Self.expectCutOffThenResume(watcher, tag: "w2", within: 3000)
        }
    }

    /// Over `max-requests-total`, every connection stops reading, and each reads again once the
    /// total is under it: a connection paused only for the others' backlog must not wait for an
    /// event of its own that never comes.
    @Test func connectionsPausedByTheTotalBoundReadAgain() throws {
        try withRunningDaemon(arguments: ["--max-requests-total", "4", "--partial-line-timeout", "0"]) { daemon in
            let clients = try (0..<6).map { _ in try daemon.connect(timeout: 20) }
            for (number, client) in clients.enumerated() {
                for index in 0..<200 {
                    try client.send([
                        "op": "create", "collection": "T", "id": .string("c\(number)-\(index)"), "data": [:],
                    ])
                }
            }
            for client in clients {
                for _ in 0..<200 { #expect(try client.readResponse().isOK) }
            }
            #expect(try daemon.request(["op": "count", "collection": "T"]).result?["count"] == 1200)
            #expect(try daemon.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? 0 < 1 << 20)
        }
    }

    /// Lines read in one chunk that each ask for a page of a megabyte are answered as the client
    /// takes its answers, not all at once: what waits for the client stays near the high water
    /// (16 MiB), and every answer comes. (Each line was answered as it was read: 40 pages of 1 MiB
    /// made 40 MiB of output before anything was sent, and 70 would have passed `max-output`.)
    @Test func pagesAskedForInOneChunkAreAnsweredAsTheClientReads() throws {
        try withRunningDaemon { daemon in
            let writer = try daemon.connect()
            let text = String(repeating: "x", count: 1000)
            for batch in 0..<2 {
                let operations: [JSON] = (0..<500).map {
                    [
                        "op": "create", "collection": "Big",
                        "data": ["n": .int(Int64(batch * 500 + $0)), "text": .string(text)],
                    ]
                }
                #expect(try writer.request(["op": "batch", "ops": .array(operations)]).isOK)
            }
            let reader = try daemon.connect()
            let pages = 40
            var lines: [UInt8] = []
            for index in 0..<pages {
                lines +=
                    JSON.object(["op": "list", "collection": "Big", "limit": 1000, "tag": .int(Int64(index))])
                    .serialized() + [0x0A]
            }
            try reader.send(bytes: lines)
            usleep(1_000_000)
            let held = try daemon.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? 0
            #expect(held < 24 << 20, "\(held) bytes of answers held for a client that has not read yet")
            // The answers, counted by their newlines (parsing 40 MiB would take a debug build long).
            var answered = 0
            var first: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            while answered < pages {
                let count = reader.withDescriptor { fd in
                    chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
                }
                guard count > 0 else { break }
                if first.count < 64 { first += chunk[..<min(count, 64 - first.count)] }
                answered += chunk[..<count].withUnsafeBytes { bytes in
                    var found = 0
                    var at = bytes.baseAddress!
                    let end = at + bytes.count
                    while let newline = memchr(at, 0x0A, end - at) {
                        found += 1
                        at = UnsafeRawPointer(newline) + 1
                    }
                    return found
                }
            }
            #expect(answered == pages, "\(answered) answers of \(pages)")
            #expect(String(decoding: first, as: UTF8.self).hasPrefix("{\"tag\":0,\"ok\":true"), "\(first)")
        }
    }

    /// A connection closed while its live query's first page is being made (the client left an
    /// answer unread, so its close resets the connection) frees what the query's line held: the
    /// memory foliod counts for clients goes back to what it was.
    @Test func aLiveQueryOfAConnectionResetBeforeItsFirstPageHoldsNothing() throws {
        try withRunningDaemon { daemon in
            let writer = try daemon.connect()
            let operations: [JSON] = (0..<1000).map {
                ["op": "create", "collection": "Task", "data": ["n": .int(Int64($0))]]
            }
            #expect(try writer.request(["op": "batch", "ops": .array(operations)]).isOK)
            let idle = try daemon.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? -1 as Int64
            for round in 0..<100 {
                let client = try daemon.connect()
                let query: JSON = ["collection": "Task", "sort": ["-n"], "limit": 1000]
                try client.send(
                    bytes: Array("{\"op\":\"hello\"}\n".utf8)
                        + JSON.object(["op": "watch", "tag": .int(Int64(round)), "query": query]).serialized() + [0x0A])
                usleep(200)
                client.close()
            }
            var held: Int64 = -1
            let deadline = Date().addingTimeInterval(10)
            repeat {
                usleep(100_000)
                held = try daemon.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? -1
            } while held > idle && Date() < deadline
            #expect(held <= idle, "\(held) bytes held for clients, \(idle) before")
        }
    }

    /// A client that hangs up while a request of its waits (here a read for an event that does
    /// not come, until `--min-seq-timeout`) costs its loop nothing meanwhile. (epoll reports a hang
    /// up whatever a descriptor is watched for, so the loop woke for it again and again and spun.)
    @Test func aHungUpClientWithARequestInFlightCostsNoCPU() throws {
        try withRunningDaemon(arguments: ["--threads", "1", "--idle-poll", "0", "--min-seq-timeout", "4"]) { daemon in
            let pid = try #require(daemon.pid)
            func cpuTicks() throws -> Int {
                let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
                let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
                return Int(fields[11])! + Int(fields[12])!
            }
            let client = try daemon.connect()
            try client.send(["op": "get", "collection": "Task", "id": "x", "minSeq": 1_000_000])
            client.close()
            usleep(300_000)
            let before = try cpuTicks()
            usleep(2_000_000)
            let spent = try cpuTicks() - before
            let hertz = sysconf(Int32(_SC_CLK_TCK))
            #expect(
                spent * 10 < hertz * 2, "foliod used \(spent) ticks (\(hertz) a second) in 2 s with one hung-up client")
            #expect(try daemon.request(["op": "hello"]).isOK)
        }
    }

    /// A client that asks for descriptors (`file.read {fd: true}`) and does not read holds at
    /// most `Connection.maxOutgoingDescriptors` of foliod's; the others are opened as it reads.
    @Test func aClientThatDoesNotReadHoldsFewDescriptors() throws {
        try withRunningDaemon { daemon in
            #expect(try daemon.request(["op": "file.put", "name": "f", "data": "aGVsbG8="]).isOK)
            let pid = try #require(daemon.pid)
            let before = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
            let client = try FolioConnection(path: daemon.socketPath, timeout: 30)
            defer { client.close() }
            let reads = 300
            var lines: [UInt8] = []
            for index in 0..<reads {
                lines +=
                    JSON.object(["op": "file.read", "name": "f", "fd": true, "tag": .int(Int64(index))]).serialized()
                    + [0x0A]
            }
            try client.send(bytes: lines)
            usleep(500_000)
            let holding = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
            #expect(holding - before <= 20, "foliod holds \(holding - before) more descriptors for one client")
            for index in 0..<reads {
                let answer = try #require(try client.readJSON())
                #expect(answer["tag"] == .int(Int64(index)) && answer.result?["size"] == 5, "\(answer)")
                let passed = try #require(client.takePassedDescriptor())
                close(passed)
            }
        }
    }

    /// Reads a stuck watcher's events up to its `lagging` line (or `events` of them, if given):
    /// they must be 1, 2, 3, ... and `lagging` must name the last as `lastSeq`; a new watch from
    /// there starts at the next one.
    private static func expectCutOffThenResume(_ watcher: TestConnection, tag: String, within events: Int?) throws {
        var delivered: [Int64] = []
        var lastSeq: Int64?
        while let line = try watcher.readJSON() {
            if let sequence = line["event"]?["seq"]?.integerValue {
                delivered.append(sequence)
            } else if line.errorCode == "lagging" {
                lastSeq = line["error"]?["lastSeq"]?.integerValue
                break
            }
            if let events, delivered.count == events { break }
        }
        #expect(lastSeq != nil, "the watcher read \(delivered.count) events and was not cut off")
        #expect(delivered == Array(1...Int64(delivered.count)))
        #expect(lastSeq == Int64(delivered.count))
        #expect(try watcher.request(["op": "watch", "tag": .string(tag), "after": .int(lastSeq ?? 0)]).isOK)
        #expect(try watcher.readJSON()?["event"]?["seq"]?.integerValue == (lastSeq ?? 0) + 1)
    }
}
