import Testing

@testable import FolioStore

/// `ConflictKey`, the read and write keys a cluster node sends with each proposal: PostgreSQL keeps
/// them (`folio_keys`) and compares them with the keys of later appends, so their bytes must not
/// change from one build to the next, and equal keys must hash alike.
@Suite struct ConflictKeyTests {
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func keysKeepTheirBytes() {
        #expect(
            ConflictKey.object("Item", "i1").bytes == bytes("o") + [0, 0, 0, 4] + bytes("Item") + [0, 0, 0, 2]
                + bytes("i1"))
        #expect(
            ConflictKey.referrers("Item", "i1").bytes == bytes("l") + [0, 0, 0, 4] + bytes("Item") + [0, 0, 0, 2]
                + bytes("i1"))
        #expect(
            ConflictKey.unique("byEmail", [1, 2, 3]).bytes == bytes("u") + [0, 0, 0, 7] + bytes("byEmail") + [
                0, 0, 0, 3, 1, 2, 3,
            ])
        #expect(ConflictKey.file("a.png").bytes == bytes("f") + [0, 0, 0, 5] + bytes("a.png"))
        #expect(ConflictKey.request("").bytes == bytes("q") + [0, 0, 0, 0])
        #expect(ConflictKey.catalog.bytes == bytes("k"))
        let long = String(repeating: "x", count: 300)
        #expect(ConflictKey.request(long).bytes == bytes("q") + [0, 0, 1, 44] + bytes(long))
    }

    @Test func equalKeysHashAlikeAndOrderByTheirBytes() {
        let keys = [
            ConflictKey.object("Item", "i1"), ConflictKey.object("Item", "i2"), ConflictKey.object("Ite", "mi1"),
            ConflictKey.request("k"), ConflictKey.catalog, ConflictKey.unique("v", [0xFF]), ConflictKey.unique("v", []),
        ]
        var seen = Set(keys)
        #expect(seen.count == keys.count)
        seen.insert(ConflictKey.object("Item", "i1"))
        #expect(seen.count == keys.count)
        #expect(Set([ConflictKey.object("Item", "i1")]).contains(ConflictKey.object("Item", "i1")))
        for a in keys {
            for b in keys {
                #expect((a == b) == (a.bytes == b.bytes))
                #expect((a < b) == a.bytes.lexicographicallyPrecedes(b.bytes))
                if a == b { #expect(a.hashValue == b.hashValue) }
            }
        }
    }

    @Test func sortedUniqueKeepsEachKeyOnceInOrder() {
        let keys = [
            ConflictKey.object("b", "1"), ConflictKey.catalog, ConflictKey.object("a", "1"), ConflictKey.catalog,
            ConflictKey.object("b", "1"),
            ConflictKey.request("r"),
        ]
        let unique = ConflictKey.sortedUnique(keys)
        #expect(unique == Array(Set(keys)).sorted())
        #expect(unique.count == 4)
        #expect(ConflictKey.sortedUnique([]).isEmpty)
    }
}
