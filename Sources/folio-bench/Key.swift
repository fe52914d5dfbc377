/// The key (Folio id, Redis key) of one operation: a prefix shared by a run of keys and a number,
/// so a key is written out without building a string per operation.
struct Key: CustomStringConvertible {
    /// The pre-populated keys `k0 ..< kN` that reads look up.
    static let existingPrefix = Array("k".utf8)

    let prefix: [UInt8]
    let number: Int

    static func existing(_ number: Int) -> Key { Key(prefix: existingPrefix, number: number) }

    var byteCount: Int { prefix.count + number.decimalDigitCount }

    func append(to bytes: inout [UInt8]) {
        bytes.append(contentsOf: prefix)
        bytes.appendDecimal(number)
    }

    var description: String {
        var bytes: [UInt8] = []
        append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
