/// Something foliod did that its guarantees rule out: a lost or changed acknowledged write, a
/// half-applied write, a failed restart, a broken chain, a hung request, a verify mismatch.
struct Violation: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

/// The driver itself could not go on (a directory it cannot create, a tool it cannot run): not a
/// finding about foliod.
struct DriverError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
