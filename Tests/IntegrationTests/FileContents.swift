import Glibc

/// A file's bytes, read with read(2): `Data(contentsOf:)` and `String(contentsOfFile:)` leak the
/// buffer they read an empty file into (4 KiB each, which LeakSanitizer reports in `make test-asan`),
/// and tests poll files that are still empty.
func fileContents(_ path: String) throws -> [UInt8] {
    let file = open(path, O_RDONLY | O_CLOEXEC)
    guard file >= 0 else { throw DaemonError("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { close(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(file, $0.baseAddress!, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            throw DaemonError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        if count == 0 { return bytes }
        bytes.append(contentsOf: chunk[..<count])
    }
}

/// A file's text, empty if it cannot be read.
func fileText(_ path: String) -> String {
    String(decoding: (try? fileContents(path)) ?? [], as: UTF8.self)
}
