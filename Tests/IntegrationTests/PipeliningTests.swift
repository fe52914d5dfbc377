import FolioHarness
import FolioJSON
import Foundation
import Testing

/// Many requests on one connection, written before any answer is read.
@Suite struct PipeliningTests {
    /// A plain `get` with nothing before it on its connection is answered from its line (no
    /// `Request`, no `String`); the same line behind a write waits in the queue and is answered as
    /// any other request. Both answers must be the same bytes: found, not found, tags of each kind,
    /// data with escapes and non-ASCII text, every character an id may hold.
    @Test func aGetAnsweredFromItsLineIsTheQueuedGetByteForByte() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let data: [(String, JSON)] = [
                ("a-1", ["title": "plain"]),
                ("B_2.c:3", ["title": "tab\tquote\"back\\slash", "n": 1.5, "list": [1, "é", .null]]),
                ("x", [:]),
            ]
            for (id, fields) in data {
                #expect(
                    try connection.request(["op": "create", "collection": "Item", "id": .string(id), "data": fields])
                        .isOK)
            }
            let lines = [
                #"{"op":"get","collection":"Item","id":"a-1"}"#,
                #"{"op":"get","collection":"Item","id":"B_2.c:3","tag":"t"}"#,
                #"{"tag":17,"id":"x","collection":"Item","op":"get"}"#,
                #" { "op" : "get" , "collection" : "Item" , "id" : "a-1" , "tag" : 0 } "#,
                #"{"op":"get","collection":"Item","id":"missing","tag":"m"}"#,
                #"{"op":"get","collection":"Nothing","id":"a-1"}"#,
                #"{"op":"get","collection":"Item","id":"x","tag":123456789012345678}"#,
            ]
            for (index, line) in lines.enumerated() {
                try connection.send(line: line)
                let alone = try #require(try connection.readLine())
                let write = #"{"op":"create","collection":"Other","id":"w\#(index)","data":{}}"#
                try connection.send(bytes: Array((write + "\n" + line + "\n").utf8))
                #expect(try connection.readResponse().isOK)
                let queued = try #require(try connection.readLine())
                #expect(String(decoding: alone, as: UTF8.self) == String(decoding: queued, as: UTF8.self), "\(line)")
            }
        }
    }

    /// An event loop keeps its read snapshot through an iteration, and growing the map waits for
    /// kept snapshots to end: the map (1 MiB) must grow again and again while four connections
    /// pipeline gets without pause, and no get may fail or wait for long.
    @Test func theMapGrowsUnderPipelinedGets() throws {
        try withRunningDaemon(arguments: ["--map-size", "1048576"]) { daemon in
            let writer = try daemon.connect()
            for index in 0..<50 {
                #expect(
                    try writer.request([
                        "op": "create", "collection": "Item", "id": .string("k\(index)"),
                        "data": ["n": .int(Int64(index))],
                    ]).isOK)
            }
            let stop = Locked(false)
            let failures = Locked<[String]>([])
            let gets = Locked(0)
            let finished = DispatchSemaphore(value: 0)
            for _ in 0..<4 {
                nonisolated(unsafe) let connection = try daemon.connect()
                let batch: [UInt8] = (0..<32).flatMap { index -> [UInt8] in
                    Array(#"{"op":"get","collection":"Item","id":"k\#(index % 50)"}"#.utf8) + [0x0A]
                }
                Thread {
                    defer { finished.signal() }
                    do {
                        while !stop.current {
                            try connection.send(bytes: batch)
                            for _ in 0..<32 {
                                let answer = try connection.readResponse()
                                if !answer.isOK { failures.withLock { $0.append("\(answer)") } }
                            }
                            gets.withLock { $0 += 32 }
                        }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }.start()
            }
            defer { stop.withLock { $0 = true } }
            let payload = JSON.string(String(repeating: "z", count: 1000))
            let started = Date()
            while daemon.log.components(separatedBy: "map full: grew it").count - 1 < 3
                && Date().timeIntervalSince(started) < 60
            {
                let create: JSON = ["op": "create", "collection": "Filler", "data": ["p": payload]]
                try writer.send(bytes: (0..<16).flatMap { _ in create.serialized() + [0x0A] })
                for _ in 0..<16 { #expect(try writer.readResponse().isOK) }
            }
            stop.withLock { $0 = true }
            for _ in 0..<4 { #expect(finished.wait(timeout: .now() + 30) == .success, "a reader did not stop") }
            let grown = daemon.log.components(separatedBy: "map full: grew it").count - 1
            #expect(grown >= 3, "\(daemon.log)")
            #expect(failures.current.isEmpty, "\(failures.current.prefix(3))")
            #expect(gets.current > 1000)
            // The loops, idle now, must have ended the snapshots of their last gets before waiting:
            // the map grows once more with no read to end them.
            while daemon.log.components(separatedBy: "map full: grew it").count - 1 == grown
                && Date().timeIntervalSince(started) < 120
            {
                let create: JSON = ["op": "create", "collection": "Filler", "data": ["p": payload]]
                try writer.send(bytes: (0..<16).flatMap { _ in create.serialized() + [0x0A] })
                for _ in 0..<16 { #expect(try writer.readResponse().isOK) }
            }
            #expect(daemon.log.components(separatedBy: "map full: grew it").count - 1 > grown, "\(daemon.log)")
        }
    }

    /// 1,000 requests in one write: per object a create with a client-given id, a get of it (it must
    /// see the create: read-your-writes), and a get of the next id, not created yet (not_found: it must
    /// not see a later write) or a filtered count. The last is a hello. Answers come back in request
    /// order.
    @Test func thousandPipelinedRequestsAreAnsweredInOrder() throws {
        try withRunningDaemon { daemon in
            var requests: [JSON] = []
            for index in 0..<333 {
                requests.append([
                    "op": "create", "collection": "Item", "id": .string("p\(index)"), "tag": .string("c\(index)"),
                    "data": ["n": .int(Int64(index))],
                ])
                requests.append([
                    "op": "get", "collection": "Item", "id": .string("p\(index)"), "tag": .string("g\(index)"),
                ])
                if index % 10 == 9 {
                    // A filtered count scans the collection, off the event loop: it must still see
                    // every earlier write of this connection, and answer in its place.
                    requests.append([
                        "op": "count", "collection": "Item", "where": ["n": ["$gte": 0]],
                        "tag": .int(Int64(100_000 + index)),
                    ])
                } else {
                    requests.append([
                        "op": "get", "collection": "Item", "id": .string("p\(index + 1)"),
                        "tag": .int(Int64(100_000 + index)),
                    ])
                }
            }
            requests.append(["op": "hello", "tag": "last"])
            #expect(requests.count == 1000)

            var bytes: [UInt8] = []
            for request in requests { bytes += request.serialized() + [0x0A] }
            let connection = try daemon.connect()
            try connection.send(bytes: bytes)

            var responses: [JSON] = []
            for _ in requests { responses.append(try connection.readResponse()) }
            #expect(responses.map { $0["tag"] } == requests.map { $0["tag"] }, "answers come in request order")

            var wrong: [String] = []
            for index in 0..<333 {
                let created = responses[3 * index]
                let fetched = responses[3 * index + 1]
                let third = responses[3 * index + 2]
                if created.result?["id"] != .string("p\(index)") || created.version != 1 {
                    wrong.append("create p\(index): \(created)")
                }
                if fetched.result?["n"] != .int(Int64(index)) || fetched.result != created.result {
                    wrong.append("get after create of p\(index) on the same connection: \(fetched)")
                }
                if index % 10 == 9 {
                    if third.result?["count"] != .int(Int64(index + 1)) {
                        wrong.append("count after \(index + 1) creates: \(third)")
                    }
                } else if third.errorCode != "not_found" {
                    wrong.append("get before the create of p\(index + 1): \(third)")
                }
            }
            #expect(wrong.isEmpty, "\(wrong.count) wrong answers; the first: \(wrong.prefix(5))")
            #expect(responses.last?.result?["lastSeq"] == 333)
            #expect(try connection.request(["op": "count", "collection": "Item"]).result?["count"] == 333)
        }
    }

    /// Reads with nothing before them start at once, without a turn in the connection's queue; a
    /// line that fails to decode, a read that runs on a worker (a filtered count) and a write in
    /// between must still be answered in their place, and a get after the write must see it.
    @Test func readsStartingAtOnceStayInOrderAroundFailuresWorkersAndWrites() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            for index in 0..<20 {
                _ = try connection.request([
                    "op": "create", "collection": "Item", "id": .string("q\(index)"), "data": ["n": .int(Int64(index))],
                ])
            }
            var lines: [[UInt8]] = []
            var expected: [String] = []
            func get(_ id: String, _ tag: String) {
                lines.append(
                    JSON.object(["op": "get", "collection": "Item", "id": .string(id), "tag": .string(tag)])
                        .serialized())
                expected.append(tag)
            }
            for round in 0..<10 {
                for index in 0..<5 { get("q\(index + round)", "a\(round).\(index)") }
                // Not JSON: no tag comes back.
                lines.append(Array(#"{"op":"get","tag":"bad\#(round)","collection":"#.utf8))
                expected.append("-")
                for index in 0..<3 { get("q\(index)", "b\(round).\(index)") }
                lines.append(
                    JSON.object([
                        "op": "count", "collection": "Item", "where": ["n": ["$gte": 0]], "tag": .string("c\(round)"),
                    ]).serialized())
                expected.append("c\(round)")
                lines.append(
                    JSON.object([
                        "op": "create", "collection": "Item", "id": .string("w\(round)"),
                        "data": ["n": .int(Int64(100 + round))], "tag": .string("w\(round)"),
                    ]).serialized())
                expected.append("w\(round)")
                get("w\(round)", "r\(round)")
            }
            try connection.send(bytes: lines.flatMap { $0 + [0x0A] })
            var answers: [JSON] = []
            for _ in lines { answers.append(try connection.readResponse()) }
            let tags = answers.map { answer -> String in
                if case .string(let tag)? = answer["tag"] { return tag }
                return "-"
            }
            #expect(tags == expected, "answers in request order")
            for (answer, tag) in zip(answers, expected) {
                switch tag.first {
                case "-": #expect(answer.errorCode == "bad_request", "\(answer)")
                case "c": #expect(answer.result?["count"] != nil, "\(answer)")
                case "r":
                    #expect(
                        answer.result?["n"] != nil, "a get after a create on the same connection sees it: \(answer)")
                default: #expect(answer.errorCode == nil, "\(tag): \(answer)")
                }
            }
        }
    }
}
