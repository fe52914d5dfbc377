import FolioJSON
import Foundation
import Testing

@testable import FolioKit

@Suite("FolioKit records against a real foliod")
struct RecordTests {
    @Test func createGetUpdateDelete() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let saved = try await TodoListItem(title: "Buy milk", description: "2 litres").save(on: folio)
            let id = try #require(saved.id)
            #expect(saved.version == 1)
            #expect(try await TodoListItem.get(id, on: folio) == saved)

            var changed = saved
            changed.title = "Buy oat milk"
            changed.description = nil
            let updated = try await changed.save(on: folio)
            #expect(updated.version == 2)
            #expect(updated.title == "Buy oat milk")
            // A field the value leaves nil is removed, not kept.
            let raw = try await folio.request(["op": "get", "collection": "TodoListItem", "id": .string(id)])
            #expect(raw.objectValue?["description"] == nil)

            // The stale copy: conflict, with the current version.
            await #expect(throws: FolioError.conflict(current: 2)) { try await changed.save(on: folio) }
            await #expect(throws: FolioError.conflict(current: 2)) { try await saved.delete(on: folio) }
            try await updated.delete(on: folio)
            await #expect(throws: FolioError.notFound) { try await TodoListItem.get(id, on: folio) }

            // An id chosen by the client; creating it again is a conflict without a version.
            let chosen = try await TodoListItem(id: "t1", title: "mine").save(on: folio)
            #expect(chosen.id == "t1")
            await #expect(throws: FolioError.conflict(current: nil)) {
                try await TodoListItem(id: "t1", title: "again").save(on: folio)
            }
        }
    }

    /// A record whose line would pass the server's maxLine is refused before it is sent, with
    /// `tooLarge`, and the connection goes on serving. (Sent, foliod closed the connection, and the
    /// save was sent again and again on new connections for 10 s, ending in `connectionLost`.)
    @Test func aRecordOverTheServersLineLimitIsTooLargeAndNothingElseSuffers() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let kept = try await TodoListItem(title: "small").save(on: folio)
            let started = ContinuousClock.now
            await #expect {
                try await TodoListItem(title: "big", description: String(repeating: "x", count: 1_100_000)).save(
                    on: folio)
            } throws: { error in
                guard case FolioError.tooLarge(let message) = error else { return false }
                return message.contains("maxLine")
            }
            #expect(ContinuousClock.now - started < .seconds(2))
            #expect(try await TodoListItem.get(kept.id!, on: folio) == kept)
        }
    }

    /// A record nested deeper than foliod reads a request line is refused before it is sent: foliod
    /// could not read the line's tag either, and its untagged answer left the save waiting for good.
    @Test func aRecordNestedTooDeepIsAnEncodingError() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let fine = try await Nested(nest: .init(depth: 100)).save(on: folio)
            #expect(fine.version == 1)
            await #expect {
                try await Nested(nest: .init(depth: 200)).save(on: folio)
            } throws: { error in
                guard case FolioError.encoding(let message) = error else { return false }
                return message.contains("nested deeper")
            }
        }
    }

    @Test func typedValuesRoundTrip() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let ann = try await Person(name: "Ann").save(on: folio)
            var chore = Chore(title: "Mop", n: 3)
            chore.due = Date(timeIntervalSinceReferenceDate: 818_000_000.125)
            chore.tags = ["wet", "floor"]
            chore.owner = try Ref(to: ann)
            chore.meta = .init(by: "ann", score: 1.5)
            chore.urgent = true
            let saved = try await chore.save(on: folio)
            let read = try await Chore.get(saved.id!, on: folio)
            #expect(read == saved)
            #expect(read.due == chore.due)
            #expect(read.createdAt != nil && read.createdAt == read.updatedAt)
            #expect(read.owner?.id == ann.id)

            // As stored: a renamed key, a $date with its fraction, a $ref.
            let raw = try #require(
                try await folio.request(["op": "get", "collection": "Chore", "id": .string(saved.id!)]).objectValue)
            #expect(raw["name"] == "Mop")
            #expect(raw["due"] == .object(["$date": "2026-12-03T14:13:20.125Z"]))
            #expect(raw["owner"] == .object(["$ref": .string("Person/" + ann.id!)]))

            // include puts the target in the reference.
            let included = try await Chore.get(saved.id!, include: ["owner"], on: folio)
            #expect(included.owner?.object?.name == "Ann")
            let listed = try await Chore.query().include(\.owner).find(on: folio)
            #expect(listed.first?.owner?.object == ann)
        }
    }

    @Test func files() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let content = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            let file = try await folio.putFile(content, name: "photos/a.bin", contentType: "application/x-test")
            #expect(file.size == 100_000)
            var chore = Chore(title: "with a file")
            chore.attachment = FolioFile("photos/a.bin")
            let saved = try await chore.save(on: folio)
            #expect(saved.attachment?.name == "photos/a.bin")
            let included = try await Chore.get(saved.id!, include: ["attachment"], on: folio)
            #expect(included.attachment?.contentType == "application/x-test")
            #expect(try await folio.readFile(file) == content)
            await #expect(throws: FolioError.self) { try await folio.deleteFile(file) }
            try await folio.deleteFile(file, force: true)
            await #expect(throws: FolioError.notFound) { try await folio.file(named: "photos/a.bin") }
        }
    }

    @Test func concurrentTasksShareOneConnection() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<200 {
                    group.addTask { try await TodoListItem(title: "item \(index)").save(on: folio).id! }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(ids).count == 200)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for id in ids {
                    group.addTask {
                        let item = try await TodoListItem.get(id, on: folio)
                        #expect(item.id == id)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await TodoListItem.query().count(on: folio) == 200)
        }
    }

    @Test func probeNamesFields() throws {
        let probe = FieldProbe<Chore>.shared
        #expect(try probe.name(of: \Chore.title) == "name")
        #expect(try probe.name(of: \Chore.id) == "id")
        #expect(try probe.name(of: \Chore.n) == "n")
        #expect(try probe.name(of: \Chore.done) == "done")
        #expect(try probe.name(of: \Chore.urgent) == "urgent")
        #expect(try probe.name(of: \Chore.due) == "due")
        #expect(try probe.name(of: \Chore.createdAt) == "createdAt")
        #expect(try probe.name(of: \Chore.tags) == "tags")
        #expect(try probe.name(of: \Chore.owner) == "owner")
        #expect(try probe.name(of: \Chore.meta?.by) == "meta.by")
        #expect(try probe.name(of: \Chore.meta?.score) == "meta.score")
        #expect(try probe.name(of: \Chore.attachment) == "attachment")
        #expect(try FieldProbe<Diary>.shared.name(of: \Diary.mood) == "mood")
        #expect(throws: FolioError.self) { try FieldProbe<Diary>.shared.name(of: \Diary.text) }
    }

    @Test func dates() throws {
        for interval in [0, 818_000_000.123456, -31_000_000_000.5, 1e9 + 0.000_000_1, 123.999_999_999] {
            let date = Date(timeIntervalSinceReferenceDate: interval)
            #expect(FolioDate.parse(try FolioDate.format(date)) == date)
        }
        #expect(try FolioDate.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(FolioDate.parse("2026-12-01T09:00:00+01:00") == FolioDate.parse("2026-12-01 08:00:00z"))
        #expect(FolioDate.parse("2026-12-01T09:00:00.5Z")!.timeIntervalSince1970 == 1_796_115_600.5)
        #expect(FolioDate.parse("tomorrow") == nil)
    }
}
