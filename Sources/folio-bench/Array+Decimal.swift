extension Int {
    /// How many decimal digits a non-negative integer has.
    var decimalDigitCount: Int {
        var count = 1
        var rest = self / 10
        while rest > 0 {
            count += 1
            rest /= 10
        }
        return count
    }

    /// The number in decimal with commas between groups of three digits: 12,345.
    var grouped: String {
        let digits = Array(String(magnitude))
        var text = self < 0 ? "-" : ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return text
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
