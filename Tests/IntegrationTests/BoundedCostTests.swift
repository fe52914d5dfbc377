import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// No request holds up other clients: every costly shape of request a client can send goes on one
/// connection while another connection of the same event loop (`--threads 1`) sends `hello` after
/// `hello`; the p99 of those stays under 50 ms.
///
/// A timing test: it runs only with `FOLIO_TIMING_TESTS=1`, which `make test` sets when it runs it on
/// its own after the other tests, so that their load does not count against it.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["FOLIO_TIMING_TESTS"] == "1"))
struct BoundedCostTests {
    private static func line(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Each shape, with whether it must succeed.
    private static func costlyRequests(middleSequence: Int64, middleTime: String) -> [(
        name: String, line: [UInt8], ok: Bool
    )] {
        let keys = (0..<60_000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let half = (0..<30_000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let nested = String(repeating: "{\"a\":", count: 120) + "1" + String(repeating: "}", count: 120)
        return [
            (
                "an object of 60,000 keys",
                line(#"{"op":"create","collection":"Wide","id":"w","data":{"# + keys + "}}"), true
            ),
            (
                "a patch of 60,000 keys onto them",
                line(
                    #"{"op":"update","collection":"Wide","id":"w","patch":{"#
                        + keys.replacingOccurrences(of: ":", with: ":-") + "}}"), true
            ),
            (
                "the same keys twice", line(#"{"op":"create","collection":"Wide","data":{"# + half + "," + half + "}}"),
                false
            ),
            ("nesting at the limit", line(#"{"op":"create","collection":"Deep","data":{"d":"# + nested + "}}"), true),
            ("nesting far past it", line(String(repeating: "[", count: 900_000)), false),
            (
                "a number of 900,000 digits",
                line(
                    #"{"op":"create","collection":"Num","data":{"n":1."# + String(repeating: "7", count: 900_000) + "}}"
                ), true
            ),
            (
                "a line of escapes",
                line(
                    #"{"op":"create","collection":"Esc","data":{"s":""#
                        + String(repeating: "\\u00e9\\n", count: 120_000) + "\"}}"), true
            ),
            ("history of 30,000 versions", line(#"{"op":"history","collection":"Doc","id":"d","limit":1000}"#), true),
            (
                "history from the middle",
                line(#"{"op":"history","collection":"Doc","id":"d","after":\#(middleSequence),"limit":1000}"#), true
            ),
            (
                "atSeq in the middle", line(#"{"op":"get","collection":"Doc","id":"d","atSeq":\#(middleSequence)}"#),
                true
            ),
            ("asOf in the middle", line(#"{"op":"get","collection":"Doc","id":"d","asOf":"\#(middleTime)"}"#), true),
            (
                "a scan",
                line(#"{"op":"list","collection":"Big","where":{"n":{"$gte":5000}},"sort":["-n"],"limit":1000}"#), true
            ),
            ("a counting scan", line(#"{"op":"count","collection":"Big","where":{"n":{"$exists":true}}}"#), true),
            ("a deep offset", line(#"{"op":"list","collection":"Big","offset":9990,"limit":1000}"#), true),
            ("a page of 1000 events", line(#"{"op":"events","after":0,"limit":1000}"#), true),
            ("stats", line(#"{"op":"stats"}"#), true),
            ("view.list", line(#"{"op":"view.list"}"#), true),
            ("verify", line(#"{"op":"verify"}"#), true),
        ]
    }

    @Test func costlyRequestsDoNotHoldUpAnotherConnection() throws {
        try withRunningDaemon(arguments: ["--threads", "1"]) { daemon in
            let setup = try daemon.connect(timeout: 60)
            _ = try setup.request(["op": "create", "collection": "Doc", "id": "d", "data": ["v": 0]])
            for chunk in 0..<30 {
                for index in 0..<1000 {
                    try setup.send([
                        "op": "update", "collection": "Doc", "id": "d",
                        "patch": ["v": .int(Int64(chunk * 1000 + index)), "k\(index % 50)": true],
                    ])
                }
                for _ in 0..<1000 { #expect(try setup.readResponse().isOK) }
            }
            for index in 0..<10_000 {
                try setup.send(["op": "create", "collection": "Big", "data": ["n": .int(Int64(index))]])
            }
            for _ in 0..<10_000 { #expect(try setup.readResponse().isOK) }
            let history = try setup.request([
                "op": "history", "collection": "Doc", "id": "d", "after": 15_000, "limit": 1,
            ])
            let middle = history.result?["events"]?.arrayValue?.first
            let middleSequence = middle?["seq"]?.integerValue ?? 0
            let middleTime = middle?["at"]?.stringValue ?? ""
            #expect(middleSequence > 0)

            let latencies = Locked<[Double]>([])
            let stop = Locked(false)
            nonisolated(unsafe) let pinger = try daemon.connect(timeout: 10)
            let thread = Thread {
                while !stop.current {
                    let start = Date()
                    guard (try? pinger.request(["op": "hello"]))?.isOK == true else { return }
                    latencies.withLock { $0.append(Date().timeIntervalSince(start)) }
                    usleep(1000)
                }
            }
            thread.start()
            usleep(200_000)
            let costly = try daemon.connect(timeout: 120)
            for request in Self.costlyRequests(middleSequence: middleSequence, middleTime: middleTime) {
                try costly.send(bytes: request.line + [0x0A])
                let answer = try costly.readResponse()
                #expect(answer.isOK == request.ok, "\(request.name): \(String(describing: answer.errorMessage))")
                if request.ok && request.name.hasPrefix("history") {
                    #expect(answer.result?["events"]?.arrayValue?.count == 1000, "\(request.name)")
                }
            }
            usleep(200_000)
            stop.withLock { $0 = true }
            while !thread.isFinished { usleep(10_000) }
            let sorted = latencies.current.sorted()
            #expect(sorted.count > 100, "only \(sorted.count) hellos were answered")
            let p99 = sorted.isEmpty ? .infinity : sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
            let summary = "hello p99 \(p99 * 1000) ms over \(sorted.count) hellos (max \((sorted.last ?? 0) * 1000) ms)"
            print("BoundedCostTests: \(summary)")
            #expect(p99 < 0.050, "\(summary)")
        }
    }
}
