import CFolioSystem
import Glibc

/// A plain POSIX thread running one closure, joined explicitly.
struct ClientThread {
    private let thread: pthread_t

    init(name: String, _ body: @escaping @Sendable () -> Void) {
        final class Start: @unchecked Sendable {
            let body: @Sendable () -> Void
            let name: String
            init(_ body: @escaping @Sendable () -> Void, _ name: String) {
                self.body = body
                self.name = name
            }
        }
        var thread = pthread_t()
        let start = Unmanaged.passRetained(Start(body, name)).toOpaque()
        let rc = pthread_create(
            &thread, nil,
            { pointer in
                let start = Unmanaged<Start>.fromOpaque(pointer!).takeRetainedValue()
                folio_set_thread_name(String(start.name.prefix(15)))
                start.body()
                return nil
            }, start)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        self.thread = thread
    }

    func join() { pthread_join(thread, nil) }
}
