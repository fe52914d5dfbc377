import FolioHarness
import FolioJSON
import Foundation
import Testing

/// Starting and stopping: clean exit on SIGTERM, recovery from a stale socket, one daemon per data
/// directory and per socket.
@Suite struct DaemonLifecycleTests {
    @Test func sigtermExitsZeroAndRemovesTheSocket() throws {
        try withRunningDaemon { daemon in
            _ = try daemon.request(["op": "create", "collection": "T", "data": ["a": 1]])
            // An idle open connection must not keep foliod from stopping.
            let idle = try daemon.connect()
            let status = try daemon.stop()
            #expect(status == 0, "exit status on SIGTERM\n\(daemon.log)")
            #expect(!FileManager.default.fileExists(atPath: daemon.socketPath), "the socket file is removed")
            #expect(try idle.readLine() == nil, "open connections are closed")
        }
    }

    /// Writes pipelined just before SIGTERM: each gets a whole answer or none, and every one
    /// acknowledged is there after a restart.
    @Test func sigtermAnswersWhatItReceivedAndKeepsIt() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let count = 500
            var bytes: [UInt8] = []
            for index in 0..<count {
                let request: JSON = [
                    "op": "create", "collection": "T", "id": .string("d\(index)"), "tag": .int(Int64(index)),
                    "data": ["n": .int(Int64(index))],
                ]
                bytes += request.serialized() + [0x0A]
            }
            try connection.send(bytes: bytes)
            let status = try daemon.stop()
            #expect(status == 0, "\(daemon.log)")

            var acknowledged: [String] = []
            var refused = 0
            while let response = try connection.readJSON() {
                #expect(response["tag"] == .int(Int64(acknowledged.count + refused)), "answers in order: \(response)")
                if response.isOK {
                    acknowledged.append("d\(acknowledged.count + refused)")
                } else {
                    #expect(response.errorCode == "unavailable", "\(response)")
                    refused += 1
                }
            }
            try daemon.start()
            let reopened = try daemon.connect()
            for id in acknowledged {
                #expect(
                    try reopened.request(["op": "get", "collection": "T", "id": .string(id)]).version == 1,
                    "\(id) was acknowledged")
            }
            let stored = try reopened.request(["op": "count", "collection": "T"]).result?["count"]?.integerValue ?? -1
            #expect(
                stored == Int64(acknowledged.count),
                "\(stored) stored, \(acknowledged.count) acknowledged, \(refused) refused")
        }
    }

    @Test func maxLineBelowTheMinimumIsAUsageError() throws {
        try withTemporaryDirectory { directory in
            try Binaries.require()
            let run = try CommandRun.run(
                Binaries.foliod,
                ["--data", directory + "/data", "--socket", directory + "/s.sock", "--max-line", "1000"])
            #expect(run.status == 64, "\(run)")
            #expect(run.stderr.contains("--max-line"), "\(run)")
        }
    }

    @Test func staleSocketAfterKillNineDoesNotPreventTheNextStart() throws {
        try withRunningDaemon { daemon in
            let created = try daemon.request(["op": "create", "collection": "T", "id": "x", "data": ["a": 1]])
            #expect(created.version == 1)
            daemon.killHard()
            #expect(FileManager.default.fileExists(atPath: daemon.socketPath), "kill -9 leaves the socket file behind")
            try daemon.start()
            #expect(try daemon.request(["op": "get", "collection": "T", "id": "x"]).result == created.result)
        }
    }

    @Test func secondDaemonOnTheSameDataDirectoryRefusesToStart() throws {
        try withRunningDaemon { daemon in
            try withTemporaryDirectory { other in
                let run = try CommandRun.run(
                    Binaries.foliod, ["--data", daemon.dataDirectory, "--socket", other + "/second.sock"])
                #expect(run.status != 0, "\(run)")
                #expect(run.stderr.contains(daemon.dataDirectory), "the message names the data directory: \(run)")
                #expect(
                    !FileManager.default.fileExists(atPath: other + "/second.sock"), "it does not leave a socket behind"
                )
            }
            #expect(try daemon.request(["op": "hello"]).isOK, "the first foliod still serves")
        }
    }

    @Test func secondDaemonOnTheSameSocketRefusesToStart() throws {
        try withRunningDaemon { daemon in
            try withTemporaryDirectory { other in
                let run = try CommandRun.run(
                    Binaries.foliod, ["--data", other + "/data", "--socket", daemon.socketPath])
                #expect(run.status != 0, "\(run)")
                #expect(run.stderr.contains(daemon.socketPath), "the message names the socket: \(run)")
            }
            #expect(
                FileManager.default.fileExists(atPath: daemon.socketPath), "the first foliod's socket is left alone")
            #expect(try daemon.request(["op": "hello"]).isOK, "the first foliod still serves")
        }
    }

    /// A file at the socket's path that is not a socket (a mistyped `--socket`), or a symbolic link,
    /// is left as it is and foliod does not start: only a socket file nobody listens on is replaced.
    /// (Whatever was there was unlinked: `--socket DATA/data.mdb` deleted the store.)
    @Test func somethingOtherThanAStaleSocketAtTheSocketPathIsLeftAlone() throws {
        try withTemporaryDirectory { directory in
            try Binaries.require()
            let precious = directory + "/precious.mdb"
            try "keep me".write(toFile: precious, atomically: false, encoding: .utf8)
            let link = directory + "/link.sock"
            #expect(symlink(precious, link) == 0)
            for path in [precious, link] {
                let run = try CommandRun.run(
                    Binaries.foliod, ["--data", directory + "/data", "--socket", path], timeout: 30)
                #expect(run.status != 0, "\(run)")
                #expect(run.stderr.contains("in the way of the socket"), "\(run)")
            }
            #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me")
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == precious)
        }
    }
}
