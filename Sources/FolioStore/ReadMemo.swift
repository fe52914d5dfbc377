import LMDB

/// What a reader's snapshots read of the catalog (views, collections' trees, the tree of
/// references), of the view buffers' state and of trees' headers and branches, kept for as long as
/// the reader's snapshots are of the same committed state. LMDB numbers each committed state (its
/// transaction id), so two snapshots of one environment with the same id hold the same bytes: what
/// the first read, the next may take as read. A page of a view otherwise looked its view up and
/// decoded it, and read the tree's header, the buffer state and the tree's upper nodes out of LMDB
/// every time: about 10,000 of the 100,000 instructions of a page of 20 (callgrind), and a third of
/// a count's 19,000. Any commit gives the next snapshot a new id, and the memo starts again empty.
///
/// Copies only, never pointers into the map: a memo outlives the transactions that filled it.
/// Used by one thread at a time, as the reader that owns it.
final class ReadMemo {
    /// Branch and header records kept at most (bytes): a tree of a million keys has a few hundred
    /// branches; a page reads a handful of them.
    static let maxRecordBytes = 1 << 20
    /// What an entry costs besides its record's bytes (its key, the array's header, the table's
    /// slot), counted against `maxRecordBytes`.
    static let entryOverhead = 64

    /// The buffers of this reader's pages (`PageWriter`), which depend on a collection's name only
    /// and so are kept across commits.
    let objectHeads = ObjectHeads()

    /// The committed state (LMDB transaction id) what is held was read from; -1: none yet.
    private var transaction = -1
    private var views: [String: Catalog.View] = [:]
    private var viewsOn: [String: [Catalog.View]] = [:]
    private var collectionTrees: [String: CountedTree] = [:]
    private var referenceTree: CountedTree?
    private var records: [TreeNodeCache.NodeKey: [UInt8]] = [:]
    private var recordBytes = 0
    private var bufferState: BufferState?

    /// Called before a snapshot reads through the memo (`Snapshot.storeTxn`): forgets everything
    /// read from another committed state.
    func enter(_ txn: Transaction) {
        let id = txn.id
        guard id != transaction else { return }
        transaction = id
        if !views.isEmpty { views.removeAll(keepingCapacity: true) }
        if !viewsOn.isEmpty { viewsOn.removeAll(keepingCapacity: true) }
        if !collectionTrees.isEmpty { collectionTrees.removeAll(keepingCapacity: true) }
        referenceTree = nil
        if !records.isEmpty { records.removeAll(keepingCapacity: true) }
        recordBytes = 0
        bufferState = nil
    }

    /// The view named `name`, read by `read` the first time (absent views are not kept).
    func view(_ name: String, read: () throws -> Catalog.View?) rethrows -> Catalog.View? {
        if let view = views[name] { return view }
        guard let view = try read() else { return nil }
        views[name] = view
        return view
    }

    /// The views of `collection`, read by `read` the first time.
    func views(on collection: String, read: () throws -> [Catalog.View]) rethrows -> [Catalog.View] {
        if let views = viewsOn[collection] { return views }
        let views = try read()
        viewsOn[collection] = views
        return views
    }

    /// The creation-order tree of `collection`, read by `read` the first time (absent: not kept).
    func collectionTree(_ collection: String, read: () throws -> CountedTree?) rethrows -> CountedTree? {
        if let tree = collectionTrees[collection] { return tree }
        guard let tree = try read() else { return nil }
        collectionTrees[collection] = tree
        return tree
    }

    /// The tree of references, read by `read` the first time (absent: not kept).
    func referenceTree(read: () throws -> CountedTree?) rethrows -> CountedTree? {
        if let referenceTree { return referenceTree }
        referenceTree = try read()
        return referenceTree
    }

    /// A tree's record, read by `read` the first time; headers and branches are kept, leaves
    /// are not (a page reads its own leaves once, and there are a hundred times more of them).
    func treeRecord(_ key: TreeNodeCache.NodeKey, read: () throws -> [UInt8]?) rethrows -> [UInt8]? {
        if let record = records[key] { return record }
        guard let record = try read() else { return nil }
        let isHeader = key.node == CountedTree.headerNode
        let cost = record.count + Self.entryOverhead
        if (isHeader || record.first == TreeNode.branchKind) && recordBytes + cost <= Self.maxRecordBytes {
            records[key] = record
            recordBytes += cost
        }
        return record
    }

    /// The view buffers' state, read by `read` the first time.
    func bufferState(read: () throws -> BufferState) rethrows -> BufferState {
        if let bufferState { return bufferState }
        let state = try read()
        bufferState = state
        return state
    }
}
