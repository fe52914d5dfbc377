import FolioJSON
import Foundation
import Testing

@testable import FolioModel

@Suite struct FilterTests {
    let object = StoredObject(
        collection: "Student", id: "s1", version: 3, createdAt: Timestamp(milliseconds: 1_764_000_000_000),
        updatedAt: Timestamp(milliseconds: 1_764_000_100_000),
        data: [
            "name": "Kim", "stuId": 7, "score": 8.5, "tags": ["a", "b", 3], "address": ["city": "Oslo"],
            "born": ["$date": "2008-05-01T00:00:00Z"],
            "class": ["$ref": "Class/c1"], "nothing": .null, "active": true,
        ])

    private func matches(_ whereJSON: String) throws -> Bool {
        try Filter(parsing: try JSONParser.parse(whereJSON)).matches(object)
    }

    @Test(arguments: [
        (#"{"name": "Kim"}"#, true), (#"{"name": "kim"}"#, false), (#"{"stuId": 7.0}"#, true),
        (#"{"stuId": {"$eq": 7}}"#, true), (#"{"stuId": {"$ne": 7}}"#, false), (#"{"missing": {"$ne": 7}}"#, true),
        (#"{"stuId": {"$gt": 6}}"#, true), (#"{"stuId": {"$gt": 7}}"#, false), (#"{"stuId": {"$gte": 7}}"#, true),
        (#"{"stuId": {"$lt": 7.5}}"#, true), (#"{"stuId": {"$lte": 6}}"#, false),
        (#"{"stuId": {"$gt": 1, "$lt": 8}}"#, true),
        (#"{"stuId": {"$gt": "1"}}"#, false), (#"{"name": {"$gt": 5}}"#, false), (#"{"name": {"$gt": "J"}}"#, true),
        (#"{"stuId": {"$in": [1, 7]}}"#, true), (#"{"stuId": {"$in": []}}"#, false),
        (#"{"stuId": {"$nin": [1, 7]}}"#, false),
        (#"{"missing": {"$nin": [1]}}"#, true), (#"{"nothing": {"$exists": true}}"#, true),
        (#"{"missing": {"$exists": false}}"#, true),
        (#"{"nothing": null}"#, true), (#"{"missing": null}"#, false), (#"{"name": {"$prefix": "Ki"}}"#, true),
        (#"{"name": {"$prefix": "ki"}}"#, false), (#"{"stuId": {"$prefix": "7"}}"#, false),
        (#"{"tags": {"$contains": "b"}}"#, true),
        (#"{"tags": {"$contains": 3.0}}"#, true), (#"{"tags": {"$contains": "c"}}"#, false),
        (#"{"name": {"$contains": "K"}}"#, false),
        (#"{"tags": ["a", "b", 3]}"#, true), (#"{"tags": ["b", "a", 3]}"#, false), (#"{"address.city": "Oslo"}"#, true),
        (#"{"address": {"city": "Oslo"}}"#, true), (#"{"address.city.x": "Oslo"}"#, false),
        (#"{"born": {"$date": "2008-05-01T02:00:00+02:00"}}"#, true),
        (#"{"born": {"$gt": {"$date": "2008-01-01T00:00:00Z"}}}"#, true),
        (#"{"born": {"$gt": "2008"}}"#, false), (#"{"class": {"$ref": "Class/c1"}}"#, true),
        (#"{"class": "Class/c1"}"#, false),
        (#"{"active": {"$gt": false}}"#, true), (#"{"id": "s1"}"#, true), (#"{"version": {"$gte": 3}}"#, true),
        (#"{"createdAt": {"$lt": {"$date": "2026-01-01T00:00:00Z"}}}"#, true),
        (#"{"updatedAt": {"$gt": {"$date": "2025-11-24T16:01:39Z"}}}"#, true),
        (#"{"updatedAt": {"$gt": {"$date": "2025-11-24T16:01:40Z"}}}"#, false),
        (#"{"$or": [{"stuId": 8}, {"name": "Kim"}]}"#, true), (#"{"$or": [{"stuId": 8}, {"name": "Lee"}]}"#, false),
        (#"{"$and": [{"stuId": 7}, {"$or": [{"name": "Lee"}, {"score": {"$gte": 8}}]}]}"#, true),
        (#"{"stuId": 7, "name": "Lee"}"#, false),
    ])
    func operatorsAndTypeRules(whereJSON: String, expected: Bool) throws {
        #expect(try matches(whereJSON) == expected, "\(whereJSON)")
    }

    @Test(arguments: [
        (#"{"n": {"$gt": 1, "$bogus": 2}}"#, "$bogus"), (#"{"$nor": []}"#, "$nor"), (#"{"n": {"$in": 3}}"#, "$in"),
        (#"{"n": {"$exists": 1}}"#, "$exists"), (#"{"n": {"$prefix": 1}}"#, "$prefix"), (#"{"$or": []}"#, "$or"),
        (#"{"$and": {"a": 1}}"#, "$and"), (#"{"a..b": 1}"#, "a..b"), (#"{"_x": 1}"#, "_x"),
        (#"{"collection": "A"}"#, "collection"),
        (#"{"d": {"$date": "yesterday"}}"#, "$date"), (#"{"r": {"$ref": "nope"}}"#, "$ref"), (#"[1]"#, "object"),
        (#"{"$or": [1]}"#, "$or[0]"), (#"{"r.$ref": "A/1"}"#, "r.$ref"),
    ])
    func badQueriesNameTheOffendingPart(whereJSON: String, named: String) throws {
        do {
            _ = try Filter(parsing: try JSONParser.parse(whereJSON))
            Issue.record("accepted \(whereJSON)")
        } catch let error as ValidationError {
            #expect(error.message.contains(named), "\(error.message)")
        }
    }

    @Test func sortParsesDirectionsAndRejectsBadEntries() throws {
        let sort = try SortOrder(parsing: ["-stuId", "name", "+address.city"])
        #expect(
            sort.fields == [
                .init(.data(["stuId"]), descending: true), .init(.data(["name"])), .init(.data(["address", "city"])),
            ])
        #expect(try SortOrder(parsing: []) == .creation)
        #expect(throws: ValidationError.self) { try SortOrder(parsing: "name") }
        #expect(throws: ValidationError.self) { try SortOrder(parsing: [1]) }
        #expect(throws: ValidationError.self) { try SortOrder(parsing: ["a", "b", "c", "d", "e", "f", "g", "h", "i"]) }
    }

    private func condition(_ whereJSON: JSON) throws -> Filter.Condition {
        guard case .condition(_, let condition) = try Filter(parsing: whereJSON) else {
            throw ValidationError("not one condition")
        }
        return condition
    }

    /// `$in` and `$nin` keep their operands sorted and search them; they must answer as a pass over
    /// every operand would, for every kind of value.
    @Test func inAndNinMatchExactlyTheirOperands() throws {
        let operands: [JSON] = [
            3, 1.5, -7, "b", "a", .null, true, ["$date": "2026-11-30T01:41:09.675Z"], [1, 2], ["k": "v"],
            9_007_199_254_740_993, 2.0,
        ]
        let candidates: [JSON] =
            operands + [
                2, 4, "c", false, [1], ["k": "w"], 9_007_199_254_740_992, 1.0, ["$date": "2026-11-30T01:41:09.676Z"],
            ]
        let oneOf = try condition(["n": ["$in": .array(operands)]])
        let noneOf = try condition(["n": ["$nin": .array(operands)]])
        for candidate in candidates {
            let value = Value(candidate)
            let expected = operands.contains { Value($0) == value }
            #expect(oneOf.matches(value) == expected, "\(candidate) $in")
            #expect(noneOf.matches(value) == !expected, "\(candidate) $nin")
        }
        #expect(!oneOf.matches(nil))
        #expect(noneOf.matches(nil))
    }

    /// A `$in` as long as a line allows costs a search per object, not a pass over its operands: the
    /// pass took 10,000 objects times 100,000 operands.
    @Test func aLongInCostsASearchPerObject() throws {
        let oneOf = try condition(["n": ["$in": .array((0..<100_000).map { .int(Int64($0 * 2)) })]])
        let start = Date()
        var matched = 0
        for probe in 0..<10_000 where oneOf.matches(.int(Int64(probe * 20 + probe % 2))) { matched += 1 }
        let elapsed = Date().timeIntervalSince(start)
        #expect(matched == 5_000)
        #expect(elapsed < 5, "10,000 matches against 100,000 operands took \(elapsed) s")
    }

    /// Found by fuzzing: `["+-n"]` (field "-n", ascending) was written back as `["-n"]` (field "n",
    /// descending), so a view defined with it changed order when its definition was read back.
    @Test func sortWrittenOutReadsBackAsTheSameOrder() throws {
        for entries: JSON in [["+-n"], ["++n"], ["--n"], ["-+n"], ["+n", "-m"]] {
            let sort = try SortOrder(parsing: entries)
            #expect(try SortOrder(parsing: sort.json) == sort, "\(entries) written as \(sort.json)")
        }
        let view = try ViewDefinition(
            name: "v", collection: "C", whereJSON: nil, sort: SortOrder(parsing: ["+-n"]), unique: false)
        #expect(try ViewDefinition(parsing: view.json).sort == view.sort)
        #expect(try SortOrder(parsing: ["+-n"]).description != SortOrder(parsing: ["-n"]).description)
    }

    @Test func mixedDirectionSortKeysOrderTiesByID() {
        let sort = SortOrder([.init(.data(["a"]), descending: true), .init(.data(["b"]))])
        func key(_ a: Int64, _ b: String, _ id: String) -> [UInt8] {
            sort.key(
                for: StoredObject(
                    collection: "T", id: id, version: 1, createdAt: .init(milliseconds: 0),
                    updatedAt: .init(milliseconds: 0), data: ["a": .int(a), "b": .string(b)]), id: id)
        }
        let expected = [key(2, "x", "1"), key(1, "a", "1"), key(1, "a", "2"), key(1, "b", "0")]
        #expect(expected.sorted { $0.lexicographicallyPrecedes($1) } == expected)
    }
}

@Suite struct RecordRulesTests {
    @Test func reservedNamesAndTypedValuesAreChecked() throws {
        for bad: JSONObject in [
            ["id": 1], ["version": 1], ["createdAt": 1], ["$x": 1], ["_x": 1], ["": 1], ["a": ["$date": "x"]],
            ["a": ["$ref": "1x/2"]], ["a": ["$date": "2026-01-01T00:00:00Z", "b": 1]], ["a": [["$unknown": 1]]],
        ] {
            #expect(throws: ValidationError.self, "\(bad)") { try RecordData.validate(data: bad) }
        }
        try RecordData.validate(data: ["a": ["b": ["_fine": 1, "x.y": 2]], "when": ["$date": "2026-01-01T00:00:00Z"]])
    }

    @Test func mergePatchFollowsRFC7386AndKeepsTypedValuesWhole() {
        let target: JSONObject = ["a": "b", "c": ["d": "e", "f": "g"], "when": ["$date": "2026-01-01T00:00:00Z"]]
        let patch: JSONObject = ["a": "z", "c": ["f": .null], "when": ["$date": "2027-01-01T00:00:00Z"], "new": [1]]
        #expect(
            MergePatch.apply(patch, to: target) == [
                "a": "z", "c": ["d": "e"], "when": ["$date": "2027-01-01T00:00:00Z"], "new": [1],
            ])
        #expect(MergePatch.apply(["when": ["x": 1]], to: target)["when"] == ["x": 1])
    }

    @Test func namesFollowTheRules() {
        for good in ["Task", "a", "A_1", String(repeating: "x", count: 64)] {
            #expect((try? Names.validateCollection(good)) != nil)
        }
        for bad in ["", "1a", "_a", "a-b", "a b", String(repeating: "x", count: 65), "é"] {
            #expect(throws: ValidationError.self) { try Names.validateCollection(bad) }
        }
        for bad in ["", "a/b", "a b", String(repeating: "x", count: 129), "a\u{0}"] {
            #expect(throws: ValidationError.self) { try Names.validateID(bad) }
        }
    }
}

@Suite struct LargeInputTests {
    /// A merge patch is linear in both objects: 40,000 keys patched onto 40,000 keys at once.
    @Test func mergePatchOfManyKeysKeepsOrderAndIsFast() {
        let target = JSONObject((0..<40_000).map { JSONObject.Field(key: "k\($0)", value: .int(Int64($0))) })
        var fields = (0..<40_000).filter { $0 % 2 == 0 }.map {
            JSONObject.Field(key: "k\($0)", value: $0 % 4 == 0 ? .null : .string("x"))
        }
        fields += (0..<10).map { JSONObject.Field(key: "n\($0)", value: .int(Int64($0))) }
        let start = Date()
        let result = MergePatch.apply(JSONObject(fields), to: target)
        #expect(Date().timeIntervalSince(start) < 2)
        #expect(result.count == 30_010)
        #expect(result.keys.prefix(3) == ["k1", "k2", "k3"])
        #expect(result["k2"] == "x" && result["k4"] == nil && result["k5"] == 5)
        #expect(result.keys.suffix(2) == ["n8", "n9"])
    }

    /// Overlapping paths are found by sorting, not by comparing every pair.
    @Test func fieldOperationsOfManyPathsParseInLinearithmicTime() throws {
        let ops = JSON.object(JSONObject((0..<60_000).map { JSONObject.Field(key: "f\($0).n", value: ["$inc": 1]) }))
        let start = Date()
        let parsed = try FieldOperations(parsing: ops, beside: nil)
        #expect(Date().timeIntervalSince(start) < 3)
        #expect(parsed.entries.count == 60_000)
        #expect(throws: ValidationError.self) {
            try FieldOperations(parsing: ["a.b": ["$inc": 1], "a": ["$unset": true]], beside: nil)
        }
        let both = try FieldOperations(parsing: ["tags": ["$push": ["a"], "$pull": ["b"]]], beside: nil)
        #expect(try both.apply(to: ["tags": ["b", "c"]]) == ["tags": ["c", "a"]])
        #expect(both.json == ["tags": ["$push": ["a"], "$pull": ["b"]]])
    }

    @Test func datesCheckTheWrittenYear() throws {
        for text in [
            "0000-01-01T00:00:00+01:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00",
            "9999-12-31T23:59:59.999999999Z",
        ] {
            let parsed = try TypedValue.parse(["$date": .string(text)])
            #expect(parsed != nil, "\(text)")
        }
        #expect(throws: ValidationError.self) { try TypedValue.parse(["$date": "10000-01-01T00:00:00Z"]) }
        #expect(throws: ValidationError.self) { try TypedValue.parse(["$date": "-0001-01-01T00:00:00Z"]) }
    }
}

@Suite struct PageCursorTests {
    private let cursor = PageCursor(fingerprint: [1, 2, 3, 4, 5, 6, 7, 8], key: Array("a key with an id\u{0}x".utf8))

    @Test func tokensRoundTrip() throws {
        let decoded = try PageCursor(token: cursor.token)
        #expect(decoded == cursor)
    }

    /// Every single-character change of a token, and every truncation, is refused: a damaged cursor
    /// never resumes anywhere.
    @Test func everyDamagedTokenIsRefused() {
        let token = Array(cursor.token.utf8)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var accepted = 0
        for index in token.indices {
            for replacement in alphabet where replacement != token[index] {
                var damaged = token
                damaged[index] = replacement
                if (try? PageCursor(token: String(decoding: damaged, as: UTF8.self))) != nil { accepted += 1 }
            }
        }
        for length in 0..<token.count
        where (try? PageCursor(token: String(decoding: token[..<length], as: UTF8.self))) != nil {
            accepted += 1
        }
        #expect(accepted == 0)
    }

    @Test func randomBytesAreRefused() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 9, 17, 18, 40, 200] {
            for _ in 0..<200 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                #expect((try? PageCursor(token: Base64URL.encode(bytes))) == nil)
            }
        }
    }

    @Test func base64URLIsBase64WithTheURLAlphabetAndNoPadding() throws {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 151 &+ 7) }
            let expected = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.decode(expected) == bytes)
        }
    }
}
