import FolioJSON
import Testing

@testable import FolioModel

@Suite struct ValueOrderTests {
    /// One value of each kind, in the documented total order.
    static let ordered: [JSON] = [
        .null, false, true, -1e300, -5, -1.5, 0, 1, 1.5, 9_007_199_254_740_993, 1e300,
        "", "A", "Z", "a", "ab", "b", "é", "😀",
        ["$date": "1969-12-31T23:59:59Z"], ["$date": "2026-01-01T00:00:00Z"], ["$date": "2026-01-01T00:00:00.001Z"],
        ["$ref": "A/1"], ["$ref": "Task/1"], ["$ref": "Task/2"],
        [], [1], [1, 2], [2], ["a"],
        .object(JSONObject()), ["a": 1], ["a": 2], ["b": 0],
    ]

    @Test func theTotalOrderSpansAllKinds() {
        let values = Self.ordered.map(Value.init)
        for i in values.indices {
            for j in values.indices {
                #expect((Value.compare(values[i], values[j]) < 0) == (i < j), "\(values[i]) vs \(values[j])")
            }
        }
        #expect(Value.compare(nil, .null) < 0, "missing sorts first")
    }

    /// Strings compare by their bytes, as their keys do, also where Swift's `==` holds them equal:
    /// canonically equivalent strings (U+2000 and U+2002; "é" composed and decomposed; the pair
    /// the `query` fuzz target found, fuzz/regressions/query/canonically-equivalent-strings) are
    /// different values, in the order of their bytes, and an equality filter on one does not
    /// match the other, as a view's range of keys would not.
    @Test func canonicallyEquivalentStringsAreDifferentValues() throws {
        let pairs: [(String, String)] = [
            ("A\u{2000}v*rsi.n-t", "A\u{2002}v*rsi.n-t"), ("\u{E9}", "e\u{301}"), ("\u{212B}", "\u{C5}"),
            ("Å", "A\u{30A}"),
        ]
        for (a, b) in pairs {
            #expect(
                a == b, "Swift's == holds \(a.unicodeScalars.map(\.value)) and \(b.unicodeScalars.map(\.value)) equal")
            let order = Array(a.utf8).lexicographicallyPrecedes(Array(b.utf8)) ? -1 : 1
            #expect(Value.compare(.string(a), .string(b)) == order)
            #expect(Value.compare(.string(b), .string(a)) == -order)
            #expect(Value.string(a) != Value.string(b))
            #expect(Value.compare(.reference(a), .reference(b)) == order)
            var keyA: [UInt8] = []
            var keyB: [UInt8] = []
            SortKey.append(json: .string(a), descending: false, to: &keyA)
            SortKey.append(json: .string(b), descending: false, to: &keyB)
            #expect((keyA.lexicographicallyPrecedes(keyB) ? -1 : 1) == order)
            // Field names too: objects whose keys differ so compare as their keys' bytes.
            #expect(Value.compare(Value(["\(a)": 1] as JSON), Value(["\(b)": 1] as JSON)) == order)

            let filter = try #require(try Filter.parse(optional: ["name": .string(a)]).filter)
            let holding = { (name: String) in
                StoredObject(
                    collection: "c", id: "x", version: 1, createdAt: Timestamp(milliseconds: 0),
                    updatedAt: Timestamp(milliseconds: 0),
                    data: ["name": .string(name)])
            }
            #expect(filter.matches(holding(a)))
            #expect(
                !filter.matches(holding(b)),
                "{name: \(a.unicodeScalars.map(\.value))} matched \(b.unicodeScalars.map(\.value))")
        }
    }

    /// A key made straight from JSON (a view's key of every write) is the key of its `Value`, in
    /// both directions, for every kind, zeros of both spellings, a string with a 0 byte, and a
    /// missing value.
    @Test func sortKeysFromJSONAreThoseOfTheirValues() {
        let cases: [JSON?] =
            Self.ordered.map { $0 } + [.double(0), .double(-0.0), .int(0), "a\u{0}b", .int(Int64.min), nil]
        for json in cases {
            for descending in [false, true] {
                var direct: [UInt8] = [7]
                var made: [UInt8] = [7]
                SortKey.append(json: json, descending: descending, to: &direct)
                SortKey.append(json.map(Value.init), descending: descending, to: &made)
                #expect(direct == made, "\(String(describing: json)), descending \(descending)")
            }
        }
    }

    /// An object's own fields (id, version, times) keyed straight from the object are the keys of
    /// their `Value`s, in both directions, for times before and after 1970 and at every millisecond.
    @Test func sortKeysOfAnObjectsOwnFieldsAreThoseOfTheirValues() {
        for milliseconds: Int64 in [0, 1, -1, 999, -1001, 1_764_979_200_123, -62_135_596_800_000, 253_402_300_799_999] {
            let object = StoredObject(
                collection: "c", id: "01KBT0Z8\u{0}X", version: UInt64(milliseconds.magnitude % 1000 + 1),
                createdAt: Timestamp(milliseconds: milliseconds), updatedAt: Timestamp(milliseconds: milliseconds / 3),
                data: ["a": 1])
            for path: FieldPath in [.id, .version, .createdAt, .updatedAt, .data(["a"]), .data(["missing"])] {
                for descending in [false, true] {
                    var direct: [UInt8] = [7]
                    var made: [UInt8] = [7]
                    object.appendSortKey(at: path, descending: descending, to: &direct)
                    SortKey.append(object.value(at: path), descending: descending, to: &made)
                    #expect(direct == made, "\(path) at \(milliseconds) ms, descending \(descending)")
                }
            }
        }
    }

    /// A string's key is its bytes, each 0 byte followed by 0xFF, then 0 and 1: strings with and
    /// without 0 bytes keep the order of their bytes ("a" < "a\0" < "a\0b" < "ab").
    @Test func stringKeysEscapeTheirZeroBytes() {
        func key(_ string: String) -> [UInt8] {
            var bytes: [UInt8] = []
            SortKey.append(json: .string(string), descending: false, to: &bytes)
            return bytes
        }
        let kind = Value.Kind.string.rawValue
        #expect(key("ab") == [kind, 0x61, 0x62, 0, 1])
        #expect(key("a\u{0}b") == [kind, 0x61, 0, 0xFF, 0x62, 0, 1])
        #expect(key("\u{0}\u{0}") == [kind, 0, 0xFF, 0, 0xFF, 0, 1])
        let ordered = ["", "\u{0}", "a", "a\u{0}", "a\u{0}\u{0}", "a\u{0}b", "a\u{1}", "ab"].map(key)
        for i in ordered.indices.dropLast() { #expect(ordered[i].lexicographicallyPrecedes(ordered[i + 1]), "\(i)") }
    }

    /// A stored object's key of a field, straight from its JSON, is the key of the field's
    /// `Value`: at the top level, nested, missing, and of a system field.
    @Test func anObjectsFieldKeysAreThoseOfTheirValues() {
        let object = StoredObject(
            collection: "T", id: "x1", version: 3, createdAt: .init(milliseconds: 5), updatedAt: .init(milliseconds: 9),
            data: ["a": 1.5, "s": "a\u{0}b", "n": ["b": "x", "c": ["d": -2]]])
        let paths: [FieldPath] = [
            .data(["a"]), .data(["s"]), .data(["n"]), .data(["n", "b"]), .data(["n", "c", "d"]), .data(["zz"]),
            .data(["n", "zz"]),
            .data(["a", "b"]), .id, .version, .createdAt, .updatedAt,
        ]
        for path in paths {
            for descending in [false, true] {
                var direct: [UInt8] = []
                var made: [UInt8] = []
                object.appendSortKey(at: path, descending: descending, to: &direct)
                SortKey.append(object.value(at: path), descending: descending, to: &made)
                #expect(direct == made, "\(path), descending \(descending)")
            }
        }
    }

    @Test func sortKeysOrderLikeValues() {
        let values = Self.ordered.map(Value.init)
        for i in values.indices {
            for j in values.indices {
                var a: [UInt8] = []
                var b: [UInt8] = []
                SortKey.append(values[i], descending: false, to: &a)
                SortKey.append(values[j], descending: false, to: &b)
                #expect(a.lexicographicallyPrecedes(b) == (i < j), "\(values[i]) vs \(values[j])")
                var c: [UInt8] = []
                var d: [UInt8] = []
                SortKey.append(values[i], descending: true, to: &c)
                SortKey.append(values[j], descending: true, to: &d)
                #expect(d.lexicographicallyPrecedes(c) == (i < j), "descending \(values[i]) vs \(values[j])")
            }
        }
    }

    @Test func numbersCompareByValueAcrossIntegersAndDoubles() {
        #expect(Value(.int(1)) == Value(.double(1.0)))
        #expect(Value(.double(-0.0)) == Value(.int(0)))
        #expect(Value(.int(9_007_199_254_740_993)) > Value(.double(9_007_199_254_740_992)))
        #expect(Value(.int(Int64.max)) < Value(.double(9.3e18)))
        var a: [UInt8] = []
        var b: [UInt8] = []
        SortKey.append(Value(.int(1)), descending: false, to: &a)
        SortKey.append(Value(.double(1.0)), descending: false, to: &b)
        #expect(a == b)
        var big: [UInt8] = []
        var bigger: [UInt8] = []
        SortKey.append(Value(.int(Int64.max - 1)), descending: false, to: &big)
        SortKey.append(Value(.int(Int64.max)), descending: false, to: &bigger)
        #expect(big.lexicographicallyPrecedes(bigger))
    }

    @Test func datesCompareByInstantWhateverTheOffset() throws {
        #expect(Value(["$date": "2026-01-01T01:00:00+01:00"]) == Value(["$date": "2026-01-01T00:00:00Z"]))
        #expect(Value(["$date": "2026-01-01T00:00:00.5Z"]) > Value(["$date": "2026-01-01T00:00:00Z"]))
    }

    @Test func instantsParseAndFormatRFC3339() throws {
        let instant = try #require(Instant(rfc3339: "2026-11-29T10:00:00.123Z"))
        #expect(instant.rfc3339Milliseconds == "2026-11-29T10:00:00.123Z")
        #expect(Instant(rfc3339: "1970-01-01T00:00:00Z")?.seconds == 0)
        #expect(Instant(rfc3339: "1969-12-31T23:59:59.999Z")?.milliseconds == -1)
        #expect(Instant(milliseconds: -1).rfc3339Milliseconds == "1969-12-31T23:59:59.999Z")
        #expect(Instant(rfc3339: "2024-02-29T00:00:00Z") != nil)
        for bad in [
            "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01", "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00+0100",
        ] {
            #expect(Instant(rfc3339: bad) == nil, "\(bad)")
        }
    }
}
