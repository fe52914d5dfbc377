import FolioModel

/// How a query was answered, for `explain`.
public struct QueryPlan: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// A named view answered it.
        case view(String)
        /// A range of a view answered it: the objects whose first `fixed` sort fields equal the
        /// query's values for them.
        case viewRange(String, fixed: [String])
        /// The collection's creation-order index answered it.
        case creationOrder(String)
        /// Every object of the collection was read, filtered and sorted.
        case scan(String)
        /// The reference index answered it: the referrers of an object from one field, by id.
        case references(String)
        /// Every referrer of an object from one field was read, filtered and sorted.
        case referenceScan(String)
        /// The references of one object's field, in their order.
        case links(String)
        /// Every object the field refers to was read, filtered and sorted.
        case linkScan(String)
    }

    public var source: Source
    /// Index entries or objects read to answer.
    public var examined: Int
}

/// One page of a `list`, or a `count`.
public struct QueryResult: Sendable {
    /// The items' wire JSON, comma-separated, without brackets.
    public var items: [UInt8] = []
    public var itemCount = 0
    /// How many objects match in all.
    public var total = 0
    /// Where the next page starts; nil after the last page.
    public var next: PageCursor?
    public var plan: QueryPlan
    /// The answer holds fewer included objects than `include` asked for (`Snapshot.includeLimit`).
    public var includeTruncated = false
}
