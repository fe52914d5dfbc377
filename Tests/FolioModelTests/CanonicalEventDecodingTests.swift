import FolioHarness
import FolioJSON
import Foundation
import Testing

@_spi(Fuzzing) @testable import FolioModel

/// `Event.decodingCanonicalObjectEvent`, the reading of an object event by its canonical layout,
/// against the general decoder (`init(decodingGenerally:)`): whatever the layout reading accepts,
/// the general decoder accepts with the same event and data range; what it does not, the general
/// decoder decides. Checked on events of every shape it reads, on hand-made departures from the
/// layout, and on random damage to canonical bytes.
@Suite struct CanonicalEventDecodingTests {
    static func json(_ text: String) -> JSON { try! JSONParser.parse(text) }

    static func object(_ text: String) -> JSONObject {
        guard case .object(let object) = json(text) else { fatalError("not an object: \(text)") }
        return object
    }

    static let corpus: [Event] = {
        let at = Timestamp(milliseconds: 1_796_000_000_123)
        let origin = Origin(uid: 1000, gid: 100, pid: 4242)
        let patch = object(#"{"title":"b","gone":null}"#)
        let ops = try! FieldOperations(
            parsing: json(#"{"n":{"$inc":2},"tags":{"$addToSet":["x","y"]}}"#), beside: patch)
        let request = Event.RequestRecord(
            key: "retry-1", digest: String(repeating: "ab", count: 32), events: 3,
            failed: [
                .init(
                    index: 1, code: "conflict", message: "version 2 expected",
                    details: object(#"{"expectedVersion":2}"#))
            ])
        return [
            Event(
                sequence: 1, timestamp: at, origin: origin, version: 1,
                change: .created(
                    collection: "Task", id: "t1",
                    data: object(#"{"a":1,"b":"w17","c":-3.5,"d":[1,{"x":null}],"e":true}"#))),
            Event(
                sequence: 9_223_372_036_854_775_807, timestamp: at,
                origin: Origin(uid: UInt32.max, gid: 0, pid: Int32.min), version: 7,
                change: .created(
                    collection: "Report_2", id: "01HZX3-a.b:c_D",
                    data: object(#"{"text":"é \"quoted\" \\ \n\t ✓ 😀","empty":{},"list":[]}"#))),
            Event(
                sequence: 12, timestamp: at, origin: Origin(uid: 0, gid: 0, pid: -1), version: 1,
                change: .created(collection: "E", id: "e", data: [:])),
            Event(
                sequence: 3, timestamp: at, origin: origin, version: 2,
                change: .updated(collection: "Task", id: "t1", patch: patch, ops: nil)),
            Event(
                sequence: 4, timestamp: at, origin: origin, version: 3,
                change: .updated(collection: "Task", id: "t1", patch: patch, ops: ops)),
            Event(
                sequence: 5, timestamp: at, origin: origin, version: 4, change: .deleted(collection: "Task", id: "t1")),
            Event(
                sequence: 6, timestamp: at, origin: origin, version: 1, change: .deleted(collection: "Item", id: "i9"),
                cause: 5),
            Event(
                sequence: 7, timestamp: at, origin: origin, version: 1,
                change: .created(collection: "Task", id: "t2", data: object(#"{"a":2}"#)),
                request: request),
            Event(
                sequence: 8, timestamp: at, origin: origin, version: 2,
                change: .updated(collection: "Item", id: "i1", patch: object(#"{"owner":null}"#), ops: nil),
                cause: 6, request: Event.RequestRecord(key: "k", digest: String(repeating: "0", count: 64), events: 1)),
        ]
    }()

    /// Both decoders on the same bytes: the layout reading, if it accepts them, must agree with the
    /// general decoder; the public decoder's answer is the general one's otherwise.
    static func agree(_ bytes: [UInt8], checkingData: Bool, _ comment: Comment? = nil) -> (
        fast: Event?, general: Event?
    ) {
        bytes.withUnsafeBytes { buffer in
            var fastRange: Range<Int>?
            let fast = Event.decodingCanonicalObjectEvent(buffer, dataRange: &fastRange, checkingData: checkingData)
            var generalRange: Range<Int>?
            let general = try? Event(decodingGenerally: buffer, dataRange: &generalRange, checkingData: checkingData)
            var publicRange: Range<Int>?
            let answered = try? Event(decoding: buffer, dataRange: &publicRange, checkingData: checkingData)
            if let fast {
                #expect(general == fast, comment)
                #expect(generalRange == fastRange, comment)
            }
            #expect(answered == general, comment)
            #expect(publicRange == generalRange, comment)
            return (fast, general)
        }
    }

    @Test func everyObjectEventInItsCanonicalFormIsReadByItsLayout() {
        for event in Self.corpus {
            let bytes = event.encoded()
            for checkingData in [false, true] {
                let (fast, general) = Self.agree(
                    bytes, checkingData: checkingData, "\(String(decoding: bytes, as: UTF8.self))")
                #expect(fast == event, "\(String(decoding: bytes, as: UTF8.self))")
                #expect(general == event)
            }
        }
    }

    @Test func otherEventsAndOtherLayoutsGoTheGeneralWay() throws {
        let created = String(decoding: Self.corpus[0].encoded(), as: UTF8.self)
        let view = Event(
            sequence: 2, timestamp: Timestamp(milliseconds: 0), origin: Origin(uid: 1, gid: 1, pid: 1), version: 0,
            change: .viewDropped(name: "byTitle"))
        // Each departure: text of the canonical `created` replaced by other text.
        let departures: [(String, String)] = [
            (",\"type\"", ", \"type\""),  // whitespace
            ("\"id\":\"t1\"", "\"id\":\"t\\u0031\""),  // an escape in the id
            ("{\"seq\":1,", "{\"seq\":01,"),  // a leading zero
            ("{\"seq\":1,", "{\"seq\":1.0,"),
            ("{\"seq\":1,", "{\"seq\":0,"),
            ("{\"seq\":1,", "{\"seq\":99999999999999999999,"),
            ("\"version\":1", "\"version\":0"),
            ("\"version\":1", "\"version\":1e0"),
            ("\"pid\":4242", "\"pid\":-0"),
            ("\"pid\":4242", "\"pid\":2147483648"),
            ("\"uid\":1000", "\"uid\":4294967296"),
            (",\"by\"", ",\"cause\":1,\"by\""),  // a cause not before the event
            (",\"by\"", ",\"extra\":1,\"by\""),
            ("\"data\"", "\"patch\""),
            ("\"collection\":\"Task\"", "\"collection\":\"9Task\""),
            ("\"at\":\"2026", "\"at\":\"2O26"),
            ("\"created\"", "\"Created\""),
        ]
        var variants: [String] = [
            String(decoding: view.encoded(), as: UTF8.self), created + " ", created + "}", String(created.dropLast()),
        ]
        for (from, to) in departures {
            #expect(created.contains(from), "\(from)")
            variants.append(created.replacingOccurrences(of: from, with: to))
        }
        // Keys in another order: the general decoder takes them, the layout reading does not.
        variants.append(
            created.replacingOccurrences(
                of: "{\"seq\":1,\"type\":\"created\",", with: "{\"type\":\"created\",\"seq\":1,"))
        for variant in variants {
            for checkingData in [false, true] {
                let (fast, _) = Self.agree(Array(variant.utf8), checkingData: checkingData, "\(variant)")
                #expect(fast == nil, "\(variant)")
            }
        }
        // A time with an offset is RFC 3339 to both, read by the same parser: the same event.
        let offset = created.replacingOccurrences(of: "Z\",\"collection\"", with: "+00:00\",\"collection\"")
        #expect(Self.agree(Array(offset.utf8), checkingData: true).fast == Self.corpus[0])
        // The reordered one decodes, the general way, to the same event.
        let reordered = Array(variants.last!.utf8)
        #expect(try reordered.withUnsafeBytes { try Event(decoding: $0) } == Self.corpus[0])
    }

    @Test func damagedBytesAreNeverReadDifferently() {
        var random = SplitMix64(seed: 20_261_206)  // seeded: a failure comes back on the next run
        var fastAccepted = 0
        for event in Self.corpus {
            let original = event.encoded()
            for round in 0..<1_500 {
                var bytes = original
                for _ in 0..<(1 + round % 3) {
                    let at = Int.random(in: 0..<bytes.count, using: &random)
                    let byte = [
                        UInt8(ascii: "0"), UInt8(ascii: "9"), UInt8(ascii: "\""), UInt8(ascii: ","), UInt8(ascii: "}"),
                        UInt8(ascii: "-"), 0x20, 0x80, UInt8.random(in: 0...255, using: &random),
                    ][Int.random(in: 0..<9, using: &random)]
                    switch Int.random(in: 0..<3, using: &random) {
                    case 0: bytes[at] = byte
                    case 1: bytes.insert(byte, at: at)
                    default: bytes.remove(at: at)
                    }
                }
                let (fast, _) = Self.agree(
                    bytes, checkingData: round % 2 == 0, "\(String(decoding: bytes, as: UTF8.self))")
                if fast != nil { fastAccepted += 1 }
            }
        }
        // Some damage leaves a valid event (a digit of the data changed): those are read by the layout too.
        #expect(fastAccepted > 0)
    }
}
