import FolioJSON
import Foundation
import Testing

/// A request's tag comes back with its answer, unchanged: the same string, the same number.
@Suite struct TagEchoTests {
    static let stringTags = ["", "a", "42", "é 😀 \"q\" \\ \n", String(repeating: "t", count: 300)]
    static let numberTags = [
        "0", "7", "-1", "9007199254740993", "9223372036854775807", "-9223372036854775808", "0.5", "-2.25", "1e3",
        "12345678901234567890", "18446744073709551615",
    ]

    @Test func stringTagsAreEchoed() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            for tag in Self.stringTags {
                let response = try connection.request(["op": "hello", "tag": .string(tag)])
                #expect(response["tag"] == .string(tag), "\(response)")
                let failure = try connection.request([
                    "op": "get", "collection": "T", "id": "none", "tag": .string(tag),
                ])
                #expect(failure["tag"] == .string(tag) && failure.errorCode == "not_found", "\(failure)")
            }
        }
    }

    /// The number in the answer's tag has the value of the request's, digit for digit: a client that
    /// numbers its requests with 64-bit unsigned counters must find its own numbers again.
    @Test(arguments: numberTags)
    func numberTagsAreEchoedWithTheirExactValue(tag: String) throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            try connection.send(line: #"{"op":"hello","tag":\#(tag)}"#)
            let line = String(decoding: try #require(try connection.readLine()), as: UTF8.self)
            let prefix = #"{"tag":"#
            #expect(line.hasPrefix(prefix), "\(line)")
            let echoed = String(line.dropFirst(prefix.count).prefix { $0 != "," })
            #expect(Decimal(string: echoed) == Decimal(string: tag), "tag \(tag) came back as \(echoed)")
        }
    }
}
