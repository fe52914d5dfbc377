import FolioJSON
import Glibc
import Testing

/// `--max-line`: lines longer than the limit are refused without being kept whole in memory.
@Suite struct LineLimitTests {
    @Test func completeLineOverTheLimitIsTooLarge() throws {
        try withRunningDaemon(arguments: ["--max-line", "4096"]) { daemon in
            let connection = try daemon.connect()
            #expect(try connection.request(["op": "hello"]).result?["maxLine"] == 4096)
            let filler = String(repeating: "x", count: 10 * 1024)
            try connection.send(line: #"{"op":"create","collection":"T","tag":"big","data":{"text":"\#(filler)"}}"#)
            let response = try connection.readResponse()
            #expect(response.errorCode == "too_large", "\(response)")
            #expect(response.errorMessage?.contains("4096") == true, "the message names the limit: \(response)")

            // A line just under the limit is fine, on a new connection.
            let other = try daemon.connect()
            let fits = String(repeating: "y", count: 3900)
            let accepted = try other.request(["op": "create", "collection": "T", "data": ["text": .string(fits)]])
            #expect(accepted.result?["text"] == .string(fits), "\(accepted.errorMessage ?? "")")
            let stats = try other.request(["op": "stats"])
            #expect(stats.result?["lastSeq"] == 1, "the refused line stored nothing: \(stats)")
        }
    }

    /// The limit is the longest line accepted: a line of exactly `--max-line` bytes is taken, one more
    /// byte is too many. A CRLF ending is not part of the line, however the bytes arrive.
    @Test func lineOfExactlyTheLimitIsAccepted() throws {
        try withRunningDaemon(arguments: ["--max-line", "4096"]) { daemon in
            func line(ofLength length: Int) -> [UInt8] {
                let start = Array(#"{"op":"create","collection":"T","data":{"text":""#.utf8)
                let end = Array(#""}}"#.utf8)
                return start + [UInt8](repeating: UInt8(ascii: "w"), count: length - start.count - end.count) + end
            }
            let connection = try daemon.connect()
            try connection.send(bytes: line(ofLength: 4096) + [0x0A])
            let exact = try connection.readResponse()
            #expect(exact.version == 1, "a line of 4096 bytes with --max-line 4096: \(exact.errorMessage ?? "")")
            try connection.send(bytes: line(ofLength: 4097) + [0x0A])
            #expect(try connection.readResponse().errorCode == "too_large")

            let crlf = try daemon.connect()
            try crlf.send(bytes: line(ofLength: 4096) + [0x0D, 0x0A])
            let whole = try crlf.readResponse()
            #expect(whole.version == 1, "4096 bytes and CRLF in one write: \(whole.errorMessage ?? "")")

            // The same bytes with a pause before the LF, so foliod likely reads the line and its CR
            // before the LF arrives. (If it reads them together the test passes as above.)
            let split = try daemon.connect()
            try split.send(bytes: line(ofLength: 4096) + [0x0D])
            usleep(200_000)
            let sentLF = (try? split.send(bytes: [0x0A])) != nil
            let answer = try split.readResponse()
            #expect(answer.version == 1, "4096 bytes and CR, then LF: \(answer)")
            #expect(sentLF, "foliod closed the connection before the LF")
        }
    }

    /// 100 KB streamed with no newline: foliod answers too_large as soon as the partial line passes the
    /// limit (here: after 8 KB, while the line is still incomplete, so it did not wait for — or keep —
    /// the rest), then closes the connection, and serves everyone else as before.
    @Test func partialLinePastTheLimitIsRefusedAndTheConnectionClosed() throws {
        try withRunningDaemon(arguments: ["--max-line", "4096"]) { daemon in
            let bystander = try daemon.connect()
            #expect(try bystander.request(["op": "hello"]).isOK)

            let streaming = try daemon.connect()
            let start = [UInt8](#"{"op":"create","collection":"T","data":{"text":""#.utf8)
            let chunk = start + [UInt8](repeating: UInt8(ascii: "z"), count: 1024 - start.count)
            var sent = 0
            var sendFailed = false
            func stream(upTo total: Int) {
                while sent < total && !sendFailed {
                    do {
                        try streaming.send(
                            bytes: sent == 0 ? chunk : [UInt8](repeating: UInt8(ascii: "z"), count: 1024))
                        sent += 1024
                    } catch {
                        sendFailed = true  // foliod closed the connection: what it should do
                    }
                }
            }
            stream(upTo: 8 * 1024)
            #expect(
                streaming.waitReadable(timeout: 20), "no answer while the line is incomplete: foliod waits for the rest"
            )
            let response = try streaming.readResponse()
            #expect(response.errorCode == "too_large", "\(response)")
            #expect(response.errorMessage?.contains("4096") == true, "\(response)")

            stream(upTo: 100 * 1024)
            #expect(try streaming.readLine() == nil, "after too_large on a partial line foliod closes the connection")

            #expect(daemon.isRunning)
            #expect(try bystander.request(["op": "hello", "tag": 1])["tag"] == 1, "an open connection is still served")
            let newcomer = try daemon.connect()
            let created = try newcomer.request(["op": "create", "collection": "T", "data": ["n": 1]])
            #expect(created.version == 1, "a new connection is served: \(created)")
            #expect(try newcomer.request(["op": "stats"]).result?["lastSeq"] == 1)
        }
    }
}
