import Foundation

/// Runs `body` with a new empty directory, removed afterwards whatever happens.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let path = NSTemporaryDirectory() + "folio-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

/// A deterministic random generator (SplitMix64), so a failing randomized test can be rerun.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
