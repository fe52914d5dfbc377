import FolioJSON
import Foundation
import Testing

@testable import FolioKit

/// Thirty chores with a mix of every field, some missing.
func seedChores(on folio: Folio) async throws -> [Chore] {
    let ann = try await Person(id: "ann", name: "Ann").save(on: folio)
    var saved: [Chore] = []
    for index in 0..<30 {
        var chore = Chore(
            title: ["Mop", "Broom", "Dust", "Mow", "Cook"][index % 5] + " \(index / 5)",
            n: index % 7 == 0 ? nil : index % 9,
            done: index % 3 == 0)
        if index % 4 == 0 { chore.urgent = index % 8 == 0 }
        if index % 2 == 0 { chore.due = Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(index) * 3600) }
        if index % 3 != 2 { chore.tags = index % 2 == 0 ? ["wet", "floor"] : ["dry"] }
        if index % 5 == 1 { chore.owner = try Ref(to: ann) }
        if index % 6 != 5 { chore.meta = .init(by: index % 2 == 0 ? "ann" : "bob", score: Double(index) / 4) }
        saved.append(try await chore.save(on: folio))
    }
    return saved
}

@Suite("FolioKit queries against a real foliod")
struct QueryTests {
    /// Each typed query, and the `where` written by hand that it must produce.
    static let cutoff = Date(timeIntervalSinceReferenceDate: 800_000_000 + 10 * 3600)
    static let cases: [(QueryCondition<Chore>, String)] = [
        (\.title == "Mop 0", #"{"name":"Mop 0"}"#),
        (\.n > 3, #"{"n":{"$gt":3}}"#),
        (\.n >= 3 && \.n < 8, #"{"n":{"$gte":3,"$lt":8}}"#),
        (.all([\.done == false, \.n != 5]), #"{"done":false,"n":{"$ne":5}}"#),
        (\.title == "Mop 0" || \.n <= 2, #"{"$or":[{"name":"Mop 0"},{"n":{"$lte":2}}]}"#),
        (\.n == 1 || (\.n == 2 || \.done == true), #"{"$or":[{"n":1},{"n":2},{"done":true}]}"#),
        (.in(\.n, [1, 2, 3]), #"{"n":{"$in":[1,2,3]}}"#),
        (.notIn(\.n, [1, 2]), #"{"n":{"$nin":[1,2]}}"#),
        (.exists(\.urgent), #"{"urgent":{"$exists":true}}"#),
        (\.urgent == nil, #"{"urgent":{"$exists":false}}"#),
        (\.urgent != nil, #"{"urgent":{"$exists":true}}"#),
        (\.urgent == true, #"{"urgent":true}"#),
        (.prefix(\.title, "M"), #"{"name":{"$prefix":"M"}}"#),
        (.contains(\.tags, "wet"), #"{"tags":{"$contains":"wet"}}"#),
        (\.due > cutoff, #"{"due":{"$gt":{"$date":"2026-05-09T16:13:20Z"}}}"#),
        (\.owner == Ref<Person>("ann"), #"{"owner":{"$ref":"Person/ann"}}"#),
        (\.meta?.by == "ann", #"{"meta.by":"ann"}"#),
        (\.meta?.score >= 2.5, #"{"meta.score":{"$gte":2.5}}"#),
        (\.n > 1 && \.n > 2, #"{"$and":[{"n":{"$gt":1}},{"n":{"$gt":2}}]}"#),
        (
            (\.done == true || \.n == 4) && .prefix(\.title, "B"),
            #"{"$or":[{"done":true},{"n":4}],"name":{"$prefix":"B"}}"#
        ),
    ]

    @Test func typedWhereEqualsHandWritten() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            _ = try await seedChores(on: folio)
            for (index, (condition, text)) in Self.cases.enumerated() {
                let handWritten = try #require(try JSONParser.parse(text).objectValue)
                let query = Chore.query(condition).limit(1000)
                #expect(try query.whereClause() == handWritten, "case \(index): \(text)")
                let typed = try await query.find(on: folio).map(\.id!)
                let raw = try await folio.request([
                    "op": "list", "collection": "Chore", "where": .object(handWritten), "limit": 1000,
                ])
                let rawIDs = raw.objectValue?["items"].flatMap { items -> [String]? in
                    guard case .array(let items) = items else { return nil }
                    return items.compactMap { $0.objectValue?["id"]?.stringValue }
                }
                #expect(typed == rawIDs, "case \(index): \(text)")
                #expect(try await query.count(on: folio) == typed.count, "case \(index): \(text)")
            }
            // Some cases match something and some not everything: the data exercises them.
            #expect(try await Chore.query(\.n > 3).count(on: folio) > 0)
        }
    }

    @Test func sortLimitFirst() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            let chores = try await seedChores(on: folio)
            let byTitle = try await Chore.query().sort(\.title).sort(\.n, descending: true).find(on: folio)
            #expect(
                try Chore.query().sort(\.title).sort(\.n, descending: true).fields(paging: true)["sort"]
                    == .array(["name", "-n"]))
            #expect(byTitle.map(\.title) == chores.map(\.title).sorted())
            let first = try await Chore.query(\.done == true).sort(\.title).reversed().first(on: folio)
            #expect(first?.title == chores.filter(\.done).map(\.title).max())
            #expect(try await Chore.query(\.title == "nothing").first(on: folio) == nil)
            #expect(try await Chore.query().limit(7).find(on: folio).count == 7)
            await #expect(throws: FolioError.badRequest("limit 1001 is out of range: 0 to 1000")) {
                try await Chore.query().limit(1001).find(on: folio)
            }
        }
    }

    @Test func cursorPages() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            var created: [String] = []
            for index in 0..<25 {
                created.append(try await TodoListItem(title: String(format: "item %02d", index)).save(on: folio).id!)
            }
            var sizes: [Int] = []
            var seen: [String] = []
            for try await page in TodoListItem.query().limit(10).pages(on: folio) {
                sizes.append(page.count)
                seen += page.map(\.id!)
                // An insert behind the cursor neither shifts nor repeats the next page.
                if sizes.count == 1 { try await TodoListItem(title: "late").save(on: folio) }
            }
            #expect(sizes == [10, 10, 6])
            #expect(Array(seen.prefix(25)) == created)
            #expect(
                try await TodoListItem.query(.prefix(\.title, "item")).limit(4).findAll(on: folio).map(\.id!) == created
            )
            let descending = try await TodoListItem.query().sort(\.title, descending: true).limit(3).findAll(on: folio)
            #expect(
                descending.map(\.title!)
                    == (created.indices.map { String(format: "item %02d", $0) } + ["late"]).sorted(by: >))
        }
    }

    @MainActor @Test func pagesFromTheMainActor() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            for index in 0..<5 { try await TodoListItem(title: "p\(index)").save(on: folio) }
            var titles: [String] = []
            for try await page in TodoListItem.query().sort(\.title).limit(2).pages(on: folio) {
                titles += page.compactMap(\.title)
            }
            #expect(titles == ["p0", "p1", "p2", "p3", "p4"])
        }
    }

    @Test func unknownFieldIsReportedWhenTheQueryRuns() async throws {
        try await withDaemon { daemon in
            let folio = try await Folio.connect(daemon.socketPath)
            #expect(try await Diary.query(\.mood == .calm).count(on: folio) == 0)
            await #expect(throws: FolioError.self) { try await Diary.query(\.text == "x").count(on: folio) }
        }
    }
}
