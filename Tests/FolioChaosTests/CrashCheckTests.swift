import FolioJSON
import Testing

@testable import folio_chaos

/// The pieces of the crash loop's checks that need no foliod: the hash chain, splitting an
/// `events` answer into the events' own bytes, merge patches, and the sets of possible states.
@Suite struct CrashCheckTests {
    /// Event 1 of PROTOCOL.md §7's export, as foliod sent it.
    static let firstEvent =
        #"{"seq":1,"type":"created","at":"2026-11-30T01:41:09.675Z","collection":"Task","id":"t1","version":1,"data":{"title":"Buy milk","done":false,"n":3,"due":{"$date":"2026-12-01T09:00:00+01:00"},"tags":["home","shop"]},"by":{"uid":0,"gid":0,"pid":1004},"hash":"1ec41fb3fa4ee03745e4e79f78ade5f89eb76197e31855c577f86e9e567414fa"}"#

    @Test func theChainHashOfTheProtocolsFirstEventChecksOutAndAChangedByteBreaksIt() throws {
        let genesis = [UInt8](repeating: 0, count: 32)
        let hash = try LogReader.chainHash(after: genesis, event: Array(Self.firstEvent.utf8), seq: 1)
        #expect(hex(hash) == "1ec41fb3fa4ee03745e4e79f78ade5f89eb76197e31855c577f86e9e567414fa")
        let changed = Self.firstEvent.replacingOccurrences(of: "Buy milk", with: "Buy mild")
        #expect(throws: Violation.self) { try LogReader.chainHash(after: genesis, event: Array(changed.utf8), seq: 1) }
        #expect(throws: Violation.self) {
            try LogReader.chainHash(after: hash, event: Array(Self.firstEvent.utf8), seq: 1)
        }
    }

    @Test func anEventsAnswerSplitsIntoEachEventsExactBytes() throws {
        let tricky =
            #"{"seq":2,"type":"created","at":"2026-11-30T01:41:09.676Z","collection":"Note","id":"n1","version":1,"data":{"text":"} ] \" {["},"by":{"uid":0,"gid":0,"pid":1},"hash":"00"}"#
        let line = #"{"ok":true,"result":{"events":["# + Self.firstEvent + "," + tricky + #"],"lastSeq":2}}"#
        let elements = try LogReader.elements(ofEventsIn: Array(line.utf8))
        #expect(elements.map { String(decoding: $0, as: UTF8.self) } == [Self.firstEvent, tricky])
        #expect(
            try LogReader.elements(ofEventsIn: Array(#"{"ok":true,"result":{"events":[],"lastSeq":0}}"#.utf8)).isEmpty)
    }

    @Test func mergePatchFollowsTheProtocolsExample() throws {
        // PROTOCOL.md §5.4, m2 then m3.
        let start = try #require(
            try JSONParser.parse(
                #"{"v":1,"due":{"$date":"2026-12-01T09:00:00+01:00"},"o":{"a":1,"b":{"c":2}},"arr":[1,2]}"#
            ).objectValue)
        let m2 = try #require(
            try JSONParser.parse(
                #"{"o":{"b":{"c":null,"d":3}},"due":{"$date":"2026-12-02T00:00:00Z"},"x":{"y":{"z":null,"w":1}}}"#
            ).objectValue)
        let m3 = try #require(try JSONParser.parse(#"{"due":{"later":true}}"#).objectValue)
        let expected = try #require(
            try JSONParser.parse(#"{"v":1,"due":{"later":true},"o":{"a":1,"b":{"d":3}},"arr":[1,2],"x":{"y":{"w":1}}}"#)
                .objectValue)
        #expect(MergePatch.apply(m3, to: MergePatch.apply(m2, to: start)) == expected)
    }

    @Test func anUnansweredWriteAllowsBeforeAndAfterButNothingInBetween() throws {
        let before = ObjectState(version: 3, data: ["n": 1, "w": "a"])
        let patch: JSONObject = ["n": 2, "w": "b"]
        let update = UpdateOperation(
            key: ObjectKey(collection: "Task", id: "t1"), patch: patch, ifVersion: nil, nonce: "b")
        var possible = Possibilities(before)
        possible.widen(by: update.transition)
        #expect(possible.states.count == 2)
        // Half applied: the version moved, the data did not.
        #expect(throws: Violation.self) {
            var copy = possible
            try copy.settle(on: ObjectState(version: 4, data: before.data), "t1")
        }
        var applied = possible
        try applied.settle(on: ObjectState(version: 4, data: ["n": 2, "w": "b"]), "t1")
        var absent = possible
        try absent.settle(on: before, "t1")
    }

    @Test func anAcknowledgementMustFollowFromAPossibleState() throws {
        let update = UpdateOperation(
            key: ObjectKey(collection: "Task", id: "t1"), patch: ["n": 2], ifVersion: 3, nonce: "b")
        var possible = Possibilities(ObjectState(version: 3, data: ["n": 1]))
        #expect(throws: Violation.self) {
            var copy = possible
            try copy.acknowledge(ObjectState(version: 5, data: ["n": 2]), by: update.transition, "u")
        }
        #expect(throws: Violation.self) {
            var copy = possible
            try copy.acknowledge(ObjectState(version: 4, data: ["n": 1]), by: update.transition, "u")
        }
        #expect(throws: Violation.self) {
            var copy = possible
            try copy.refuse(code: "not_found", byConstraint: false, by: update.transition, "u")
        }
        try possible.acknowledge(ObjectState(version: 4, data: ["n": 2]), by: update.transition, "u")
        #expect(possible.single == ObjectState(version: 4, data: ["n": 2]))
    }

    /// A created event of a generated id, made by client `client`'s write (its nonce `wCx1`).
    private func created(_ seq: Int64, id: String, client: Int) throws -> LoggedEvent {
        let text =
            #"{"seq":\#(seq),"type":"created","at":"2026-12-07T05:00:00.000Z","collection":"Doc","id":"\#(id)","version":1,"data":{"w":"w\#(client)x1"}}"#
        return try LoggedEvent(try #require(try JSONParser.parse(text).objectValue), text: text)
    }

    @Test func generatedIDsIncreaseInTheLogOfOneFoliodAndPerNodeInACluster() throws {
        let later = "01M97E0K4XF1XM9G3GBP5BT4DY"
        let earlier = "01M97E0K4WE9Y6CYFQ1VFHTF5F"
        let hash = [UInt8](repeating: 0, count: 32)
        // One foliod: one generator, so an id below the last one is a violation.
        let single = LoggedState()
        try single.apply(try created(1, id: later, client: 0), hash: hash)
        #expect(throws: Violation.self) { try single.apply(try created(2, id: earlier, client: 1), hash: hash) }
        // Two nodes: client 1 writes through node 2, whose ids may come after node 1's in the log.
        let cluster = LoggedState(generators: 2)
        try cluster.apply(try created(1, id: later, client: 0), hash: hash)
        try cluster.apply(try created(2, id: earlier, client: 1), hash: hash)
        // But client 2 writes through node 1 again: below node 1's last id is a violation.
        #expect(throws: Violation.self) {
            try cluster.apply(try created(3, id: "01M97E0K4XAAAAAAAAAAAAAAAA", client: 2), hash: hash)
        }
    }
}
