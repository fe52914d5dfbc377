import FolioModel

/// How a query was answered, for `explain`.
public struct QueryPlan: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// A named view answered it.
        case view(String)
        /// The collection's creation-order index answered it.
        case creationOrder(String)
        /// Every object of the collection was read, filtered and sorted.
        case scan(String)
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
}
