import FolioClient
import FolioJSON
import Foundation
import Glibc
import Synchronization
import Testing

/// When several connections are ready at once, an event loop reads their requests with MSG_PEEK
/// and takes the bytes out of the socket only after writing the answers it could give at once
/// (`EventLoop.peekRequests`). A client blocked in `recv` for its answer is then woken once, by the
/// answer, instead of twice: freeing a request's buffer wakes whoever sleeps on the client's
/// socket, whatever it waits for. foliod is stopped (SIGSTOP) while the clients send, so that the
/// loop finds every connection ready in one `epoll_wait` when it continues.
@Suite struct PeekedReadTests {
    /// The calling thread's voluntary context switches so far: one each time it slept. Read with
    /// plain system calls, so that reading them takes no lock another thread may hold.
    private static func voluntarySwitches() -> Int {
        let fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return -1 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            guard count > 0 else { break }
            filled += count
        }
        let status = String(decoding: bytes[..<filled], as: UTF8.self)
        for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches:") {
            return line.split(whereSeparator: { $0 == " " || $0 == "\t" }).last.flatMap { Int($0) } ?? -1
        }
        return -1
    }

    /// Runs `body` with foliod stopped, then lets it continue.
    private static func whileStopped(_ pid: Int32, _ body: () throws -> Void) throws {
        #expect(kill(pid, SIGSTOP) == 0)
        defer { kill(pid, SIGCONT) }
        try body()
    }

    @Test func aClientWaitingForItsGetIsWokenOnceByItsAnswer() throws {
        try withRunningDaemon(arguments: ["--threads", "1"]) { daemon in
            let pid = try #require(daemon.pid)
            let created = try daemon.request(["op": "create", "collection": "Note", "data": ["text": "peeked"]])
            let id = try #require(created.result?["id"]?.stringValue, "\(created)")
            let get: JSON = ["op": "get", "collection": "Note", "id": .string(id)]
            let clients = 32
            let connections = try (0..<clients).map { _ in try daemon.connect(timeout: 30) }
            for connection in connections { #expect(try connection.request(get).isOK) }

            // Each client sends its get while foliod is stopped and waits for the answer in recv.
            // Counted from the send to the answer: the sleep in recv, plus one for every wake-up
            // that brought no answer (2 a get when the loop reads the plain way).
            let counts = Locked<[Int]>([])
            for _ in 0..<3 {
                let sent = Atomic<Int>(0)
                #expect(kill(pid, SIGSTOP) == 0)
                let group = DispatchGroup()
                for index in 0..<clients {
                    group.enter()
                    nonisolated(unsafe) let connection = connections[index]
                    let thread = Thread {
                        defer { group.leave() }
                        do {
                            try connection.send(get)
                            sent.add(1, ordering: .sequentiallyConsistent)
                            let before = Self.voluntarySwitches()
                            let answer = try connection.readResponse()
                            let after = Self.voluntarySwitches()
                            counts.withLock { $0.append(answer.isOK && before >= 0 ? after - before : -1) }
                        } catch {
                            counts.withLock { $0.append(-1) }
                        }
                    }
                    thread.start()
                }
                // Every get sent, and its client asleep in recv, before foliod reads any of them.
                let deadline = Date().addingTimeInterval(10)
                while sent.load(ordering: .sequentiallyConsistent) < clients && Date() < deadline { usleep(1_000) }
                usleep(200_000)
                #expect(kill(pid, SIGCONT) == 0)
                #expect(group.wait(timeout: .now() + 30) == .success)
            }
            // A client may also sleep for reasons of its own (a busy machine); most must not.
            let all = counts.current
            #expect(!all.contains(-1), "every get answered: \(all)")
            #expect(all.filter { $0 == 1 }.count * 4 >= all.count * 3, "voluntary switches a get, by client and round: \(all)")
        }
    }

    /// What a peeked read hands on is what a plain read would: pipelined lines, a line cut in two,
    /// a line longer than one read, a descriptor passed with its line, writes among the gets, and
    /// the end of the stream, from connections ready at once.
    @Test func linesReadByPeekingAreTheLinesSent() throws {
        try withRunningDaemon(arguments: ["--threads", "1"]) { daemon in
            let pid = try #require(daemon.pid)
            let created = try daemon.request(["op": "create", "collection": "Note", "data": ["n": 0]])
            let id = try #require(created.result?["id"]?.stringValue, "\(created)")
            let get = "{\"op\":\"get\",\"collection\":\"Note\",\"id\":\"\(id)\",\"tag\":"
            let pipelined = try daemon.connect(timeout: 30)
            let cut = try daemon.connect(timeout: 30)
            let long = try daemon.connect(timeout: 30)
            let writes = try daemon.connect(timeout: 30)
            let ending = try daemon.connect(timeout: 30)
            let passing = try FolioConnection(path: daemon.socketPath, timeout: 30)
            defer { passing.close() }
            let path = daemon.directory + "/passed.bin"
            try Data(Array("passed with its line".utf8)).write(to: URL(fileURLWithPath: path))
            let source = open(path, O_RDONLY | O_CLOEXEC)
            defer { close(source) }
            for connection in [pipelined, cut, long, writes, ending] { #expect(try connection.request(["op": "hello"]).isOK) }
            #expect(try passing.request(["op": "hello"])["ok"] == .bool(true))

            let text = String(repeating: "x", count: 200_000)
            try Self.whileStopped(pid) {
                try pipelined.send(bytes: Array((0..<50).map { "\(get)\($0)}\n" }.joined().utf8))
                try cut.send(bytes: Array("\(get)1}\n\(get)2".utf8))
                try long.send(["op": "create", "collection": "Long", "data": ["text": .string(text)], "tag": 1])
                try long.send(bytes: Array("\(get)2}\n".utf8))
                try writes.send(bytes: Array((0..<20).map { "{\"op\":\"create\",\"collection\":\"Note\",\"data\":{\"n\":\($0 + 1)},\"tag\":\($0)}\n\(get)\($0)}\n" }.joined().utf8))
                try ending.send(bytes: Array("\(get)1}\n\(get)2}".utf8))
                ending.withDescriptor { _ = shutdown($0, Int32(SHUT_WR)) }
                try passing.send(["op": "file.put", "name": "passed.bin", "fd": true, "tag": 1], passing: source)
                usleep(100_000)
            }

            for tag in 0..<50 {
                let answer = try pipelined.readResponse()
                #expect(answer.isOK && answer["tag"] == .int(Int64(tag)) && answer.result?["id"] == .string(id), "\(answer)")
            }
            #expect(try cut.readResponse()["tag"] == 1)
            #expect(!cut.waitReadable(timeout: 0.2), "half a line is not answered")
            try cut.send(bytes: Array("}\n".utf8))
            let second = try cut.readResponse()
            #expect(second.isOK && second["tag"] == 2, "\(second)")
            let createdLong = try long.readResponse()
            #expect(createdLong.isOK && createdLong["tag"] == 1, "\(createdLong)")
            #expect(try long.readResponse()["tag"] == 2)
            for tag in 0..<20 {
                let create = try writes.readResponse()
                let read = try writes.readResponse()
                #expect(create.isOK && create["tag"] == .int(Int64(tag)), "\(create)")
                #expect(read.isOK && read["tag"] == .int(Int64(tag)), "\(read)")
            }
            #expect(try ending.readResponse()["tag"] == 1)
            #expect(try ending.readResponse()["tag"] == 2, "a last line without its newline is answered at the end of the stream")
            #expect(try ending.readJSON() == nil, "then the connection closes")
            let put = try #require(try passing.readJSON())
            #expect(put["tag"] == 1 && put["result"]?["size"] == .int(Int64("passed with its line".utf8.count)), "\(put)")

            let listed = try daemon.request(["op": "list", "collection": "Long"])
            let stored = listed.result?["items"]?.arrayValue?.first?["text"]?.stringValue
            #expect(stored?.count == text.count && stored == text, "the long line's text comes back whole (\(stored?.count ?? -1) characters)")
            #expect(try daemon.request(["op": "count", "collection": "Note"]).result?["count"] == 21)
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == true)
        }
    }
}
