import Testing

@testable import FolioStore

/// `NodeTable` (the tree-node cache's table) against a dictionary doing the same: random sets,
/// removals, takes and stores back, clears, over few keys (collisions, reuse of slots) and many
/// (growth).
@Suite struct NodeTableTests {
    @Test(arguments: [8, 5_000])
    func behavesLikeADictionary(keySpace: Int) {
        var table = NodeTable()
        var model: [TreeNodeCache.NodeKey: [UInt8]?] = [:]
        var generator = SeededGenerator(seed: UInt64(keySpace))
        var taken: [TreeNodeCache.NodeKey: [UInt8]] = [:]
        for step in 0..<40_000 {
            let key = TreeNodeCache.NodeKey(
                tree: UInt32(generator.next() % 3), node: generator.next() % UInt64(keySpace))
            switch generator.next() % 10 {
            case 0...3:
                let bytes = [UInt8](repeating: UInt8(step & 0xFF), count: Int(generator.next() % 5))
                table.set(key, bytes)
                model[key] = .some(bytes)
                taken[key] = nil
            case 4:
                table.set(key, nil)
                model[key] = .some(nil)
                taken[key] = nil
            case 5, 6:
                // What CountedTree does: take a record out, then store it back (changed).
                let got = table.take(key)
                let expected: [UInt8]? = model[key] ?? nil
                #expect(got == expected, "take of \(key) at step \(step)")
                if let got {
                    model[key] = nil
                    taken[key] = got
                    #expect(table[key] == nil, "a taken record is absent until stored back")
                    if generator.next() % 2 == 0 {
                        table.set(key, got + [1])
                        model[key] = .some(got + [1])
                        taken[key] = nil
                    }
                }
            case 7 where step % 997 == 0:
                table.removeAll()
                model.removeAll()
                taken.removeAll()
            default:
                let expected: [UInt8]?? = model[key]
                #expect(table[key] == expected, "lookup of \(key) at step \(step)")
            }
            #expect(table.count == model.count)
        }
        var seen: [TreeNodeCache.NodeKey: [UInt8]?] = [:]
        table.forEach { key, bytes in
            #expect(seen[key] == nil, "\(key) listed twice")
            seen[key] = .some(bytes)
        }
        #expect(seen == model)
    }
}
