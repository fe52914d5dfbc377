import FolioJSON
import FolioModel

/// A decoded request line: what to do, and the tag to echo.
public struct Request: Sendable {
    /// The client's correlation tag; nil when absent.
    public var tag: Tag?
    public var operation: Operation

    public init(tag: Tag?, operation: Operation) {
        self.tag = tag
        self.operation = operation
    }
}

extension Request {
    public enum Operation: Sendable {
        case hello
        /// create, update, delete, view.define, view.drop: executed by the writer.
        case command(Command)
        case get(collection: String, id: String, at: PointInTime?)
        case list(Query)
        case count(Query)
        case history(collection: String, id: String)
        case events(after: UInt64, limit: Int)
        case stats
        case viewList
        case watch(after: UInt64?, collection: String?)
        case unwatch(watch: JSON)
        case verify
        case backup(directory: String)

        /// Whether the operation changes stored data (and so goes to the writer).
        public var isWrite: Bool {
            if case .command = self { return true }
            return false
        }
    }
}
