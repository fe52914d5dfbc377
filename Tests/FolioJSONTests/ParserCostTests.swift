import FolioJSON
import Foundation
import Testing

/// Parsing costs time linear in the line for every shape a client can send. The bounds are loose
/// (tens of times what a run takes on a 2-core machine): they catch a return to quadratic work,
/// which took 75 s for one 429 KB object, not small slowdowns.
@Suite struct ParserCostTests {
    private func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = Date()
        try body()
        return Date().timeIntervalSince(start)
    }

    @Test func manyKeysParseInLinearTime() throws {
        let text = "{" + (0..<60_000).map { "\"key\($0)\":\($0)" }.joined(separator: ",") + "}"
        var parsed: JSON = .null
        let elapsed = try seconds { parsed = try JSONParser.parse(text) }
        #expect(elapsed < 3, "60,000 keys (\(text.utf8.count) bytes) took \(elapsed) s")
        guard case .object(let object) = parsed else {
            Issue.record("not an object")
            return
        }
        #expect(object.count == 60_000)
        #expect(object["key59999"] == .int(59_999))
        #expect(object["key60000"] == nil)
    }

    @Test func duplicateKeysAreFoundInLargeObjectsToo() {
        for position in [1, 12, 13, 5000] {
            var keys = (0..<6000).map { "\"k\($0)\":0" }
            keys.insert("\"k\(position - 1)\":1", at: 6000)
            #expect(throws: JSONError.self, "duplicate of key \(position - 1)") {
                try JSONParser.parse("{" + keys.joined(separator: ",") + "}")
            }
        }
    }

    @Test func escapesNumbersAndNestingCostLinearTime() throws {
        let escapes = "\"" + String(repeating: "\\u00e9\\n\\\"", count: 80_000) + "\""
        let digits = "1." + String(repeating: "7", count: 900_000)
        let nested = String(repeating: "{\"a\":[", count: 60) + "1" + String(repeating: "]}", count: 60)
        let elapsed = try seconds {
            _ = try JSONParser.parse(escapes)
            _ = try JSONParser.parse(digits)
            for _ in 0..<1000 { _ = try JSONParser.parse(nested) }
        }
        #expect(elapsed < 5, "took \(elapsed) s")
    }

    @Test func nestingBeyondTheLimitIsRefusedAtTheLimit() {
        let deep = String(repeating: "[", count: 500_000)
        do {
            _ = try JSONParser.parse(deep)
            Issue.record("500,000 open brackets parsed")
        } catch {
            #expect(error.message.contains("128"))
            #expect(error.offset == JSONParser.defaultMaxDepth)
        }
    }

    @Test(arguments: [
        "1e-400", "-1e-400", "0.0000000000000000000000000000000000000000000000001e-300", "1e400", "-1e400", "4e-325",
    ])
    func numbersBeyondADoubleEitherWayAreRefused(_ text: String) {
        #expect(throws: JSONError.self, "\(text)") { try JSONParser.parse(text) }
    }

    @Test func zeroesAndSubnormalsAreNumbers() throws {
        #expect(try JSONParser.parse("0e-400") == .double(0))
        #expect(try JSONParser.parse("-0.000e999") == .double(-0.0))
        #expect(try JSONParser.parse("5e-324") == .double(5e-324))
        #expect(try JSONParser.parse("1e-320") == .double(1e-320))
    }
}

@Suite struct JSONObjectIndexTests {
    /// Large objects keep a table of positions: reads, replacements, removals and appends behave
    /// exactly as on a small object.
    @Test func largeObjectsBehaveLikeSmallOnes() {
        for size in [3, JSONObject.indexThreshold, JSONObject.indexThreshold + 1, 200] {
            var object = JSONObject((0..<size).map { JSONObject.Field(key: "k\($0)", value: .int(Int64($0))) })
            var model = (0..<size).map { ("k\($0)", JSON.int(Int64($0))) }
            object["k1"] = "one"
            model[1].1 = "one"
            object["k0"] = nil
            model.remove(at: 0)
            object["new"] = true
            model.append(("new", true))
            object["k2"] = nil
            model.removeAll { $0.0 == "k2" }
            object["k2"] = 2.5
            model.append(("k2", 2.5))
            #expect(object.keys == model.map(\.0), "size \(size)")
            for (key, value) in model { #expect(object[key] == value, "size \(size), \(key)") }
            #expect(object["k0"] == nil)
            #expect(object == JSONObject(model.reversed().map { JSONObject.Field(key: $0.0, value: $0.1) }))
        }
    }
}
