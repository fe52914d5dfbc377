/// Makes the ids of new objects: 26 characters of Crockford base32 like a ULID, 48 bits of
/// milliseconds then 80 random bits, so ids sort by creation time. Within one millisecond (or if the
/// clock steps back) the random part of the last id is incremented, so ids from one generator always
/// increase. Not thread-safe: the writer owns one.
public struct ObjectIDGenerator {
    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    private var lastMilliseconds: Int64 = -1
    private var lastRandom: (high: UInt16, low: UInt64) = (0, 0)
    private var random: any RandomNumberGenerator

    public init(random: any RandomNumberGenerator = SystemRandomNumberGenerator()) {
        self.random = random
    }

    public mutating func next(at timestamp: Timestamp) -> String {
        if timestamp.milliseconds > lastMilliseconds {
            lastMilliseconds = timestamp.milliseconds
            lastRandom = (
                UInt16.random(in: 0...UInt16.max, using: &random) >> 1,
                UInt64.random(in: 0...UInt64.max, using: &random)
            )
        } else {
            let (low, carry) = lastRandom.low.addingReportingOverflow(1)
            lastRandom = (lastRandom.high &+ (carry ? 1 : 0), low)
        }
        let milliseconds = UInt64(max(0, lastMilliseconds))
        let bits = lastRandom
        // Written into the string's own storage: one allocation an id, not an array and a string.
        return String(unsafeUninitializedCapacity: 26) { text in
            var time = milliseconds
            for index in stride(from: 9, through: 0, by: -1) {
                text[index] = Self.alphabet[Int(time & 31)]
                time >>= 5
            }
            // 80 random bits: 16 high, 64 low, 5 bits per character from the end.
            var low = bits.low
            var high = UInt64(bits.high)
            for index in stride(from: 25, through: 10, by: -1) {
                text[index] = Self.alphabet[Int(low & 31)]
                low = (low >> 5) | ((high & 31) << 59)
                high >>= 5
            }
            return 26
        }
    }
}
