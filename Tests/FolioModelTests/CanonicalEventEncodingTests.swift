import FolioJSON
import Testing

@testable import FolioModel

/// `Event.encoded()` writes the head, an object event's names and version, and the origin in chunks
/// (since 2026-12-06); the canonical bytes must stay exactly what the piecewise writer before it
/// wrote, since the chain hash covers them and every stored log holds them. `reference` is that
/// writer, kept here as it was.
@Suite struct CanonicalEventEncodingTests {
    static func reference(_ event: Event) -> (bytes: [UInt8], headEnd: Int, cause: Range<Int>?) {
        var writer = JSONWriter(capacity: 256)
        writer.bytes.append(UInt8(ascii: "{"))
        writer.writeKey("seq", first: true)
        writer.write(event.sequence)
        writer.writeKey("type")
        writer.write(event.typeName)
        writer.writeKey("at")
        writer.write(event.timestamp)
        let headEnd = writer.bytes.count
        func objectFields(_ collection: String, _ id: String) {
            writer.writeKey("collection")
            writer.write(collection)
            writer.writeKey("id")
            writer.write(id)
            writer.writeKey("version")
            writer.write(event.version)
        }
        switch event.change {
        case .created(let collection, let id, let data):
            objectFields(collection, id)
            writer.writeKey("data")
            writer.write(data)
        case .updated(let collection, let id, let patch, let ops):
            objectFields(collection, id)
            writer.writeKey("patch")
            writer.write(patch)
            if let ops {
                writer.writeKey("ops")
                writer.write(ops.json)
            }
        case .deleted(let collection, let id):
            objectFields(collection, id)
        case .viewDefined(let definition):
            writer.writeKey("view")
            writer.write(definition.json)
        case .viewDropped(let name):
            writer.writeKey("view")
            writer.write(name)
        case .schemaDefined(let schema):
            writer.writeKey("schema")
            writer.write(schema.json)
        case .schemaDropped(let collection):
            writer.writeKey("collection")
            writer.write(collection)
        case .filePut(let binding):
            writer.writeKey("name")
            writer.write(binding.name)
            writer.writeKey("sha256")
            writer.write(binding.sha256)
            writer.writeKey("size")
            writer.write(binding.size)
            writer.writeKey("contentType")
            writer.write(binding.contentType)
            writer.writeKey("replace")
            writer.writeRaw(binding.replace ? "true" : "false")
        case .fileDeleted(let name):
            writer.writeKey("name")
            writer.write(name)
        }
        var cause: Range<Int>?
        if let number = event.cause {
            writer.writeKey("cause")
            let start = writer.bytes.count
            writer.write(number)
            cause = start..<writer.bytes.count
        }
        if let request = event.request {
            writer.writeKey("request")
            writer.write(request.json)
        }
        writer.writeKey("by")
        writer.writeRaw("{\"uid\":")
        writer.write(UInt64(event.origin.uid))
        writer.writeRaw(",\"gid\":")
        writer.write(UInt64(event.origin.gid))
        writer.writeRaw(",\"pid\":")
        writer.write(Int64(event.origin.pid))
        writer.writeRaw("}}")
        return (writer.bytes, headEnd, cause)
    }

    static var events: [Event] {
        let at = Timestamp(milliseconds: 1_796_000_000_123)
        var events = CanonicalEventDecodingTests.corpus
        let view = try! ViewDefinition(
            name: "byTitle", collection: "Task", whereJSON: nil,
            sort: try! SortOrder(parsing: .array([.string("title")])), unique: false)
        events += [
            Event(
                sequence: 20, timestamp: at, origin: Origin(uid: 7, gid: 8, pid: 9), version: 0,
                change: .viewDefined(view)),
            Event(
                sequence: 21, timestamp: at, origin: Origin(uid: 7, gid: 8, pid: 9), version: 0,
                change: .viewDropped(name: "byTitle")),
            Event(
                sequence: 22, timestamp: Timestamp(milliseconds: 0), origin: Origin(uid: 0, gid: 0, pid: 0), version: 0,
                change: .schemaDropped(collection: "Task")),
            Event(
                sequence: 23, timestamp: at, origin: Origin(uid: 1, gid: 2, pid: 3), version: 0,
                change: .filePut(
                    FileBinding(
                        name: "photos/a b.jpg", sha256: String(repeating: "c", count: 64), size: 1234,
                        contentType: "image/jpeg", replace: true))),
            Event(
                sequence: 24, timestamp: at, origin: Origin(uid: 1, gid: 2, pid: 3), version: 0,
                change: .fileDeleted(name: "photos/a b.jpg")),
            // Names the writer would not accept, as an event being checked may hold: written the general way.
            Event(
                sequence: 25, timestamp: at, origin: Origin(uid: 1, gid: 2, pid: -3), version: 1,
                change: .deleted(collection: "T\"q", id: "é\\\n")),
            Event(
                sequence: 26, timestamp: Timestamp(milliseconds: 253_402_300_799_999),
                origin: Origin(uid: 1, gid: 2, pid: 3), version: UInt64(Int64.max),
                change: .deleted(collection: "Last", id: "z")),
        ]
        return events
    }

    @Test func theChunkedWriterWritesWhatThePiecewiseOneDid() {
        for event in Self.events {
            let expected = Self.reference(event)
            let parts = event.encodedParts()
            #expect(parts.bytes == expected.bytes, "\(String(decoding: expected.bytes, as: UTF8.self))")
            #expect(parts.headEnd == expected.headEnd)
            #expect(parts.cause == expected.cause)
            #expect(event.encoded() == expected.bytes)
        }
    }
}
