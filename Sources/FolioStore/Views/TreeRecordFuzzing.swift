/// The body of the `tree-record` fuzz target (fuzz/Harness): any bytes as a record of a counted
/// tree, the way a damaged store would hand them over. It lives here because the types it drives
/// are the store's own. Under the fuzz build's AddressSanitizer, any read or write outside the
/// record is a finding; the properties below are the others.
public enum TreeRecordFuzzing {
    /// Nil when every property held; otherwise what failed.
    public static func run(_ bytes: UnsafeRawBufferPointer) -> String? {
        // Read in place as a leaf (a reader's page): each entry lies inside the record, or is nil.
        if let leaf = RawLeaf(bytes) {
            _ = (leaf.previous, leaf.next)
            for index in 0..<leaf.count {
                guard let entry = leaf.entry(index) else { continue }
                if entry.count > 0,
                    entry.baseAddress! < bytes.baseAddress!
                        || entry.baseAddress! + entry.count > bytes.baseAddress! + bytes.count
                {
                    return "leaf entry \(index) lies outside the record"
                }
            }
        }
        _ = CountedTree.problem(in: bytes, node: CountedTree.headerNode)
        guard TreeNode.problem(in: bytes) == nil else { return nil }

        // An accepted record is laid out exactly as the tree lays out one with its entries.
        let node = TreeNode(bytes: Array(bytes))
        let entries = node.entries
        let rebuilt =
            node.isLeaf
            ? TreeNode.leaf(previous: node.previous, next: node.next, keys: entries)
            : TreeNode.branch(children: entries)
        if rebuilt.bytes != node.bytes { return "an accepted record is not the one its entries build" }

        // Every read a tree makes of a node (its entries need not be in order: a damaged record).
        let probe = Array(bytes.prefix(24))
        _ = node.search(probe)
        _ = node.search(probe, strictly: true)
        for entry in entries.prefix(64) { _ = node.search(entry) }
        if !node.isLeaf {
            for index in 0..<node.count {
                if node.entry(index).count < 16 {
                    return "an accepted branch has child \(index) of \(node.entry(index).count) bytes"
                }
                _ = (node.childID(index), node.childCount(index), node.fence(index))
            }
            _ = node.childIndex(for: probe)
            _ = node.child(holdingRank: UInt64(bytes.count))
            _ = node.childCounts(before: node.count)
        }

        // Edits keep the layout: an entry put in and taken out again, a split and its halves
        // joined again, each giving back the record's bytes.
        if let first = entries.first, bytes.count + first.count + 2 < Int(UInt16.max) {
            var edited = node
            edited.insert(first, at: 0)
            if edited.count != node.count + 1 || Array(edited.entry(0)) != first {
                return "an inserted entry is not there"
            }
            edited.remove(at: 0)
            if edited.bytes != node.bytes { return "an entry put in and taken out changed the record" }
        }
        if node.count >= 2 {
            var left = node
            let right = left.splitOff()
            if left.count + right.count != node.count || left.count == 0 || right.count == 0 {
                return "a split of \(node.count) entries gave \(left.count) and \(right.count)"
            }
            for half in [left, right] {
                if let problem = half.bytes.withUnsafeBytes({ TreeNode.problem(in: $0) }) {
                    return "half of a split is refused: \(problem)"
                }
            }
            left.append(contentsOf: right)
            if left.bytes != node.bytes { return "a split joined again changed the record" }
        }
        return nil
    }
}
