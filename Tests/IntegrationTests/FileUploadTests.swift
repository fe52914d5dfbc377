import CFolioSystem
import FolioClient
import FolioHarness
import FolioJSON
import FolioModel
import FolioProtocol
import FolioStore
import Foundation
import Glibc
import Testing

/// Uploads in pieces (`file.begin`, `file.write`, `file.commit`, `file.abort`) and descriptors
/// passed over the socket (`file.put {fd: true}`, `file.read {fd: true}`), against a real foliod.
@Suite struct FileUploadTests {
    typealias Files = FileStoreTests

    static func begin(_ connection: TestConnection, _ fields: JSONObject = [:]) throws -> String {
        var request = fields
        request["op"] = "file.begin"
        let begun = try connection.request(.object(request))
        return try #require(begun.result?["upload"]?.stringValue, "\(begun)")
    }

    static func write(_ connection: TestConnection, _ upload: String, _ offset: Int, _ bytes: ArraySlice<UInt8>) throws
        -> JSON
    {
        try connection.request([
            "op": "file.write", "upload": .string(upload), "offset": .int(Int64(offset)),
            "data": .string(Base64.encode(bytes)),
        ])
    }

    @Test func piecesOutOfOrderAndRetriedMakeTheSameFile() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let content = Files.randomBytes(1_300_000, seed: 21)
            let upload = try Self.begin(
                connection,
                [
                    "name": "video/a.mp4", "contentType": "video/mp4", "size": 1_300_000,
                    "sha256": .string(Files.sha256(content)),
                ])
            // Three pieces, the last first, the middle one twice.
            let last = try Self.write(connection, upload, 1_000_000, content[1_000_000...])
            #expect(last.result?["received"] == 300_000 && last.result?["length"] == 300_000, "\(last)")
            #expect(
                try Self.write(connection, upload, 500_000, content[500_000..<1_000_000]).result?["received"] == 800_000
            )
            #expect(
                try Self.write(connection, upload, 500_000, content[500_000..<1_000_000]).result?["received"]
                    == 800_000, "a retry changes nothing")
            let early = try connection.request(["op": "file.commit", "upload": .string(upload)])
            #expect(
                early.errorCode == "bad_request"
                    && early["error"]?["message"]?.stringValue?.contains("lacks bytes 0 to 500000") == true, "\(early)")
            #expect(try Self.write(connection, upload, 0, content[..<500_000]).result?["received"] == 1_300_000)
            let committed = try connection.request(["op": "file.commit", "upload": .string(upload)])
            let result = try #require(committed.result, "\(committed)")
            #expect(
                result["name"] == "video/a.mp4" && result["size"] == 1_300_000 && result["contentType"] == "video/mp4")
            #expect(result["sha256"] == .string(Files.sha256(content)))
            #expect(try Files.readBack(connection, "video/a.mp4").bytes == content)
            #expect(Files.temporaryFiles(daemon).isEmpty, "the upload's file became the blob")
            #expect(
                try connection.request(["op": "file.commit", "upload": .string(upload)]).errorCode == "not_found",
                "committed once")
            // The log has one file.put, as for an inline put.
            let events = try #require(try connection.request(["op": "events"]).result?["events"]?.arrayValue)
            #expect(events.map { $0["type"] } == ["file.put"])
        }
    }

    @Test func aCommitThatDoesNotMatchBindsNothingAndTheUploadStaysOpen() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let content = Files.randomBytes(10_000, seed: 22)
            let wrongHash = String(repeating: "0", count: 64)
            let upload = try Self.begin(connection, ["name": "x.bin", "sha256": .string(wrongHash)])
            #expect(try Self.write(connection, upload, 0, content[...]).isOK)
            let mismatch = try connection.request(["op": "file.commit", "upload": .string(upload)])
            #expect(
                mismatch.errorCode == "bad_request"
                    && mismatch["error"]?["message"]?.stringValue?.contains(Files.sha256(content)) == true,
                "\(mismatch)")
            #expect(try connection.request(["op": "file.get", "name": "x.bin"]).errorCode == "not_found")
            #expect(Files.blobs(daemon).isEmpty)
            #expect(try connection.request(["op": "file.abort", "upload": .string(upload)]).result?["aborted"] == true)
            #expect(Files.temporaryFiles(daemon).isEmpty)

            let sized = try Self.begin(connection, ["name": "y.bin", "size": 10])
            let past = try Self.write(connection, sized, 5, content[..<6])
            #expect(
                past.errorCode == "bad_request"
                    && past["error"]?["message"]?.stringValue?.contains("ends past 10 bytes") == true, "\(past)")
            #expect(try Self.write(connection, sized, 0, content[..<6]).isOK)
            let short = try connection.request(["op": "file.commit", "upload": .string(sized)])
            #expect(
                short.errorCode == "bad_request"
                    && short["error"]?["message"]?.stringValue?.contains("not the 10") == true, "\(short)")
            #expect(try Self.write(connection, sized, 6, content[6..<10]).isOK)
            #expect(try connection.request(["op": "file.commit", "upload": .string(sized)]).result?["size"] == 10)
            // A bound name without replace: the writer refuses it.
            let again = try Self.begin(connection, ["name": "y.bin"])
            #expect(try Self.write(connection, again, 0, content[..<3]).isOK)
            #expect(try connection.request(["op": "file.commit", "upload": .string(again)]).errorCode == "conflict")
            let bad = try connection.request([
                "op": "file.write", "upload": .string(sized), "offset": 0, "data": "aGk=",
            ])
            #expect(bad.errorCode == "not_found", "a committed upload is gone: \(bad)")
            let other = try Self.begin(connection)
            let base64 = try connection.request([
                "op": "file.write", "upload": .string(other), "offset": 0, "data": "aGk$",
            ])
            #expect(
                base64.errorCode == "bad_request"
                    && base64["error"]?["message"]?.stringValue?.contains("offset 3") == true, "\(base64)")
            let big = try connection.request(["op": "file.begin", "size": .int(Int64(2) << 30)])
            #expect(big.errorCode == "too_large", "\(big)")
        }
    }

    @Test func anUploadBelongsToItsConnectionAndEndsWithIt() throws {
        try withRunningDaemon { daemon in
            let first = try daemon.connect()
            let upload = try Self.begin(first, ["name": "mine.bin"])
            #expect(try Self.write(first, upload, 0, Files.randomBytes(1000, seed: 23)[...]).isOK)
            #expect(Files.temporaryFiles(daemon).count == 1)
            let second = try daemon.connect()
            #expect(try second.request(["op": "stats"]).result?["uploads"] == 1, "stats counts the open upload")
            #expect(
                try Self.write(second, upload, 1000, [1, 2, 3]).errorCode == "not_found",
                "another connection cannot touch it")
            #expect(try second.request(["op": "file.commit", "upload": .string(upload)]).errorCode == "not_found")
            first.close()
            let deadline = Date().addingTimeInterval(10)
            while !Files.temporaryFiles(daemon).isEmpty && Date() < deadline { usleep(20_000) }
            #expect(Files.temporaryFiles(daemon).isEmpty, "closing the connection removed the upload")
            #expect(try second.request(["op": "stats"]).result?["uploads"] == 0)
            #expect(try second.request(["op": "file.get", "name": "mine.bin"]).errorCode == "not_found")
            // At most 16 open per connection.
            for _ in 0..<16 { _ = try Self.begin(second) }
            #expect(try second.request(["op": "file.begin"]).errorCode == "too_large")
        }
    }

    @Test func anIdleUploadIsAbortedAfterTheTimeout() throws {
        try withRunningDaemon(arguments: ["--upload-timeout", "1"]) { daemon in
            let connection = try daemon.connect()
            let upload = try Self.begin(connection)
            #expect(try Self.write(connection, upload, 0, [1, 2, 3]).isOK)
            let deadline = Date().addingTimeInterval(15)
            while !Files.temporaryFiles(daemon).isEmpty && Date() < deadline { usleep(50_000) }
            #expect(Files.temporaryFiles(daemon).isEmpty, "\(daemon.log)")
            #expect(try connection.request(["op": "file.commit", "upload": .string(upload)]).errorCode == "not_found")
            #expect(daemon.log.contains("aborted 1 upload(s)"))
        }
    }

    /// kill -9 with uploads open and one being committed: after restart no temporary file, no half-
    /// bound name; the committed one, if its answer came, is there whole.
    @Test func killDuringUploadsLeavesNoHalfBoundNameAndNoLeakedBlob() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: ["--file-grace", "1"])
            defer { daemon.shutDown() }
            try daemon.start()
            let connection = try daemon.connect()
            let content = Files.randomBytes(2_000_000, seed: 24)
            let open = try Self.begin(connection, ["name": "open.bin"])
            #expect(try Self.write(connection, open, 0, content[..<500_000]).isOK)
            let committing = try Self.begin(connection, ["name": "committing.bin"])
            for start in stride(from: 0, to: content.count, by: 500_000) {
                #expect(try Self.write(connection, committing, start, content[start..<start + 500_000]).isOK)
            }
            try connection.send(["op": "file.commit", "upload": .string(committing)])
            daemon.killHard()
            #expect(Files.temporaryFiles(daemon).count <= 2)
            try daemon.start()
            #expect(Files.temporaryFiles(daemon).isEmpty, "\(daemon.log)")
            #expect(try daemon.request(["op": "file.get", "name": "open.bin"]).errorCode == "not_found")
            let committed = try daemon.request(["op": "file.get", "name": "committing.bin"])
            if committed.isOK {
                #expect(try Files.readBack(try daemon.connect(), "committing.bin").bytes == content)
            } else {
                #expect(committed.errorCode == "not_found")
                // A blob renamed into place whose event never committed goes after the grace period.
                let deadline = Date().addingTimeInterval(20)
                while !Files.blobs(daemon).isEmpty && Date() < deadline { usleep(100_000) }
                #expect(Files.blobs(daemon).isEmpty)
            }
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == true)
        }
    }

    /// A device out of space while a piece is written: `unavailable`; the upload stays open, so the
    /// piece can be sent again once there is room, and nothing is bound meanwhile.
    @Test func aFullDiskDuringAnUploadIsUnavailableAndThePieceCanBeSentAgain() throws {
        try withShimmedDaemon { daemon, shim in
            let connection = try daemon.connect()
            let content = Files.randomBytes(200_000, seed: 27)
            let upload = try Self.begin(connection, ["name": "full.bin", "size": 200_000])
            #expect(try Self.write(connection, upload, 0, content[..<100_000]).isOK)
            try shim.set(
                .init(calls: "write", nth: 1, error: "ENOSPC", sticky: true, path: daemon.dataDirectory + "/blobs"))
            let refused = try Self.write(connection, upload, 100_000, content[100_000...])
            #expect(
                refused.errorCode == "unavailable"
                    && refused["error"]?["message"]?.stringValue?.contains("storage is full") == true, "\(refused)")
            #expect(
                try connection.request(["op": "file.commit", "upload": .string(upload)]).errorCode == "bad_request",
                "a hole is left")
            #expect(Files.blobs(daemon).isEmpty)
            try shim.clear()
            #expect(try Self.write(connection, upload, 100_000, content[100_000...]).result?["received"] == 200_000)
            #expect(try connection.request(["op": "file.commit", "upload": .string(upload)]).isOK)
            #expect(try Files.readBack(connection, "full.bin").bytes == content)
        }
    }

    /// A crash inside a commit, before its blob is renamed into place or before its event commits:
    /// after restart the name is not bound, no temporary file is left, and a blob that made it into
    /// place without its event goes after the grace period.
    @Test(arguments: ["blob.beforeRename", "writer.beforeCommit"])
    func aCrashDuringACommitBindsNothingAndLeaksNothing(failpoint: String) throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory, arguments: ["--file-grace", "1"])
            defer { daemon.shutDown() }
            daemon.environment = ["FOLIO_FAILPOINTS": "\(failpoint)=crash"]
            try daemon.start()
            let connection = try daemon.connect()
            let content = Files.randomBytes(600_000, seed: 28)
            let upload = try Self.begin(connection, ["name": "crash.bin", "size": 600_000])
            #expect(try Self.write(connection, upload, 0, content[..<300_000]).isOK)
            #expect(try Self.write(connection, upload, 300_000, content[300_000...]).isOK)
            try connection.send(["op": "file.commit", "upload": .string(upload)])
            #expect(daemon.waitForExit(timeout: 30) == 86, "\(daemon.log)")
            daemon.environment = [:]
            try daemon.start()
            #expect(Files.temporaryFiles(daemon).isEmpty)
            #expect(try daemon.request(["op": "file.get", "name": "crash.bin"]).errorCode == "not_found")
            let deadline = Date().addingTimeInterval(20)
            while !Files.blobs(daemon).isEmpty && Date() < deadline { usleep(100_000) }
            #expect(Files.blobs(daemon).isEmpty, "no blob outlives the grace period without a name")
            #expect(try daemon.request(["op": "verify"]).result?["ok"] == true)
        }
    }

    @Test func aDescriptorPassedWithTheLineIsStoredAndOneComesBackForReading() throws {
        try withRunningDaemon { daemon in
            let content = Files.randomBytes(3_000_000, seed: 25)
            let path = daemon.directory + "/source.bin"
            try Data(content).write(to: URL(fileURLWithPath: path))
            let source = open(path, O_RDONLY | O_CLOEXEC)
            defer { close(source) }
            let client = try FolioConnection(path: daemon.socketPath, timeout: 30)
            defer { client.close() }
            try client.send(
                ["op": "file.put", "name": "passed.bin", "contentType": "application/x-test", "fd": true],
                passing: source)
            let put = try #require(try client.readJSON())
            #expect(
                put["result"]?["sha256"] == .string(Files.sha256(content)) && put["result"]?["size"] == 3_000_000,
                "\(put)")

            let read = try client.request(["op": "file.read", "name": "passed.bin", "fd": true])
            #expect(
                read["result"]?["size"] == 3_000_000 && read["result"]?["contentType"] == "application/x-test",
                "\(read)")
            let passed = try #require(client.takePassedDescriptor())
            defer { close(passed) }
            var bytes = [UInt8](repeating: 0, count: content.count + 1)
            let count = bytes.withUnsafeMutableBytes { pread(passed, $0.baseAddress!, $0.count, 0) }
            #expect(count == content.count && Array(bytes[..<count]) == content)
            #expect(fcntl(passed, F_GETFL) & O_ACCMODE == O_RDONLY, "read-only")
            #expect(Glibc.write(passed, [UInt8(1)], 1) < 0)

            // Pipelined: each line takes its own descriptor, in order.
            var sources: [Int32] = []
            defer { for fd in sources { close(fd) } }
            for index in 0..<10 {
                let piece = daemon.directory + "/piece-\(index).bin"
                try Data(Files.randomBytes(1000 + index, seed: 100 + UInt64(index))).write(
                    to: URL(fileURLWithPath: piece))
                sources.append(open(piece, O_RDONLY | O_CLOEXEC))
                try client.send(
                    ["op": "file.put", "name": .string("pipelined/\(index)"), "fd": true], passing: sources[index])
            }
            for index in 0..<10 {
                let answer = try #require(try client.readJSON())
                #expect(
                    answer["result"]?["name"] == .string("pipelined/\(index)")
                        && answer["result"]?["size"] == .int(Int64(1000 + index)), "\(answer)")
                #expect(
                    answer["result"]?["sha256"]
                        == .string(Files.sha256(Files.randomBytes(1000 + index, seed: 100 + UInt64(index)))))
            }

            // No descriptor with the line, a pipe, data and fd together: bad requests, nothing stored.
            let none = try client.request(["op": "file.put", "name": "none.bin", "fd": true])
            #expect(
                none.errorCode == "bad_request"
                    && none["error"]?["message"]?.stringValue?.contains("no descriptor") == true, "\(none)")
            var pipe: [Int32] = [0, 0]
            #expect(folio_pipe(&pipe) == 0)
            defer {
                close(pipe[0])
                close(pipe[1])
            }
            try client.send(["op": "file.put", "name": "pipe.bin", "fd": true], passing: pipe[0])
            let piped = try #require(try client.readJSON())
            #expect(
                piped.errorCode == "bad_request"
                    && piped["error"]?["message"]?.stringValue?.contains("not a regular file") == true, "\(piped)")
            #expect(try client.request(["op": "file.put", "data": "aGk=", "fd": true]).errorCode == "bad_request")
            #expect(
                try client.request(["op": "file.read", "name": "passed.bin", "fd": true, "offset": 1]).errorCode
                    == "bad_request")
            #expect(try client.request(["op": "file.read", "name": "nope", "fd": true]).errorCode == "not_found")
            #expect(client.takePassedDescriptor() == nil, "a failed read passes nothing")
        }
    }

    /// Reads that pass descriptors, sent in one write and so answered in one flush: each answer's
    /// line comes in a send of its own with its own descriptor, and the next answers are whole
    /// (foliod sent both lines with the first descriptor, kept the second at an offset of the old
    /// output, and then sent that many bytes of the next, shorter output).
    @Test func descriptorsPassedForPipelinedReadsEachComeWithTheirOwnLine() throws {
        try withRunningDaemon { daemon in
            let client = try FolioConnection(path: daemon.socketPath, timeout: 30)
            defer { client.close() }
            let contents = (0..<3).map { Files.randomBytes(5_000 + 1_000 * $0, seed: 40 + UInt64($0)) }
            for (index, content) in contents.enumerated() {
                let put = try client.request(
                    [
                        "op": "file.put", "name": .string("f\(index)"),
                        "data": .string(Data(content).base64EncodedString()),
                    ])
                #expect(put.errorCode == nil, "\(put)")
            }
            for round in 0..<3 {
                var lines: [UInt8] = []
                for index in contents.indices {
                    lines +=
                        JSON.object([
                            "op": "file.read", "name": .string("f\(index)"), "fd": true, "tag": .int(Int64(index)),
                        ])
                        .serialized() + [0x0A]
                }
                try client.send(bytes: lines)
                for (index, content) in contents.enumerated() {
                    let answer = try #require(try client.readJSON())
                    #expect(
                        answer["tag"] == .int(Int64(index)) && answer["result"]?["size"] == .int(Int64(content.count)),
                        "round \(round): \(answer)")
                    let passed = try #require(
                        client.takePassedDescriptor(), "round \(round): a descriptor for f\(index)")
                    defer { close(passed) }
                    var bytes = [UInt8](repeating: 0, count: content.count + 1)
                    let count = bytes.withUnsafeMutableBytes { pread(passed, $0.baseAddress!, $0.count, 0) }
                    #expect(
                        count == content.count && Array(bytes[..<max(0, count)]) == content,
                        "round \(round): f\(index)'s own content")
                }
                #expect(client.takePassedDescriptor() == nil)
                let hello = try client.request(["op": "hello", "tag": "h"])
                #expect(hello["tag"] == "h" && hello["result"]?["server"] == "foliod", "round \(round): \(hello)")
            }
        }
    }

    /// A put takes only the descriptor that came with its own line: a put refused before it took
    /// one (a bad name), and a put sent without one, shift nothing. (Descriptors were taken in
    /// arrival order by whichever put came next, so the put after a refused one stored the refused
    /// one's file under its own name and answered ok.)
    @Test func aPutTakesOnlyTheDescriptorThatCameWithItsLine() throws {
        try withRunningDaemon { daemon in
            var sources: [Int32] = []
            defer { for fd in sources { close(fd) } }
            var contents: [[UInt8]] = []
            for index in 0..<3 {
                let content = Files.randomBytes(2_000 + index, seed: 60 + UInt64(index))
                let path = daemon.directory + "/source-\(index).bin"
                try Data(content).write(to: URL(fileURLWithPath: path))
                sources.append(open(path, O_RDONLY | O_CLOEXEC))
                contents.append(content)
            }
            let client = try FolioConnection(path: daemon.socketPath, timeout: 30)
            defer { client.close() }
            try client.send(["op": "file.put", "name": "bad/../name", "fd": true, "tag": 1], passing: sources[0])
            try client.send(["op": "file.put", "name": "second", "fd": true, "tag": 2], passing: sources[1])
            try client.send(["op": "file.put", "name": "without", "fd": true, "tag": 3])
            try client.send(["op": "file.put", "name": "fourth", "fd": true, "tag": 4], passing: sources[2])
            var answers: [JSON] = []
            for _ in 0..<4 { answers.append(try #require(try client.readJSON())) }
            #expect(answers.map { $0["tag"] } == [1, 2, 3, 4], "\(answers)")
            #expect(answers[0].errorCode == "bad_request", "\(answers[0])")
            #expect(answers[1].result?["sha256"] == .string(Files.sha256(contents[1])), "\(answers[1])")
            #expect(
                answers[2].errorCode == "bad_request"
                    && answers[2]["error"]?["message"]?.stringValue?.contains("no descriptor") == true, "\(answers[2])")
            #expect(answers[3].result?["sha256"] == .string(Files.sha256(contents[2])), "\(answers[3])")
        }
    }

    /// Descriptors a client passes and no put takes are closed: foliod's own count stays bounded.
    @Test func descriptorsNoPutTakesAreNotKept() throws {
        try withRunningDaemon { daemon in
            let path = daemon.directory + "/some.bin"
            try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
            let source = open(path, O_RDONLY | O_CLOEXEC)
            defer { close(source) }
            let pid = try #require(daemon.pid)
            let before = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
            let client = try FolioConnection(path: daemon.socketPath, timeout: 30)
            for _ in 0..<50 { try client.send(["op": "hello"], passing: source) }
            for _ in 0..<50 { #expect(try client.readJSON()?.isOK == true) }
            let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
            #expect(held <= before + 1 + 16, "at most 16 held for the connection: \(before) -> \(held)")
            client.close()
            usleep(200_000)
            let after = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
            #expect(after <= before, "\(before) -> \(after)")
        }
    }

    /// The CLI passes a regular file's descriptor, sends stdin in pieces, and reads back either way.
    @Test func theCLIPutsByDescriptorAndInPiecesAndGetsBoth() throws {
        try withRunningDaemon { daemon in
            let environment = ["FOLIO_SOCKET": daemon.socketPath]
            let content = Files.randomBytes(1_500_000, seed: 26)
            let path = daemon.directory + "/in.bin"
            try Data(content).write(to: URL(fileURLWithPath: path))
            let byDescriptor = try CommandRun.run(
                Binaries.folio, ["file", "put", path, "--name", "a.bin"], environment: environment)
            #expect(byDescriptor.status == 0 && byDescriptor.stdout.contains(Files.sha256(content)), "\(byDescriptor)")
            let piped = try CommandRun.run(
                "/bin/sh", ["-c", "cat \"$1\" | \"$0\" file put - --name b.bin", Binaries.folio, path],
                environment: environment)
            #expect(piped.status == 0 && piped.stdout.contains(Files.sha256(content)), "\(piped)")
            let pieces = try CommandRun.run(
                Binaries.folio, ["file", "put", path, "--name", "c.bin", "--pieces"], environment: environment)
            #expect(pieces.status == 0 && pieces.stdout.contains(Files.sha256(content)), "\(pieces)")
            for (name, flags) in [("a.bin", [String]()), ("b.bin", ["--pieces"])] {
                let copy = daemon.directory + "/out-\(name)"
                let get = try CommandRun.run(
                    "/bin/sh",
                    ["-c", "\"$0\" file get \"$1\" $3 > \"$2\"", Binaries.folio, name, copy, flags.joined()],
                    environment: environment)
                #expect(get.status == 0, "\(get)")
                #expect(FileManager.default.contents(atPath: copy) == Data(content), "\(name)")
            }
            let toPipe = try CommandRun.run(
                "/bin/sh", ["-c", "\"$0\" file get a.bin | wc -c", Binaries.folio], environment: environment)
            #expect(toPipe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1500000", "\(toPipe)")
            #expect(Files.blobs(daemon).count == 1)
            // Standard input redirected from a file the shell has read part of: what is left of
            // it, as from a pipe. (It went by descriptor, and foliod read the file from its start.)
            let headed = daemon.directory + "/headed.txt"
            try "HEADER\nbody\n".write(toFile: headed, atomically: false, encoding: .utf8)
            let rest = try CommandRun.run(
                "/bin/bash",
                ["-c", "{ read -r _; \"$0\" file put - --name rest.txt; } < \"$1\"", Binaries.folio, headed],
                environment: environment)
            #expect(rest.status == 0, "\(rest)")
            let stored = try CommandRun.run(Binaries.folio, ["file", "get", "rest.txt"], environment: environment)
            #expect(stored.stdout == "body\n", "\(stored)")
        }
    }
}
