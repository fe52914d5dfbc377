import Glibc

/// What stops a run: a system call that failed, a peer that hung up or answered out of protocol.
enum BenchError: Error, CustomStringConvertible {
    case system(String, Int32)
    case closed(String)
    case protocolViolation(String)
    case setup(String)

    var description: String {
        switch self {
        case .system(let call, let code): return "\(call): \(String(cString: strerror(code)))"
        case .closed(let path): return "the daemon on \(path) closed the connection"
        case .protocolViolation(let detail): return "unexpected answer: \(detail)"
        case .setup(let detail): return detail
        }
    }
}
