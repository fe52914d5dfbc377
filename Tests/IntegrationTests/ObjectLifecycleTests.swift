import FolioJSON
import Testing

/// Create, read, update and delete over the socket, and the answers for stale versions and missing ids.
@Suite struct ObjectLifecycleTests {
    @Test func createGetUpdateDeleteRoundTrip() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let created = try connection.request([
                "op": "create", "collection": "Task", "tag": "c1",
                "data": [
                    "title": "Buy milk", "done": false, "n": 3, "tags": ["a", "b"],
                    "address": ["city": "Oslo", "zip": "0150"],
                ],
            ])
            #expect(created["tag"] == "c1")
            let object = try #require(created.result, "create failed: \(created)")
            let id = try #require(object["id"]?.stringValue)
            #expect(id.utf8.count == 26, "a server-made id is 26 characters: \(id)")
            #expect(object["collection"] == "Task")
            #expect(object["version"] == 1)
            #expect(object["createdAt"]?.stringValue != nil)
            #expect(object["createdAt"] == object["updatedAt"])
            #expect(object["title"] == "Buy milk")
            #expect(object["done"] == false)
            #expect(object["n"] == 3)
            #expect(object["tags"] == ["a", "b"])
            #expect(object["address"] == ["city": "Oslo", "zip": "0150"])

            let fetched = try connection.request(["op": "get", "collection": "Task", "id": .string(id), "tag": 7])
            #expect(fetched["tag"] == 7)
            #expect(fetched.result == object)

            let updated = try connection.request([
                "op": "update", "collection": "Task", "id": .string(id), "ifVersion": 1,
                "patch": ["done": true, "tags": .null, "address": ["zip": .null, "street": "Main"], "note": "new"],
            ])
            let after = try #require(updated.result, "update failed: \(updated)")
            #expect(updated["tag"] == nil, "no tag in the request, none in the answer")
            #expect(after["version"] == 2)
            #expect(after["title"] == "Buy milk")
            #expect(after["done"] == true)
            #expect(after["tags"] == nil, "null in a merge patch removes the field")
            #expect(after["address"] == ["city": "Oslo", "street": "Main"])
            #expect(after["note"] == "new")
            #expect(after["createdAt"] == object["createdAt"])
            #expect((after["updatedAt"]?.stringValue ?? "") >= (object["updatedAt"]?.stringValue ?? "~"))
            #expect(try connection.request(["op": "get", "collection": "Task", "id": .string(id)]).result == after)

            let deleted = try connection.request(["op": "delete", "collection": "Task", "id": .string(id)])
            #expect(deleted.result == ["id": .string(id), "version": 3])

            let gone = try connection.request(["op": "get", "collection": "Task", "id": .string(id)])
            #expect(gone.errorCode == "not_found")
            #expect(gone.errorMessage?.contains(id) == true, "\(gone)")

