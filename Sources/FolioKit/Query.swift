import FolioJSON

/// A query of a collection or a view, built step by step; nothing is sent until `find`, `first`,
/// `count`, `pages` or `live`.
///
/// ```swift
/// let items = try await TodoListItem.query(\.title == "x").sort(\.title).limit(20).find(on: folio)
/// ```
public struct Query<Record: FolioRecord>: Sendable {
    enum Source: Sendable {
        case collection(String)
        case view(String)
    }

    let source: Source
    private var conditions: [QueryCondition<Record>] = []
    private var sortFields: [Result<String, FolioError>] = []
    private var isDescending = false
    private var limitCount: Int?
    private var includePaths: [Result<String, FolioError>] = []

    init(source: Source) {
        self.source = source
    }

    /// Adds conditions, all of which must hold.
    public func filter(_ conditions: QueryCondition<Record>...) -> Query { filter(conditions) }

    func filter(_ conditions: [QueryCondition<Record>]) -> Query {
        var query = self
        query.conditions += conditions
        return query
    }

    /// Sorts by the field (then by the next `sort`, ties by id). The default is creation order.
    public func sort<Value>(_ keyPath: KeyPath<Record, Value>, descending: Bool = false) -> Query {
        var query = self
        query.sortFields.append(
            Result { try FieldProbe<Record>.shared.name(of: keyPath) }.map { descending ? "-" + $0 : $0 }
                .mapError { $0 as! FolioError })
        return query
    }

    /// Sorts by a field path (`"meta.by"`, `"-n"` for descending).
    public func sort(_ fieldPath: String) -> Query {
        var query = self
        query.sortFields.append(.success(fieldPath))
        return query
    }

    /// Reads the whole order backwards (`order: "desc"`), ties included.
    public func reversed() -> Query {
        var query = self
        query.isDescending.toggle()
        return query
    }

    /// At most `count` items per page (0–1000; the server's default is 100).
    public func limit(_ count: Int) -> Query {
        var query = self
        query.limitCount = count
        return query
    }

    /// Replaces the reference (or file) in this field by its target in the results.
    public func include<Value>(_ keyPath: KeyPath<Record, Value>) -> Query {
        var query = self
        query.includePaths.append(
            Result { try FieldProbe<Record>.shared.name(of: keyPath) }.mapError { $0 as! FolioError })
        return query
    }

    /// Replaces the references on a dotted path (`"items.assignee"`) by their targets.
    public func include(_ path: String) -> Query {
        var query = self
        query.includePaths.append(.success(path))
        return query
    }

    var hasIncludes: Bool { !includePaths.isEmpty }

    /// The protocol's `where` for the conditions; nil without any.
    func whereClause() throws -> JSONObject? {
        guard !conditions.isEmpty else { return nil }
        return try QueryCondition.all(conditions).clause.get()
    }

    /// The fields of `list`, `count` and a live query's `query`: the source, where and sort, and
    /// with `paging`, order and limit.
    func fields(paging: Bool) throws -> JSONObject {
        var fields = JSONObject()
        switch source {
        case .collection(let name): fields["collection"] = .string(name)
        case .view(let name): fields["view"] = .string(name)
        }
        if let clause = try whereClause() { fields["where"] = .object(clause) }
        if !sortFields.isEmpty { fields["sort"] = .array(try sortFields.map { .string(try $0.get()) }) }
        if paging {
            if isDescending { fields["order"] = "desc" }
            if let limitCount { fields["limit"] = .int(Int64(limitCount)) }
        }
        return fields
    }

    /// One page of `list`: its items, and the cursor of the next page (nil after the last).
    func page(after cursor: String?, on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> (
        items: [Record], next: String?, total: Int
    ) {
        var request = try fields(paging: true)
        request["op"] = "list"
        if !includePaths.isEmpty { request["include"] = .array(try includePaths.map { .string(try $0.get()) }) }
        if let cursor { request["after"] = .string(cursor) }
        let result = try await folio.request(request)
        guard case .object(let page) = result, case .array(let items)? = page["items"] else {
            throw FolioError.decoding("list answered \(result)")
        }
        return (
            try items.map { try RecordDecoder.decode(Record.self, from: $0) }, page["next"]?.stringValue,
            Int(page["total"]?.integerValue ?? 0)
        )
    }

    /// The first page: at most `limit` records (100 if no limit was set).
    public func find(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> [Record] {
        try await page(after: nil, on: folio).items
    }

    /// Every matching record, reading page after page.
    public func findAll(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> [Record] {
        var all: [Record] = []
        for try await page in pages(on: folio) { all += page }
        return all
    }

    /// The first record in the query's order, or nil.
    public func first(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> Record? {
        try await limit(1).find(on: folio).first
    }

    /// How many records match.
    public func count(on folio: Folio, isolation: isolated (any Actor)? = #isolation) async throws -> Int {
        var request = try fields(paging: false)
        request["op"] = "count"
        let result = try await folio.request(request)
        guard case .object(let answer) = result, let count = answer["count"]?.integerValue else {
            throw FolioError.decoding("count answered \(result)")
        }
        return Int(count)
    }

    /// The pages of the query, following the server's cursors: inserts and deletes elsewhere
    /// neither shift nor repeat items (PROTOCOL.md §6.4).
    public func pages(on folio: Folio) -> QueryPages<Record> {
        QueryPages(query: self, folio: folio)
    }
}

/// The pages of a query, as an `AsyncSequence` of arrays of records.
public struct QueryPages<Record: FolioRecord>: AsyncSequence, Sendable {
    public typealias Element = [Record]
    let query: Query<Record>
    let folio: Folio

    public func makeAsyncIterator() -> Iterator { Iterator(query: query, folio: folio) }

    public struct Iterator: AsyncIteratorProtocol {
        let query: Query<Record>
        let folio: Folio
        var cursor: String?
        var isDone = false

        init(query: Query<Record>, folio: Folio) {
            self.query = query
            self.folio = folio
        }

        public mutating func next() async throws -> [Record]? { try await next(isolation: nil) }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> [Record]? {
            while !isDone {
                let page = try await query.page(after: cursor, on: folio)
                cursor = page.next
                isDone = page.next == nil
                if !page.items.isEmpty { return page.items }
            }
            return nil
        }
    }
}
