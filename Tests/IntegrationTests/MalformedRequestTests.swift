import FolioJSON
import Testing

/// Every kind of bad line gets a specific error, changes nothing, and leaves the connection usable.
@Suite struct MalformedRequestTests {
    struct BadLine: CustomStringConvertible {
        let name: String
        let bytes: [UInt8]
        let code: String
        /// Text the error message must contain: it names the problem.
        let mentions: [String]

        init(_ name: String, _ line: String, _ code: String = "bad_request", mentions: [String]) {
            self.init(name, Array(line.utf8), code, mentions: mentions)
        }

        init(_ name: String, _ bytes: [UInt8], _ code: String = "bad_request", mentions: [String]) {
            self.name = name
            self.bytes = bytes
            self.code = code
            self.mentions = mentions
        }

        var description: String { name }
    }

    static let badLines: [BadLine] = [
        BadLine("invalid JSON", #"{"op":"create","collection":"T","data":{"a":1}"#, mentions: ["invalid JSON"]),
        BadLine("trailing garbage", #"{"op":"hello"} x"#, mentions: ["invalid JSON"]),
        BadLine(
            "invalid UTF-8 in a string",
            Array(#"{"op":"create","collection":"T","data":{"title":""#.utf8) + [0xFF, 0xFE, 0xC3]
                + Array(#""}}"#.utf8),
            mentions: ["UTF-8"]),
        BadLine("empty line", "", mentions: ["empty"]),
        BadLine("a line of blanks", "   ", mentions: ["JSON"]),
        BadLine("an array", #"[{"op":"hello"}]"#, mentions: ["object", "array"]),
        BadLine("a string", #""hello""#, mentions: ["object", "string"]),
        BadLine("a number", "42", mentions: ["object", "number"]),
        BadLine("missing op", #"{"collection":"T","id":"a"}"#, mentions: ["\"op\""]),
        BadLine("op not a string", #"{"op":["get"]}"#, mentions: ["\"op\"", "string"]),
        BadLine("unknown op", #"{"op":"explode","collection":"T"}"#, "unknown_op", mentions: ["explode"]),
        BadLine("tag of the wrong type", #"{"op":"hello","tag":true}"#, mentions: ["tag"]),
        BadLine("tag an object", #"{"op":"hello","tag":{"a":1}}"#, mentions: ["tag"]),
        BadLine(
            "collection a number", #"{"op":"create","collection":5,"data":{"a":1}}"#,
            mentions: ["\"collection\"", "string"]),
        BadLine("data a string", #"{"op":"create","collection":"T","data":"a=1"}"#, mentions: ["\"data\"", "object"]),
        BadLine(
            "patch an array", #"{"op":"update","collection":"T","id":"a","patch":[1]}"#,
            mentions: ["\"patch\"", "object"]),
        BadLine(
            "ifVersion negative", #"{"op":"delete","collection":"T","id":"a","ifVersion":-1}"#, mentions: ["ifVersion"]),
        BadLine(
            "ifVersion a string", #"{"op":"update","collection":"T","id":"a","patch":{"a":2},"ifVersion":"1"}"#,
            mentions: ["ifVersion"]),
        BadLine(
            "ifVersion a fraction", #"{"op":"delete","collection":"T","id":"a","ifVersion":1.5}"#,
            mentions: ["ifVersion"]),
        BadLine("limit too large", #"{"op":"list","collection":"T","limit":5000}"#, mentions: ["limit", "5000"]),
        BadLine("limit negative", #"{"op":"events","limit":-1}"#, mentions: ["limit"]),
        BadLine("order unknown", #"{"op":"list","collection":"T","order":"up"}"#, mentions: ["order"]),
        BadLine("missing collection", #"{"op":"create","data":{"a":1}}"#, mentions: ["\"collection\""]),
        BadLine("missing data", #"{"op":"create","collection":"T"}"#, mentions: ["\"data\""]),
        BadLine("missing id", #"{"op":"get","collection":"T"}"#, mentions: ["\"id\""]),
        BadLine("missing patch", #"{"op":"update","collection":"T","id":"a"}"#, mentions: ["\"patch\""]),
        BadLine("reserved $x", #"{"op":"create","collection":"T","data":{"$x":1}}"#, mentions: ["$x", "reserved"]),
        BadLine(
            "reserved _x", #"{"op":"create","collection":"T","data":{"ok":1,"_x":1}}"#, mentions: ["_x", "reserved"]),
        BadLine(
            "reserved id", #"{"op":"create","collection":"T","data":{"id":"mine"}}"#, mentions: ["\"id\"", "reserved"]),
        BadLine(
            "reserved version", #"{"op":"create","collection":"T","data":{"version":9}}"#,
            mentions: ["version", "reserved"]),
        BadLine(
            "reserved createdAt", #"{"op":"create","collection":"T","data":{"createdAt":"2020-01-01T00:00:00Z"}}"#,
            mentions: ["createdAt", "reserved"]),
        BadLine(
            "reserved updatedAt in a patch", #"{"op":"update","collection":"T","id":"a","patch":{"updatedAt":1}}"#,
            mentions: ["updatedAt", "reserved"]),
        BadLine(
            "reserved collection", #"{"op":"create","collection":"T","data":{"collection":"U"}}"#,
            mentions: ["collection", "reserved"]),
        BadLine(
            "collection starting with a digit", #"{"op":"create","collection":"1abc","data":{"a":1}}"#,
            mentions: ["1abc"]),
        BadLine(
            "collection of 65 letters", #"{"op":"get","collection":"\#(String(repeating: "a", count: 65))","id":"a"}"#,
            mentions: ["collection", "64"]),
        BadLine("collection with a dash", #"{"op":"list","collection":"my-things"}"#, mentions: ["my-things"]),
        BadLine("id with a space", #"{"op":"get","collection":"T","id":"a b"}"#, mentions: ["id", "a b"]),
        BadLine(
            "id with a slash", #"{"op":"create","collection":"T","id":"a/b","data":{"a":1}}"#, mentions: ["id", "a/b"]),
        BadLine("empty id", #"{"op":"delete","collection":"T","id":""}"#, mentions: ["id"]),
        BadLine(
            "id of 129 characters", #"{"op":"get","collection":"T","id":"\#(String(repeating: "x", count: 129))"}"#,
            mentions: ["id", "128"]),
        BadLine("unknown extra field", #"{"op":"get","collection":"T","id":"a","colour":"red"}"#, mentions: ["colour"]),
        BadLine(
            "unknown extra field on a write", #"{"op":"create","collection":"T","data":{"a":1},"upsert":true}"#,
            mentions: ["upsert"]),
        BadLine(
            "duplicate key", #"{"op":"create","collection":"T","collection":"U","data":{"a":1}}"#,
            mentions: ["invalid JSON"]),
        BadLine(
            "JSON nested 10,000 levels deep",
            #"{"op":"create","collection":"T","data":{"deep":"# + String(repeating: "[", count: 10_000)
                + String(repeating: "]", count: 10_000)
                + "}}",
            mentions: ["nesting"]),
        BadLine(
            "objects nested 10,000 levels deep",
            String(repeating: #"{"a":"#, count: 10_000) + "1" + String(repeating: "}", count: 10_000),
            mentions: ["nesting"]),
    ]

    @Test func badLinesGetClearErrorsAndTheConnectionStaysUsable() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let created = try connection.request(["op": "create", "collection": "T", "id": "a", "data": ["a": 1]])
            #expect(created.version == 1)
            let before = try #require(try connection.request(["op": "stats"]).result)

            for (index, bad) in Self.badLines.enumerated() {
                try connection.send(bytes: bad.bytes + [0x0A])
                let response = try connection.readResponse()
                #expect(response.errorCode == bad.code, "\(bad.name): \(response)")
                let message = response.errorMessage ?? ""
                for text in bad.mentions {
                    #expect(message.contains(text), "\(bad.name): the message should mention \(text): \(message)")
                }
                let hello = try connection.request(["op": "hello", "tag": .int(Int64(index))])
                #expect(hello.isOK && hello["tag"] == .int(Int64(index)), "after \(bad.name), hello answered \(hello)")
            }

            #expect(daemon.isRunning)
            let after = try #require(try connection.request(["op": "stats"]).result)
            #expect(after["lastSeq"] == before["lastSeq"], "no event from bad lines: \(after)")
            #expect(after["chainHead"] == before["chainHead"])
            #expect(after["objects"] == before["objects"])
            #expect(after["committedWrites"] == before["committedWrites"])
            #expect(try connection.request(["op": "get", "collection": "T", "id": "a"]).result == created.result)
            #expect(try connection.request(["op": "count", "collection": "U"]).result?["count"] == 0)
        }
    }

    /// The tag of a request that is bad in a field (not in its JSON) comes back with the error.
    @Test func errorsEchoTheTagWhenTheLineHadOne() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let lines = [
                #"{"op":"get","collection":"T","id":"a b","tag":"t1"}"#,
                #"{"op":"nope","tag":17}"#,
                #"{"tag":"t3"}"#,
                #"{"op":"create","collection":"T","data":{"_x":1},"tag":"t4"}"#,
            ]
            let expected: [JSON] = ["t1", 17, "t3", "t4"]
            try connection.send(bytes: Array(lines.joined(separator: "\n").utf8) + [0x0A])
            for tag in expected {
                let response = try connection.readResponse()
                #expect(!response.isOK && response["tag"] == tag, "\(response)")
            }
        }
    }
}