            let history = try connection.request(["op": "history", "collection": "Task", "id": .string(id)])
            let events = try #require(history.result?["events"]?.arrayValue, "\(history)")
            #expect(events.map { $0["type"] } == ["created", "updated", "deleted"])
            #expect(events.map { $0["version"] } == [1, 2, 3])
            #expect(try connection.request(["op": "count", "collection": "Task"]).result?["count"] == 0)
        }
    }

    /// Strings with escapes and non-ASCII text, integers at the edges of 64 bits, doubles, nesting,
    /// empty containers and typed values come back as they went in: in the answer, from get, and in
    /// the log.
    @Test func valuesRoundTripExactly() throws {
        try withRunningDaemon { daemon in
            let data: JSON = [
                "text": "line\nbreak\ttab \"quoted\" back\\slash \u{01} \u{1F} \u{7F} \u{2028} café 😀 日本 /",
                "empty": "",
                "max": .int(Int64.max), "min": .int(Int64.min), "zero": 0, "negative": -42,
                "fraction": 0.1, "huge": 1e300, "tiny": .double(.leastNonzeroMagnitude), "negativeFraction": -2.5,
                "flags": [true, false, .null], "nested": ["a": ["b": ["c": [1, [2, [3]]]]]],
                "emptyArray": [], "emptyObject": [:], "nothing": .null,
                "when": ["$date": "2026-12-01T09:00:00Z"], "link": ["$ref": "Task/t1"],
            ]
            let connection = try daemon.connect()
            let created = try connection.request(["op": "create", "collection": "Value", "id": "v", "data": data])
            let fetched = try connection.request(["op": "get", "collection": "Value", "id": "v"])
            let events = try connection.request(["op": "events"])
            for (key, value) in (data.objectValue ?? [:]).map({ ($0.key, $0.value) }) {
                #expect(
                    created.result?[key] == value,
                    "create answer, \(key): \(created.result?[key].map { "\($0)" } ?? "missing")")
                #expect(
                    fetched.result?[key] == value, "get, \(key): \(fetched.result?[key].map { "\($0)" } ?? "missing")")
                #expect(events.result?["events"]?.arrayValue?.first?["data"]?[key] == value, "event data, \(key)")
            }
        }
    }

    @Test func clientChosenIDsAreKeptAndTakenOnlyOnce() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let created = try connection.request([
                "op": "create", "collection": "Task", "id": "t-1:a.b_c", "data": ["n": 1],
            ])
            #expect(created.result?["id"] == "t-1:a.b_c")
            let again = try connection.request([
                "op": "create", "collection": "Task", "id": "t-1:a.b_c", "data": ["n": 2],
            ])
            #expect(again.errorCode == "conflict", "\(again)")
            #expect(try connection.request(["op": "get", "collection": "Task", "id": "t-1:a.b_c"]).result?["n"] == 1)
        }
    }

    @Test func staleIfVersionConflictsAndChangesNothing() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            let created = try connection.request(["op": "create", "collection": "Task", "id": "t1", "data": ["n": 1]])
            #expect(created.version == 1)
            let updated = try connection.request([
                "op": "update", "collection": "Task", "id": "t1", "patch": ["n": 2], "ifVersion": 1,
            ])
            #expect(updated.version == 2)
            let before = try connection.request(["op": "get", "collection": "Task", "id": "t1"])
            let head = try connection.request(["op": "stats"]).result?["lastSeq"]

            let stale = try connection.request([
                "op": "update", "collection": "Task", "id": "t1", "patch": ["n": 99], "ifVersion": 1, "tag": "u",
            ])
            #expect(stale.errorCode == "conflict", "\(stale)")
            #expect(stale["tag"] == "u")
            #expect(stale["error"]?["currentVersion"] == 2, "\(stale)")
            #expect(stale["error"]?["expectedVersion"] == 1, "\(stale)")

            let staleDelete = try connection.request(["op": "delete", "collection": "Task", "id": "t1", "ifVersion": 5])
            #expect(staleDelete.errorCode == "conflict", "\(staleDelete)")
            #expect(staleDelete["error"]?["currentVersion"] == 2, "\(staleDelete)")

            #expect(try connection.request(["op": "get", "collection": "Task", "id": "t1"]) == before)
            #expect(
                try connection.request(["op": "stats"]).result?["lastSeq"] == head, "a refused write leaves no event")
            let history = try connection.request(["op": "history", "collection": "Task", "id": "t1"])
            #expect(history.result?["events"]?.arrayValue?.count == 2)
        }
    }

    @Test func missingObjectsAreNotFound() throws {
        try withRunningDaemon { daemon in
            let connection = try daemon.connect()
            _ = try connection.request(["op": "create", "collection": "Task", "id": "present", "data": ["n": 1]])
            let requests: [JSON] = [
                ["op": "get", "collection": "Task", "id": "absent"],
                ["op": "get", "collection": "Nothing", "id": "present"],
                ["op": "update", "collection": "Task", "id": "absent", "patch": ["n": 2]],
                ["op": "update", "collection": "Task", "id": "absent", "patch": ["n": 2], "ifVersion": 1],
                ["op": "delete", "collection": "Task", "id": "absent"],
                ["op": "delete", "collection": "Task", "id": "absent", "ifVersion": 1],
                ["op": "history", "collection": "Task", "id": "absent"],
            ]
            for request in requests {
                let response = try connection.request(request)
                #expect(response.errorCode == "not_found", "\(request) → \(response)")
                let named = request["id"]?.stringValue ?? ""
                #expect(response.errorMessage?.contains(named) == true, "the message names the id: \(response)")
            }
            let stats = try connection.request(["op": "stats"])
            #expect(stats.result?["lastSeq"] == 1, "\(stats)")
            #expect(stats.result?["objects"] == 1, "\(stats)")
        }
    }
}
