import FolioHarness
import FolioJSON
import Foundation
import Testing

/// The flows of the apps Folio is for, end to end over the socket: Realm's categories and items,
/// Parse's pointers with include, atomic batches, idempotent retries across a crash, schemas.
@Suite struct RelationsTests {
    private static let categorySchema: JSON = [
        "op": "schema.define", "collection": "Category",
        "fields": [
            "title": ["type": "string", "required": true],
            "items": ["type": "array", "items": ["type": "ref", "ref": "Item"], "owns": true],
        ],
    ]

    private func ids(_ page: JSON?) -> [String] {
        page?["items"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    /// Realm's categories app: a Category whose `items` (a List) owns its Items; an Item knows its
    /// Category by backlink (LinkingObjects); deleting the Category deletes its items.
    @Test func theCategoriesApp() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            #expect(try connection.request(Self.categorySchema).isOK)
            _ = try connection.request([
                "op": "create", "collection": "Category", "id": "c1", "data": ["title": "Home", "items": []],
            ])
            // realm.write { let item = Item(); selectedCategory.items.append(item) }: one round trip.
            for title in ["Mop", "Broom", "Apron"] {
                let added = try connection.request([
                    "op": "batch",
                    "ops": [
                        ["op": "create", "collection": "Item", "data": ["title": .string(title)]],
                        [
                            "op": "update", "collection": "Category", "id": "c1",
                            "ops": ["items": ["$push": [["$result": 0]]]],
                        ],
                    ],
                ])
                #expect(added.result?["results"]?.arrayValue?.count == 2, "\(added)")
            }
            let category = try connection.request(["op": "get", "collection": "Category", "id": "c1"])
            #expect(category.result?["items"]?.arrayValue?.count == 3)
            // The List in its order, and sorted by title.
            let inOrder = try connection.request(["op": "links", "ref": "Category/c1", "field": "items"])
            #expect(
                inOrder.result?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } == [
                    "Mop", "Broom", "Apron",
                ])
            let byTitle = try connection.request([
                "op": "links", "ref": "Category/c1", "field": "items", "sort": ["title"], "explain": true,
            ])
            #expect(
                byTitle.result?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } == [
                    "Apron", "Broom", "Mop",
                ])
            #expect(byTitle.result?["plan"]?["source"] == "linkScan")
            // An item's category, by backlink.
            let mop = try #require(inOrder.result?["items"]?.arrayValue?.first?["id"]?.stringValue)
            let parent = try connection.request([
                "op": "backlinks", "ref": .string("Item/" + mop), "from": "Category.items", "explain": true,
            ])
            #expect(ids(parent.result) == ["c1"])
            #expect(parent.result?["plan"]?["source"] == "references")
            #expect(
                try connection.request(["op": "count", "ref": .string("Item/" + mop), "from": "Category.items"])
                    .result?["count"] == 1)
            // Deleting the category takes its items with it, each an event caused by the delete.
            let before = try connection.request(["op": "stats"]).result?["lastSeq"]?.integerValue ?? 0
            let deleted = try connection.request(["op": "delete", "collection": "Category", "id": "c1"])
            #expect(deleted.isOK)
            let events =
                try connection.request(["op": "events", "after": .int(before)]).result?["events"]?.arrayValue ?? []
            #expect(events.map { $0["type"]?.stringValue } == ["deleted", "deleted", "deleted", "deleted"])
            #expect(events.dropFirst().allSatisfy { $0["cause"] == events[0]["seq"] })
            #expect(try connection.request(["op": "count", "collection": "Item"]).result?["count"] == 0)
            #expect(try connection.request(["op": "verify"]).result?["ok"] == true)
        }
    }

    /// Parse pointers: a Post's author, and the author's team, included in one answer.
    @Test func pointersWithInclude() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            _ = try connection.request(["op": "create", "collection": "Team", "id": "blue", "data": ["name": "Blue"]])
            _ = try connection.request([
                "op": "create", "collection": "User", "id": "ann",
                "data": ["name": "Ann", "team": ["$ref": "Team/blue"]],
            ])
            _ = try connection.request([
                "op": "create", "collection": "Post", "id": "p1",
                "data": ["text": "hi", "author": ["$ref": "User/ann"]],
            ])
            _ = try connection.request([
                "op": "create", "collection": "Post", "id": "p2",
                "data": ["text": "yo", "author": ["$ref": "User/gone"], "tags": [["$ref": "Team/blue"]]],
            ])
            let post = try connection.request([
                "op": "get", "collection": "Post", "id": "p1", "include": ["author.team"],
            ])
            #expect(post.result?["author"]?["name"] == "Ann")
            #expect(post.result?["author"]?["team"]?["name"] == "Blue")
            #expect(post.result?["author"]?["team"]?["collection"] == "Team")
            let page = try connection.request(["op": "list", "collection": "Post", "include": ["author", "tags"]])
            let items = page.result?["items"]?.arrayValue ?? []
            #expect(items.count == 2)
            #expect(items.first?["author"]?["name"] == "Ann")
            #expect(items.last?["author"] == ["$ref": "User/gone", "$missing": true])
            #expect(items.last?["tags"]?.arrayValue?.first?["name"] == "Blue")
            // Without include the references stay references.
            #expect(
                try connection.request(["op": "get", "collection": "Post", "id": "p1"]).result?["author"] == [
                    "$ref": "User/ann"
                ])
        }
    }

    /// A view sorted by a reference, then a title, answers "the items of this category" by range.
    @Test func aViewAnswersTheChildrenOfAParentByRange() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            #expect(
                try connection.request([
                    "op": "view.define", "name": "itemsByCategory", "collection": "Item",
                    "sort": ["category", "title"],
                ]).isOK)
            for index in 0..<30 {
                try connection.send([
                    "op": "create", "collection": "Item",
                    "data": [
                        "category": ["$ref": .string("Category/c\(index % 3)")], "title": .string("t\(29 - index)"),
                    ],
                ])
            }
            for _ in 0..<30 { #expect(try connection.readResponse().isOK) }
            let first = try connection.request([
                "op": "list", "view": "itemsByCategory", "where": ["category": ["$ref": "Category/c1"]], "limit": 4,
                "explain": true,
            ])
            #expect(first.result?["total"] == 10)
            #expect(first.result?["plan"]?["source"] == "viewRange")
            #expect(first.result?["plan"]?["fixed"] == ["category"])
            let titles = { (page: JSON) in
                page.result?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? []
            }
            // By title as text: t1, t10, t13, ..., t28, t4, t7.
            #expect(titles(first) == ["t1", "t10", "t13", "t16"])
            let second = try connection.request([
                "op": "list", "view": "itemsByCategory", "where": ["category": ["$ref": "Category/c1"]], "limit": 4,
                "after": first.result?["next"] ?? .null,
            ])
            #expect(titles(second) == ["t19", "t22", "t25", "t28"])
            let deep = try connection.request([
                "op": "list", "view": "itemsByCategory", "where": ["category": ["$ref": "Category/c1"]], "offset": 8,
                "order": "desc",
            ])
            #expect(titles(deep) == ["t10", "t1"])
            // The same question asked of the collection finds the view.
            let asked = try connection.request([
                "op": "count", "collection": "Item", "where": ["category": ["$ref": "Category/c2"]], "sort": ["title"],
                "explain": true,
            ])
            #expect(asked.result?["count"] == 10 && asked.result?["plan"]?["source"] == "viewRange")
            // A where that is not an equality on the leading fields is refused for a view.
            let refused = try connection.request(["op": "list", "view": "itemsByCategory", "where": ["title": "t1"]])
            #expect(refused.errorCode == "bad_request")
        }
    }

    /// An atomic batch that fails at any position leaves nothing, and says which op failed.
    @Test func aFailingBatchLeavesNothing() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            _ = try connection.request(["op": "create", "collection": "T", "id": "taken", "data": [:]])
            let good: [JSON] = [
                ["op": "create", "collection": "T", "data": ["n": 1]],
                ["op": "update", "collection": "T", "id": ["$result": 0], "ops": ["n": ["$inc": 1]]],
                ["op": "create", "collection": "T", "data": ["other": ["$result": 1]]],
                ["op": "delete", "collection": "T", "id": "taken", "ifVersion": 1],
            ]
            let bad: [JSON] = [
                ["op": "create", "collection": "T", "id": "taken", "data": [:]],
                ["op": "update", "collection": "T", "id": ["$result": 0], "ops": ["n": ["$push": [1]]]],
                ["op": "update", "collection": "T", "id": "missing", "patch": [:]],
                ["op": "delete", "collection": "T", "id": "taken", "ifVersion": 7],
            ]
            let head = try connection.request(["op": "hello"]).result?["lastSeq"]
            for position in 0..<good.count {
                var ops = good
                ops[position] = bad[position]
                let answer = try connection.request(["op": "batch", "ops": .array(ops)])
                #expect(answer.errorCode != nil, "\(answer)")
                #expect(answer["error"]?["index"] == .int(Int64(position)), "\(answer)")
                #expect(answer.errorMessage?.hasPrefix("op \(position): ") == true, "\(answer)")
                #expect(try connection.request(["op": "hello"]).result?["lastSeq"] == head)
            }
            let fine = try connection.request(["op": "batch", "ops": .array(good)])
            let results = fine.result?["results"]?.arrayValue ?? []
            #expect(results.count == 4 && results.allSatisfy { $0["ok"] == true }, "\(fine)")
            #expect(results[1]["result"]?["n"] == 2)
            let malformed = try connection.request([
                "op": "batch", "ops": [["op": "create", "collection": "T", "data": ["x": ["$result": 0]]]],
            ])
            #expect(malformed.errorCode == "bad_request" && malformed["error"]?["index"] == 0, "\(malformed)")
        }
    }

    /// A write retried with its request key after foliod was killed (the answer lost) is applied
    /// once; the retry gets the first result.
    @Test func retriesAcrossACrashAreAppliedOnce() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            defer { daemon.shutDown() }
            try daemon.start()
            let create: JSON = ["op": "create", "collection": "Order", "requestKey": "order-1", "data": ["total": 12]]
            let first = try daemon.request(create)
            let batch: JSON = [
                "op": "batch", "requestKey": "batch-1",
                "ops": [
                    [
                        "op": "update", "collection": "Order", "id": first.result?["id"] ?? .null,
                        "ops": ["total": ["$inc": 3]],
                    ],
                    ["op": "create", "collection": "Line", "data": ["order": ["$result": 0]]],
                ],
            ]
            let batched = try daemon.request(batch)
            #expect(batched.isOK)
            daemon.killHard()
            try daemon.start()
            let again = try daemon.request(create)
            #expect(again.result?["replayed"] == true)
            var withoutFlag = again.result?.objectValue
            withoutFlag?["replayed"] = nil
            #expect(withoutFlag.map(JSON.object) == first.result)
            let batchAgain = try daemon.request(batch)
            #expect(batchAgain.result?["replayed"] == true)
            #expect(batchAgain.result?["results"] == batched.result?["results"])
            #expect(
                try daemon.request(["op": "get", "collection": "Order", "id": first.result?["id"] ?? .null]).result?[
                    "total"] == 15)
            #expect(try daemon.request(["op": "count", "collection": "Line"]).result?["count"] == 1)
            let reused = try daemon.request([
                "op": "create", "collection": "Order", "requestKey": "order-1", "data": ["total": 13],
            ])
            #expect(reused.errorCode == "conflict" && reused["error"]?["requestKey"] == "order-1")
            #expect(try daemon.request(["op": "stats"]).result?["lastSeq"] == 3)
        }
    }

    /// A keyed batch that is not atomic, retried after a restart, answers each failed op with the
    /// error it first got, details included (they were lost: only code and message were recorded).
    @Test func aRetriedBatchGivesBackEveryFailureWithItsDetails() throws {
        try withTemporaryDirectory { directory in
            let daemon = RunningDaemon(directory: directory)
            defer { daemon.shutDown() }
            try daemon.start()
            #expect(
                try daemon.request([
                    "op": "view.define", "name": "byEmail", "collection": "User", "sort": ["email"], "unique": true,
                ]).isOK)
            #expect(
                try daemon.request([
                    "op": "create", "collection": "User", "id": "ann", "data": ["email": "ann@example.com"],
                ]).isOK)
            #expect(try daemon.request(["op": "create", "collection": "Team", "id": "t1", "data": [:]]).isOK)
            #expect(
                try daemon.request([
                    "op": "schema.define", "collection": "Member",
                    "fields": ["team": ["type": "ref", "ref": "Team", "onTargetDelete": "deny"]],
                ]).isOK)
            #expect(
                try daemon.request([
                    "op": "create", "collection": "Member", "id": "m1", "data": ["team": ["$ref": "Team/t1"]],
                ]).isOK)
            let batch: JSON = [
                "op": "batch", "requestKey": "mixed-1", "atomic": false,
                "ops": [
                    ["op": "create", "collection": "User", "id": "bob", "data": ["email": "ann@example.com"]],
                    ["op": "update", "collection": "User", "id": "ann", "ifVersion": 7, "patch": ["name": "Ann"]],
                    ["op": "delete", "collection": "Team", "id": "t1"],
                    ["op": "create", "collection": "User", "id": "cy", "data": ["email": "cy@example.com"]],
                ],
            ]
            let first = try daemon.request(batch)
            let results = try #require(first.result?["results"]?.arrayValue, "\(first)")
            #expect(results.count == 4)
            #expect(
                results[0]["error"]?["existingId"] == "ann" && results[0]["error"]?["view"] == "byEmail",
                "\(results[0])")
            #expect(
                results[1]["error"]?["expectedVersion"] == 7 && results[1]["error"]?["currentVersion"] == 1,
                "\(results[1])")
            #expect(results[2]["error"]?["referrers"] == ["Member/m1"], "\(results[2])")
            #expect(results[3]["ok"] == true)
            daemon.killHard()
            try daemon.start()
            let again = try daemon.request(batch)
            #expect(again.result?["replayed"] == true)
            #expect(again.result?["results"] == first.result?["results"], "\(again)")
        }
    }

    @Test func schemaViolationsOfEveryKind() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            _ = try connection.request([
                "op": "create", "collection": "Report", "id": "r1", "data": ["dayCreated": "2026-12-01"],
            ])
            let define: JSON = [
                "op": "schema.define", "collection": "Report", "additionalFields": false,
                "fields": [
                    "dayCreated": ["type": "date", "required": true],
                    "photos": ["type": "array", "items": ["type": "string"]],
                    "author": ["type": "ref", "ref": "User"], "n": ["type": "integer"], "score": ["type": "number"],
                    "done": ["type": "boolean"], "meta": ["type": "object"], "title": ["type": "string"],
                    "extra": ["type": "any"],
                ],
            ]
            let refused = try connection.request(define)
            #expect(refused.errorCode == "bad_request")
            #expect(
                refused["error"]?["violations"] == [
                    ["id": "r1", "reason": "field \"dayCreated\": expected date, got string"]
                ], "\(refused)")
            _ = try connection.request([
                "op": "update", "collection": "Report", "id": "r1",
                "patch": ["dayCreated": ["$date": "2026-12-01T00:00:00Z"]],
            ])
            #expect(try connection.request(define).isOK)
            let day: JSON = ["$date": "2026-12-02T00:00:00Z"]
            let cases: [(JSONObject, String)] = [
                ([:], "field \"dayCreated\" is required"),
                (["dayCreated": "today"], "field \"dayCreated\": expected date, got string"),
                (["dayCreated": day, "photos": "one"], "field \"photos\": expected array, got string"),
                (["dayCreated": day, "photos": ["a", 2]], "field \"photos[1]\": expected string, got integer"),
                (
                    ["dayCreated": day, "author": ["$ref": "Team/x"]],
                    "field \"author\": expected ref to User, got ref to Team"
                ),
                (["dayCreated": day, "n": 1.5], "field \"n\": expected integer, got number"),
                (["dayCreated": day, "score": "high"], "field \"score\": expected number, got string"),
                (["dayCreated": day, "done": 1], "field \"done\": expected boolean, got integer"),
                (
                    ["dayCreated": day, "meta": ["$date": "2026-12-02T00:00:00Z"]],
                    "field \"meta\": expected object, got date"
                ),
                (["dayCreated": day, "title": 5], "field \"title\": expected string, got integer"),
                (["dayCreated": day, "other": 1], "field \"other\" is not in the schema of Report"),
            ]
            for (data, message) in cases {
                let answer = try connection.request(["op": "create", "collection": "Report", "data": .object(data)])
                #expect(answer.errorCode == "bad_request", "\(data)")
                #expect(
                    answer.errorMessage?.contains(message) == true,
                    "\(answer.errorMessage ?? "ok") should say \(message)")
            }
            // Updates and field operations are checked on the result.
            let update = try connection.request([
                "op": "update", "collection": "Report", "id": "r1", "ops": ["n": ["$inc": 0.5]],
            ])
            #expect(
                update.errorCode == "bad_request" && update.errorMessage?.contains("expected integer") == true,
                "\(update)")
            let unset = try connection.request([
                "op": "update", "collection": "Report", "id": "r1", "patch": ["dayCreated": .null],
            ])
            #expect(unset.errorMessage?.contains("required") == true)
            let typo = try connection.request([
                "op": "schema.define", "collection": "X", "fields": ["a": ["type": "strng"]],
            ])
            #expect(typo.errorCode == "bad_request" && typo.errorMessage?.contains("strng") == true)
            let ruleOnString = try connection.request([
                "op": "schema.define", "collection": "X", "fields": ["a": ["type": "string", "owns": true]],
            ])
            #expect(ruleOnString.errorCode == "bad_request")
            #expect(
                try connection.request(["op": "schema.get", "collection": "Report"]).result?["additionalFields"]
                    == false)
            #expect(try connection.request(["op": "schema.drop", "collection": "Report"]).isOK)
            #expect(try connection.request(["op": "create", "collection": "Report", "data": ["anything": 1]]).isOK)
            #expect(try connection.request(["op": "schema.get", "collection": "Report"]).errorCode == "not_found")
        }
    }

    @Test func theCLIWritesBatchesFieldOperationsAndFollowsReferences() throws {
        try withRunningDaemon { daemon in
            let socket = daemon.socketPath
            func folio(_ arguments: String..., input: String? = nil) throws -> CommandRun {
                try CommandRun.run(
                    Binaries.folio, arguments, environment: ["FOLIO_SOCKET": socket],
                    input: input.map { Array($0.utf8) })
            }
            #expect(try folio("create", "Category", "--id", "c1", "title=Home", "items:=[]").status == 0)
            let lines = """
                {"op":"create","collection":"Item","id":"i1","data":{"title":"Mop","n":1,"tags":["work"]}}
                {"op":"update","collection":"Category","id":"c1","ops":{"items":{"$push":[{"$result":0}]}}}
                """
            let batch = try folio("batch", input: lines)
            #expect(batch.status == 0, "\(batch)")
            let updated = try folio(
                "update", "Item", "i1", "--inc", "n=2", "--push", "tags=home", "--pull", "tags=work")
            #expect(updated.status == 0, "\(updated)")
            let item = try JSONParser.parse(updated.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(item["n"] == 3 && item["tags"] == ["home"], "\(updated)")
            let links = try folio("links", "Category", "c1", "items")
            #expect(
                try JSONParser.parse(links.stdout.trimmingCharacters(in: .whitespacesAndNewlines))["total"] == 1,
                "\(links)")
            let backlinks = try folio("backlinks", "Item", "i1", "--from", "Category.items", "--count")
            #expect(backlinks.stdout.contains("1"), "\(backlinks)")
            let included = try folio("get", "Category", "c1", "--include", "items")
            #expect(included.stdout.contains("\"title\":\"Mop\""), "\(included)")
            // The same key twice: applied once.
            #expect(try folio("create", "Note", "text=x", "--request-key", "k1").status == 0)
            let replayed = try folio("create", "Note", "text=x", "--request-key", "k1")
            #expect(replayed.stdout.contains("\"replayed\":true"), "\(replayed)")
            #expect(try daemon.request(["op": "count", "collection": "Note"]).result?["count"] == 1)
        }
    }
}
