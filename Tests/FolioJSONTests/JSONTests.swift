import FolioJSON
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKindOfValue() throws {
        let json = try JSONParser.parse(
            #" {"a": [1, -2, 3.5, 1e3, true, false, null, "x\n\u00e9\ud83d\ude00"], "b": {}} "#)
        #expect(json == ["a": [1, -2, 3.5, 1000.0, true, false, .null, "x\né😀"], "b": .object(JSONObject())])
    }

    @Test func keepsIntegersExactAndFallsBackToDoubles() throws {
        #expect(try JSONParser.parse("9223372036854775807") == .int(Int64.max))
        #expect(try JSONParser.parse("-9223372036854775808") == .int(Int64.min))
        #expect(try JSONParser.parse("9223372036854775808") == .double(9_223_372_036_854_775_808.0))
        #expect(try JSONParser.parse("1.0") == .double(1))
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "+1", "-", "1e", "tru", "nul", "\"abc", "\"\\x\"",
        "\"\\u12\"",
        "\"\\ud800\"", "\"\\udc00\"", "{\"a\" 1}", "{1: 2}", "[1 2]", "1 2", "NaN", "Infinity", "1e999",
        "{\"a\":1,\"a\":2}",
        "\"tab\there\"",
    ])
    func rejectsMalformedText(_ text: String) {
        #expect(throws: JSONError.self) { try JSONParser.parse(text) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONError.self) { try JSONParser.parse([0x22, 0xED, 0xA0, 0x80, 0x22]) }  // encoded surrogate
    }

    @Test func limitsNesting() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONError.self) { try JSONParser.parse(deep) }
        let fine = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        _ = try JSONParser.parse(fine)
    }

    @Test func errorsSayWhere() {
        do {
            _ = try JSONParser.parse(#"{"a": tru}"#)
            Issue.record("parsed invalid JSON")
        } catch {
            #expect(error.offset == 6)
        }
    }
}

@Suite struct JSONWriterTests {
    @Test func serializationRoundTripsByteForByte() throws {
        let texts = [
            #"{"b":1,"a":[true,null,"q\"\\\n\u0001é"],"c":{"d":-0.5,"e":1.0e-07}}"#,
            #"[1.5,100.0,-9223372036854775808,1e+300]"#,
        ]
        for text in texts {
            let once = try JSONParser.parse(text).serialized()
            let twice = try JSONParser.parse(once).serialized()
            #expect(once == twice)
        }
        #expect(String(decoding: JSON.string("a\u{1}\"").serialized(), as: UTF8.self) == #""a\u0001\"""#)
    }

    @Test func objectsKeepFieldOrderAndCompareWithoutIt() throws {
        let object = try JSONParser.parse(#"{"z":1,"a":2}"#)
        #expect(String(decoding: object.serialized(), as: UTF8.self) == #"{"z":1,"a":2}"#)
        #expect(object == (try JSONParser.parse(#"{"a":2,"z":1}"#)))
    }
}
