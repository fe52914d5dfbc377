import Foundation

/// A value shared between threads, touched only under its lock: for tests and the tools (folio-bench,
/// folio-chaos). An `NSLock`, a pthread mutex underneath, which ThreadSanitizer sees; on Linux
/// `Synchronization.Mutex` is a futex it does not, and `make test-tsan` reports two accesses under
/// one such Mutex as a race.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    public var current: Value { withLock { $0 } }
}
