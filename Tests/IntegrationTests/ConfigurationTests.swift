import CFolioSystem
import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// The configuration file and its reloading, and access control by peer credentials with real
/// processes under other users.
@Suite struct ConfigurationTests {
    private func foliod(_ arguments: [String]) throws -> CommandRun {
        try Binaries.require()
        return try CommandRun.run(Binaries.foliod, arguments, timeout: 20)
    }

    @Test func aFileSetsWhatFlagsDoAndFlagsWin() throws {
        try withTemporaryDirectory { directory in
            let config = directory + "/foliod.conf"
            try """
            # limits
            max-line = 4096
            watch-buffer = 65536

            access.uid.65534 = read Task
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = RunningDaemon(directory: directory, arguments: ["--config", config, "--max-line=2048"])
            defer { daemon.shutDown() }
            try daemon.start()
            #expect(try daemon.request(["op": "hello"]).result?["maxLine"] == 2048)
        }
    }

    @Test(arguments: [
        ("max-line = lots", "foliod.conf:2: max-line takes an integer"),
        // Past 2^48 a value in seconds or milliseconds overflowed when foliod multiplied it.
        ("slow-request = 20000000000000000", "foliod.conf:2: slow-request takes an integer from 0 to"),
        ("colour = blue", "foliod.conf:2: unknown setting 'colour'"),
        ("just words", "foliod.conf:2: expected 'key = value'"),
        ("access.user.x = fly *", "foliod.conf:2: access.user.x: the value is 'ROLE COLLECTION...'"),
        ("durability = sometimes", "foliod.conf:2: durability takes full, relaxed or none"),
        ("journal = maybe", "foliod.conf:2: journal takes on or off"),
        (
            "journal = on\ndurability = relaxed",
            "journal on makes full durability cheaper; it does not go with durability relaxed"
        ),
    ])
    func badLinesStopStartUpNamingTheLine(line: String, message: String) throws {
        try withTemporaryDirectory { directory in
            let config = directory + "/foliod.conf"
            try "# first\n\(line)\n".write(toFile: config, atomically: true, encoding: .utf8)
            let run = try foliod(["--config", config, "--data", directory + "/data", "--socket", directory + "/s"])
            #expect(run.status == 64, "\(run)")
            #expect(run.stderr.contains(message), "\(run)")
        }
    }

    /// Full durability goes through the journal unless told otherwise; relaxed and none do not,
    /// and neither does `journal = off` (`stats.journal` is null without one).
    @Test(arguments: [
        ([], true), (["--journal", "on"], true), (["--journal", "off"], false), (["--durability", "full"], true),
        (["--durability", "relaxed"], false), (["--durability", "none"], false),
    ])
    func fullDurabilityJournalsByDefault(arguments: [String], journals: Bool) throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: arguments)
            defer { daemon.shutDown() }
            try daemon.start()
            _ = try daemon.request(["op": "create", "collection": "Task", "id": "t1", "data": ["n": 1]])
            let journal = try daemon.request(["op": "stats"]).result?["journal"]
            if journals {
                #expect(journal?["size"] == .int(8_388_608), "\(String(describing: journal))")
                #expect(
                    journal?["direct"] == .bool(Self.directWritesWork(in: directory)), "\(String(describing: journal))")
                #expect(FileManager.default.fileExists(atPath: daemon.dataDirectory + "/journal"))
            } else {
                #expect(journal == .null, "\(String(describing: journal))")
                #expect(!FileManager.default.fileExists(atPath: daemon.dataDirectory + "/journal"))
            }
            #expect(daemon.log.contains("through the journal") == journals, "\(daemon.log)")
        }
    }

    /// Whether a file in `directory` opens with `O_DIRECT` (tmpfs refuses it).
    static func directWritesWork(in directory: String) -> Bool {
        let path = directory + "/direct-probe"
        guard FileManager.default.createFile(atPath: path, contents: Data(count: 4096)) else { return false }
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = folio_open_direct_write(path)
        if file >= 0 { close(file) }
        return file >= 0
    }

    /// `FOLIO_JOURNAL_DIRECT=0` keeps the journal's records on the page cache, and says so.
    @Test func theJournalWritesThroughThePageCacheWhenToldTo() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            daemon.environment["FOLIO_JOURNAL_DIRECT"] = "0"
            defer { daemon.shutDown() }
            try daemon.start()
            _ = try daemon.request(["op": "create", "collection": "Task", "id": "t1", "data": ["n": 1]])
            let journal = try daemon.request(["op": "stats"]).result?["journal"]
            #expect(journal?["direct"] == .bool(false), "\(String(describing: journal))")
            #expect(journal?["checkpoints"] != nil)
        }
    }

    @Test func unknownFlagsAndMissingFilesAreRefused() throws {
        try withTemporaryDirectory { directory in
            let unknown = try foliod(["--colour", "blue"])
            #expect(unknown.status == 64 && unknown.stderr.contains("unknown option --colour"), "\(unknown)")
            let missing = try foliod(["--config", directory + "/nope.conf"])
            #expect(missing.status == 64 && missing.stderr.contains("cannot read the configuration file"), "\(missing)")
        }
    }

    /// SIGHUP applies the live settings (the policy, a limit, the log level) to connected clients
    /// and says which changed settings need a restart.
    @Test func sighupAppliesTheLiveSettings() throws {
        try withTemporaryDirectory { directory in
            let config = directory + "/foliod.conf"
            try "max-connections = 50\n".write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = RunningDaemon(directory: directory, arguments: ["--config", config])
            defer { daemon.shutDown() }
            try daemon.start()
            let connection = try daemon.connect()
            #expect(try connection.request(["op": "hello"]).isOK)
            try "max-connections = 2\nmax-line = 4096\nlog-level = info\nfile-max-size = 4\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            kill(daemon.pid!, SIGHUP)
            var reloaded = false
            for _ in 0..<600 where !reloaded {
                usleep(50_000)
                reloaded = daemon.log.contains("SIGHUP: configuration reloaded")
            }
            #expect(reloaded, "\(daemon.log)")
            #expect(daemon.log.contains("applied max-connections, log-level, file-max-size"), "\(daemon.log)")
            // file-max-size, marked reloadable, was ignored by a reload: an upload of 5 bytes is too large now.
            let big = try connection.request(["op": "file.begin", "size": 5])
            #expect(big["error"]?["message"]?.stringValue?.contains("(4 bytes, --file-max-size)") == true, "\(big)")
            #expect(daemon.log.contains("a restart is needed for max-line"), "\(daemon.log)")
            // The open connection goes on; a third one is refused by the new limit.
            #expect(try connection.request(["op": "hello"]).result?["maxLine"] == 1_048_576)
            let second = try daemon.connect()
            #expect(try second.request(["op": "hello"]).isOK)
            let third = try daemon.connect()
            #expect(try third.readJSON()?.errorCode == "unavailable")
            // A file that does not read keeps the running configuration.
            try "max-connections = many\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(daemon.pid!, SIGHUP)
            var refused = false
            for _ in 0..<600 where !refused {
                usleep(50_000)
                refused = daemon.log.contains("keeping the running one")
            }
            #expect(refused, "\(daemon.log)")
            #expect(try connection.request(["op": "hello"]).isOK)
        }
    }

    /// A client as another user: `folio` under setpriv, as nobody (uid 65534).
    private func folioAs(_ uid: Int, socket: String, _ arguments: String..., input: String? = nil) throws -> CommandRun
    {
        try CommandRun.run(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", Binaries.folio, "--socket", socket, "--json"]
                + arguments,
            environment: ["HOME": "/"], input: input.map { Array($0.utf8) })
    }

    private static let canSwitchUsers =
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

    /// A foliod whose configuration file holds `policy`, on a socket every user may open, in a
    /// directory every user may read: its daemon, directory and configuration file.
    private func withAccessPolicy(_ policy: String, _ body: (RunningDaemon, String, String) throws -> Void) throws {
        try withTemporaryDirectory { directory in
            chmod(directory, 0o755)
            let config = directory + "/foliod.conf"
            try policy.write(toFile: config, atomically: true, encoding: .utf8)
            let daemon = RunningDaemon(directory: directory, arguments: ["--config", config, "--socket-mode", "0666"])
            defer { daemon.shutDown() }
            try daemon.start()
            try body(daemon, directory, config)
        }
    }

    /// A live query needs read on its collection (a view's, for a view), and ends with forbidden
    /// when a reload takes that role away.
    @Test(.enabled(if: canSwitchUsers, "needs root and setpriv to run clients as another user"))
    func liveQueriesNeedReadOnTheirCollection() throws {
        try withAccessPolicy("access.uid.65534 = read Task\n") { daemon, directory, config in
            let socket = daemon.socketPath
            _ = try daemon.request(["op": "create", "collection": "Task", "id": "t1", "data": ["title": "mine"]])
            _ = try daemon.request(["op": "create", "collection": "Secret", "id": "s1", "data": ["title": "not mine"]])
            _ = try daemon.request(["op": "view.define", "name": "secrets", "collection": "Secret"])
            // An event watch of one collection needs read on it too (it was let in, and sent nothing).
            let events = try folioAs(65534, socket: socket, "watch", "--collection", "Secret")
            #expect(
                events.status == 1 && events.stderr.contains("watch needs role read on collection Secret"), "\(events)")
            // Dropping a view no one has defined needs admin on every collection: by the time the
            // writer drops it, it may have been defined on any (a reader's drop was let in).
            let drop = try folioAs(65534, socket: socket, "view", "drop", "notyet")
            #expect(
                drop.status == 1 && drop.stderr.contains("view.drop needs role admin on every collection"), "\(drop)")
            for arguments in [["watch", "Secret"], ["watch", "--view", "secrets"]] {
                let refused = try CommandRun.run(
                    "/usr/bin/setpriv",
                    ["--reuid=65534", "--regid=65534", "--clear-groups", Binaries.folio, "--socket", socket, "--json"]
                        + arguments,
                    environment: ["HOME": "/"])
                #expect(
                    refused.status == 1 && refused.stderr.contains("watch needs role read on collection Secret"),
                    "\(refused)")
            }
            let outputPath = directory + "/live.out"
            let errorPath = directory + "/live.err"
            let output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            let errors = open(errorPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { for fd in [output, errors, null] { close(fd) } }
            let watcher = try ChildProcess(
                executable: "/usr/bin/setpriv",
                arguments: [
                    "--reuid=65534", "--regid=65534", "--clear-groups", Binaries.folio, "--socket", socket, "--json",
                    "watch", "Task",
                ],
                environment: ["HOME": "/"], stdin: null, stdout: output, stderr: errors)
            defer { _ = watcher.killAndWait() }
            var started = false
            for _ in 0..<1500 where !started {
                usleep(20_000)
                started = fileText(outputPath).contains("\"watching\":true")
            }
            #expect(started)
            try "access.uid.65534 = read Note\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(daemon.pid!, SIGHUP)
            #expect(watcher.waitForExit(timeout: 10), "the live query ends when the role goes")
            let stderr = fileText(errorPath)
            #expect(stderr.contains("no longer lets this peer read collection Task"), "\(stderr)")
        }
    }

    /// A watch shows a peer a view's or a schema's event only if it may read that collection, live
    /// as in its catch-up from the log. (Live, every reader got every view definition, its `where`
    /// included, while a watch catching up left out those of collections it may not read.)
    @Test(.enabled(if: canSwitchUsers, "needs root and setpriv to run clients as another user"))
    func aWatchShowsViewEventsOnlyOfReadableCollections() throws {
        try withAccessPolicy("access.uid.65534 = read Task\n") { daemon, directory, _ in
            let socket = daemon.socketPath
            _ = try daemon.request(["op": "create", "collection": "Task", "id": "t1", "data": [:]])
            let outputPath = directory + "/events.out"
            let output = open(outputPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            let null = open("/dev/null", O_RDWR | O_CLOEXEC)
            defer { for fd in [output, null] { close(fd) } }
            let watcher = try ChildProcess(
                executable: "/usr/bin/setpriv",
                arguments: [
                    "--reuid=65534", "--regid=65534", "--clear-groups", Binaries.folio, "--socket", socket, "--json",
                    "watch", "--after", "1",
                ],
                environment: ["HOME": "/"], stdin: null, stdout: output, stderr: null)
            defer { _ = watcher.killAndWait() }
            var seen = ""
            for _ in 0..<500 where !seen.contains("\"t2\"") {
                // Until the watch is live: each round a new Task, then the definitions.
                _ = try daemon.request(["op": "create", "collection": "Task", "id": "t2", "data": [:]])
                usleep(20_000)
                seen = fileText(outputPath)
            }
            _ = try daemon.request([
                "op": "view.define", "name": "secrets", "collection": "Secret", "where": ["code": "1234"],
            ])
            _ = try daemon.request(["op": "view.define", "name": "tasks", "collection": "Task"])
            _ = try daemon.request(["op": "create", "collection": "Task", "id": "t3", "data": [:]])
            for _ in 0..<500 where !seen.contains("\"t3\"") {
                usleep(20_000)
                seen = fileText(outputPath)
            }
            #expect(seen.contains("\"t3\"") && seen.contains("\"tasks\""), "\(seen)")
            #expect(!seen.contains("secrets") && !seen.contains("1234"), "\(seen)")
        }
    }

    /// File ops need their role on the pseudo-collection $files.
    @Test(.enabled(if: canSwitchUsers, "needs root and setpriv to run clients as another user"))
    func fileOpsNeedTheirRoleOnFiles() throws {
        let policy = """
            access.uid.65534 = read $files
            access.uid.65533 = write $files
            access.uid.65532 = write Task
            """
        try withAccessPolicy(policy) { daemon, directory, _ in
            let photo = directory + "/photo.jpg"
            try "not really a jpeg".write(toFile: photo, atomically: true, encoding: .utf8)
            chmod(photo, 0o644)
            let socket = daemon.socketPath
            let put = try folioAs(65533, socket: socket, "file", "put", photo, "--name", "p.jpg")
            #expect(put.status == 0, "\(put)")
            let reader = try folioAs(65534, socket: socket, "file", "put", photo, "--name", "q.jpg")
            #expect(
                reader.status == 1 && reader.stderr.contains("file.put needs role write on collection $files"),
                "\(reader)")
            let listed = try folioAs(65534, socket: socket, "file", "ls")
            #expect(
                listed.status == 0 && listed.stdout.contains("p.jpg") && !listed.stdout.contains("q.jpg"), "\(listed)")
            #expect(try folioAs(65534, socket: socket, "file", "get", "p.jpg").stdout == "not really a jpeg")
            let other = try folioAs(65532, socket: socket, "file", "get", "p.jpg")
            #expect(other.status == 1 && other.stderr.contains("forbidden"), "\(other)")
            let remove = try folioAs(65534, socket: socket, "file", "rm", "p.jpg")
            #expect(remove.status == 1 && remove.stderr.contains("forbidden"), "\(remove)")
        }
    }

    /// Roles per collection, for a real process of another user (needs root to switch users).
    @Test(.enabled(if: canSwitchUsers, "needs root and setpriv to run clients as another user"))
    func rolesAreCheckedByPeerCredentials() throws {
        let policy = """
            access.uid.65534 = read Task
            access.uid.65534 = write Note
            """
        try withAccessPolicy(policy) { daemon, _, config in
            let admin = try daemon.connect()
            _ = try admin.request([
                "op": "create", "collection": "Task", "id": "t1",
                "data": ["title": "x", "owner": ["$ref": "Secret/s1"]],
            ])
            _ = try admin.request(["op": "create", "collection": "Secret", "id": "s1", "data": ["pin": 1234]])
            let socket = daemon.socketPath
            let hello = try JSONParser.parse(
                try folioAs(65534, socket: socket, "hello").stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(hello["uid"] == 65534 && hello["role"] == "write", "\(hello)")
            #expect(try folioAs(65534, socket: socket, "get", "Task", "t1").status == 0)
            let createTask = try folioAs(65534, socket: socket, "create", "Task", "title=no")
            #expect(createTask.status == 1 && createTask.stderr.contains("forbidden"), "\(createTask)")
            #expect(createTask.stderr.contains("create needs role write on collection Task"), "\(createTask)")
            #expect(try folioAs(65534, socket: socket, "create", "Note", "text=yes").status == 0)
            let secret = try folioAs(65534, socket: socket, "get", "Secret", "s1")
            #expect(secret.status == 1 && secret.stderr.contains("forbidden"), "\(secret)")
            // An included object of a collection it may not read stays a reference.
            let included = try folioAs(65534, socket: socket, "get", "Task", "t1", "--include", "owner")
            #expect(included.stdout.contains("\"$forbidden\":true") && !included.stdout.contains("1234"), "\(included)")
            // The log shows it only its collections, and says where to go on.
            let events = try JSONParser.parse(
                try folioAs(65534, socket: socket, "events").stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            let collections = Set(events["events"]?.arrayValue?.compactMap { $0["collection"]?.stringValue } ?? [])
            #expect(collections == ["Task", "Note"], "\(events)")
            #expect(events["next"] == events["lastSeq"])
            // Its export too: the readable events to the end of the log, then the end line.
            let export = try folioAs(65534, socket: socket, "export")
            let exported = export.jsonLines.dropLast().compactMap {
                try? JSONParser.parse($0)["collection"]?.stringValue
            }
            #expect(
                export.status == 0 && Set(exported) == ["Task", "Note"]
                    && export.jsonLines.last?.contains("\"end\":true") == true, "\(export)")
            for admin in ["verify", "stats"] {
                let run = try folioAs(65534, socket: socket, admin)
                if admin == "verify" { #expect(run.status == 1 && run.stderr.contains("forbidden"), "\(run)") }
                if admin == "stats" {
                    #expect(run.status == 0 && !run.stdout.contains("Secret") && !run.stdout.contains("lmdb"), "\(run)")
                }
            }
            let define = try folioAs(65534, socket: socket, "view", "define", "v", "Note")
            #expect(define.status == 1 && define.stderr.contains("admin"), "\(define)")
            // A user with no entry is not let in.
            let stranger = try folioAs(65533, socket: socket, "hello")
            // It gets one forbidden line, unless the close outran the CLI's read (then: closed).
            #expect(
                stranger.status == 1 && (stranger.stderr.contains("no role") || stranger.stderr.contains("closed")),
                "\(stranger)")
            // SIGHUP takes the write role away from a connected peer.
            try "access.uid.65534 = read Task Note\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(daemon.pid!, SIGHUP)
            var reloaded = false
            for _ in 0..<600 where !reloaded {
                usleep(50_000)
                reloaded = daemon.log.contains("applied access")
            }
            #expect(reloaded)
            let denied = try folioAs(65534, socket: socket, "create", "Note", "text=no more")
            #expect(denied.status == 1 && denied.stderr.contains("forbidden"), "\(denied)")
        }
    }

    @Test func backupsGoOnlyBelowTheBackupDirectory() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: ["--backup-dir", directory + "/backups"])
            defer { daemon.shutDown() }
            try daemon.start()
            _ = try daemon.request(["op": "create", "collection": "T", "data": [:]])
            let outside = try daemon.request(["op": "backup", "directory": .string(directory + "/elsewhere")])
            #expect(outside.errorCode == "forbidden", "\(outside)")
            let sneaky = try daemon.request(["op": "backup", "directory": .string(directory + "/backups/../elsewhere")])
            #expect(sneaky.errorCode == "forbidden", "\(sneaky)")
            let inside = try daemon.request(["op": "backup", "directory": .string(directory + "/backups/today")])
            #expect(inside.isOK, "\(inside)")
            var info = stat()
            #expect(stat(directory + "/backups/today/data.mdb", &info) == 0 && info.st_mode & 0o777 == 0o600)
            #expect(!FileManager.default.fileExists(atPath: directory + "/elsewhere"))
            // A link inside that leads outside: neither into it, nor below it, nor into a link to an
            // empty directory outside.
            try FileManager.default.createDirectory(atPath: directory + "/outside", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: directory + "/backups/link", withDestinationPath: directory + "/outside")
            for path in ["/backups/link", "/backups/link/b", "/backups/link/deep/er"] {
                let linked = try daemon.request(["op": "backup", "directory": .string(directory + path)])
                #expect(
                    linked.errorCode == "forbidden" && linked.errorMessage?.contains("symbolic link") == true,
                    "\(path): \(linked)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory + "/outside").isEmpty)
        }
    }
}
