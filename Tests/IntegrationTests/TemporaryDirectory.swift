import Foundation

/// Runs `body` with a new empty directory, removed afterwards whatever happens. The path is short,
/// so that a socket inside it fits `sun_path` (108 bytes).
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    var base = NSTemporaryDirectory()
    if base.utf8.count > 40 { base = "/tmp/" }
    if !base.hasSuffix("/") { base += "/" }
    let path = base + "folio-it-" + UUID().uuidString.prefix(13).lowercased()
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}
