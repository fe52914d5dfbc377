/// The key (Folio id, Redis key) of one operation: a prefix shared by a run of keys and a number,
/// so a key is written out without building a string per operation.
struct Key {
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
}

extension Int {
    var decimalDigitCount: Int {
        var count = 1
        var rest = self / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }
}

extension Array where Element == UInt8 {
    /// Appends a non-negative integer in decimal ASCII.
    mutating func appendDecimal(_ number: Int) {
        precondition(number >= 0)
        let digits = number.decimalDigitCount
        let first = count
        append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        var rest = number
        for index in stride(from: first + digits - 1, through: first, by: -1) {
            self[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        }
    }
}
