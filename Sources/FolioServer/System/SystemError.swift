import Glibc

/// A failed system call: its name and `errno`.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32

    public init(_ call: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// Runs a system call, retrying on `EINTR`. `EAGAIN` / `EWOULDBLOCK` come back as nil ("would block");
/// any other failure throws naming the call.
@discardableResult
func syscall<T: FixedWidthInteger>(_ name: StaticString, _ body: () -> T) throws(SystemError) -> T? {
    while true {
        let result = body()
        if result >= 0 { return result }
        switch errno {
        case EINTR: continue
        case EAGAIN, EWOULDBLOCK: return nil
        default: throw SystemError("\(name)")
        }
    }
}
