/// A test harness failure around the daemon process: it did not start, stop or answer as it must.
struct DaemonError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
