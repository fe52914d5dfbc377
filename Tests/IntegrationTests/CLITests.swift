import FolioHarness
import FolioJSON
import Foundation
import Testing

/// The real `folio` binary against a real foliod; stdout is a pipe, so results are JSON lines.
@Suite struct CLITests {
    static func folio(_ arguments: String..., socket: String) throws -> CommandRun {
        try Binaries.require()
        return try CommandRun.run(Binaries.folio, arguments, environment: ["FOLIO_SOCKET": socket])
    }

    /// `folio` with its stdout on a terminal (a pseudo-terminal from util-linux's `script`), as a
    /// person sees it.
    static func folioOnATerminal(_ arguments: String..., socket: String) throws -> CommandRun {
        try Binaries.require()
        let command = ([Binaries.folio] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
            .joined(separator: " ")
        return try CommandRun.run(
            "/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["FOLIO_SOCKET": socket])
    }

    /// The one JSON line a command printed.
    static func output(_ run: CommandRun) throws -> JSON {
        #expect(run.status == 0, "\(run)")
        let lines = run.jsonLines
        #expect(lines.count == 1, "one JSON line: \(run)")
        return try JSONParser.parse(try #require(lines.first, "\(run)"))
    }

    @Test func objectCommandsEndToEnd() throws {
        try withRunningDaemon { daemon in
            let socket = daemon.socketPath
            let created = try Self.output(
                try Self.folio("create", "Task", "title=Buy milk", "done:=false", "n:=3", socket: socket))
            #expect(created["title"] == "Buy milk")
            #expect(created["done"] == false)
            #expect(created["n"] == 3)
            #expect(created["version"] == 1)
            #expect(created["collection"] == "Task")
            let id = try #require(created["id"]?.stringValue)

            let fetched = try Self.output(try Self.folio("get", "Task", id, socket: socket))
            #expect(fetched == created)

            let updated = try Self.output(
                try Self.folio("update", "Task", id, "done:=true", "--if-version", "1", socket: socket))
            #expect(updated["version"] == 2)
            #expect(updated["done"] == true)
            #expect(updated["title"] == "Buy milk")

            let second = try Self.output(
                try Self.folio(
                    "create", "Task", "--id", "t2", "title=Walk the dog", "done:=false", "n:=5", socket: socket))
            #expect(second["id"] == "t2")

            let page = try Self.output(try Self.folio("list", "Task", "--limit", "1", socket: socket))
            #expect(page["items"]?.arrayValue?.count == 1, "\(page)")
            #expect(page["items"]?.arrayValue?.first?["id"] == .string(id), "creation order: \(page)")
            #expect(page["total"] == 2)
            #expect(page["next"]?.stringValue != nil, "a cursor for the next page: \(page)")

            let count = try Self.output(try Self.folio("count", "Task", "-w", "done=false", socket: socket))
            #expect(count == ["count": 1])

            let stale = try Self.folio("update", "Task", id, "n:=4", "--if-version", "1", socket: socket)
            #expect(stale.status == 1, "\(stale)")
            #expect(stale.stdout.isEmpty, "\(stale)")
            #expect(
                stale.stderr.contains("conflict") && stale.stderr.contains("version 2"),
                "the server's message on stderr: \(stale)")

            let deleted = try Self.output(try Self.folio("delete", "Task", id, socket: socket))
            #expect(deleted == ["id": .string(id), "version": 3])

            let missing = try Self.folio("get", "Task", id, socket: socket)
            #expect(missing.status == 1, "\(missing)")
            #expect(missing.stderr.contains("not_found"), "\(missing)")
            #expect(try Self.output(try Self.folio("count", "Task", socket: socket)) == ["count": 1])
        }
    }

    @Test func watchKeepsALiveQueryAndPrintsItsChanges() throws {
        try withRunningDaemon { daemon in
            let socket = daemon.socketPath
            for (id, title) in [("t1", "b"), ("t2", "c"), ("t3", "d")] {
                _ = try Self.folio("create", "Task", "--id", id, "title=\(title)", "done:=false", socket: socket)
            }
            let outputPath = daemon.directory + "/watch.out"
            let outputFD = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            let nullFD = open("/dev/null", O_RDWR | O_CLOEXEC)
            defer {
                close(outputFD)
                close(nullFD)
            }
            let watcher = try ChildProcess(
                executable: Binaries.folio,
                arguments: ["watch", "Task", "-w", "done=false", "--sort", "title", "--limit", "2"],
                environment: ["FOLIO_SOCKET": socket], stdin: nullFD, stdout: outputFD, stderr: nullFD)
            defer { _ = watcher.killAndWait() }
            func lines(atLeast count: Int) throws -> [JSON] {
                for _ in 0..<500 {
                    let text = fileText(outputPath)
                    let lines = text.split(separator: "\n")
                    if lines.count >= count { return try lines.map { try JSONParser.parse(Array($0.utf8)) } }
                    usleep(10_000)
                }
                throw DaemonError("folio watch printed fewer than \(count) lines")
            }
            let first = try lines(atLeast: 1)[0]
            #expect(first["items"]?.arrayValue?.map { $0["id"] } == ["t1", "t2"] && first["total"] == 3, "\(first)")
            _ = try Self.folio("create", "Task", "--id", "t0", "title=a", "done:=false", socket: socket)
            let change = try lines(atLeast: 2)[1]
            #expect(change["removed"] == [["index": 1, "id": "t2"]], "\(change)")
            #expect(change["inserted"]?.arrayValue?.first?["index"] == 0 && change["total"] == 4, "\(change)")

            // Without a collection or a view, watch follows the log's events, from --after on.
            _ = watcher.killAndWait()
            _ = ftruncate(outputFD, 0)
            lseek(outputFD, 0, SEEK_SET)
            let events = try ChildProcess(
                executable: Binaries.folio, arguments: ["watch", "--after", "2"], environment: ["FOLIO_SOCKET": socket],
                stdin: nullFD,
                stdout: outputFD, stderr: nullFD)
            defer { _ = events.killAndWait() }
            let event = try lines(atLeast: 1)[0]
            #expect(event["seq"] == 3 && event["id"] == "t3", "\(event)")
            // foliod restarted under it: the watch resumes after the last event shown, repeating
            // none. (It ended with exit status 0 when its connection ended.)
            #expect(try lines(atLeast: 2)[1]["seq"] == 4)
            try daemon.restart()
            _ = try Self.folio("create", "Task", "--id", "t5", "title=e", socket: socket)
            let resumed = try lines(atLeast: 3)
            #expect(resumed.map { $0["seq"] } == [3, 4, 5], "\(resumed)")
            #expect(events.isRunning, "the watch goes on")
        }
    }

    /// `--min-seq N` makes a read wait for event N; a write refuses it.
    @Test func minSeqMakesReadsWaitForAnEvent() throws {
        try withRunningDaemon(arguments: ["--min-seq-timeout", "0.3"]) { daemon in
            let socket = daemon.socketPath
            _ = try Self.output(try Self.folio("create", "Task", "--id", "t1", "title=x", socket: socket))
            let seen = try Self.output(try Self.folio("--min-seq", "1", "get", "Task", "t1", socket: socket))
            #expect(seen["title"] == "x")
            let future = try Self.folio("--min-seq", "99", "count", "Task", socket: socket)
            #expect(
                future.status == 1 && future.stderr.contains("unavailable") && future.stderr.contains("99"), "\(future)"
            )
            // Reads a command sends on its own connection wait too (they were sent without it).
            for command in [["export"], ["file", "ls"]] {
                let waited = try CommandRun.run(
                    Binaries.folio, ["--min-seq", "99"] + command, environment: ["FOLIO_SOCKET": socket])
                #expect(waited.status == 1 && waited.stderr.contains("unavailable"), "\(command): \(waited)")
            }
            // A read that timed out is no refusal of the access policy.
            let metrics = try daemon.request(["op": "metrics"]).result?["text"]?.stringValue ?? ""
            #expect(metrics.contains("folio_refusals_total{cause=\"forbidden\"} 0\n"), "\(metrics)")
            // Writes go without it (a write always runs on the newest state).
            _ = try Self.output(try Self.folio("--min-seq", "99", "create", "Task", "title=y", socket: socket))
            // A single node keeps its log in LMDB: a person creating on it is not told the event.
            let hello = try Self.output(try Self.folio("hello", socket: socket))
            #expect(hello["log"] == "lmdb", "\(hello)")
            let shown = try Self.folioOnATerminal("create", "Task", "title=z", socket: socket)
            #expect(shown.status == 0 && shown.stdout.contains("title") && !shown.stdout.contains("(event"), "\(shown)")
        }
    }

    @Test func helpAndUsageErrors() throws {
        try withTemporaryDirectory { directory in
            let socket = directory + "/none.sock"
            let help = try Self.folio("--help", socket: socket)
            #expect(help.status == 0, "\(help)")
            #expect(help.stdout.contains("usage: folio"), "\(help)")
            #expect(help.stderr.isEmpty, "\(help)")

            let commandHelp = try Self.folio("create", "--help", socket: socket)
            #expect(commandHelp.status == 0 && commandHelp.stdout.contains("usage: folio create"), "\(commandHelp)")

            let noCollection = try Self.folio("list", socket: socket)
            #expect(noCollection.status == 64, "\(noCollection)")
            #expect(noCollection.stderr.contains("COLLECTION"), "\(noCollection)")
            #expect(noCollection.stdout.isEmpty, "\(noCollection)")

            let unknown = try Self.folio("frobnicate", socket: socket)
            #expect(unknown.status == 64 && unknown.stderr.contains("frobnicate"), "\(unknown)")

            // Numbers that overflowed where folio multiplied them (a trap, not a usage error).
            let farPage = try Self.folio("list", "Task", "--page", "100000000000000000", socket: socket)
            #expect(farPage.status == 64 && farPage.stderr.contains("--page"), "\(farPage)")
            for interval in ["0", "5000"] {
                let top = try Self.folio("top", "--interval", interval, socket: socket)
                #expect(top.status == 64 && top.stderr.contains("--interval"), "\(top)")
            }
        }
    }

    @Test func withoutADaemonTheCLISaysHowToStartIt() throws {
        try withTemporaryDirectory { directory in
            let run = try Self.folio("stats", socket: directory + "/folio.sock")
            #expect(run.status != 0, "\(run)")
            #expect(run.stderr.contains("foliod is not running"), "\(run)")
            #expect(run.stderr.contains("start it with `foliod`"), "\(run)")
            #expect(run.stderr.contains(directory + "/folio.sock"), "names the socket it tried: \(run)")
        }
    }
}
