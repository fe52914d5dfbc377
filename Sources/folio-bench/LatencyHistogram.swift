/// Latencies in nanoseconds, counted in log-linear buckets: exact below 128 ns, then 64 buckets per
/// power of two, so a percentile is off by at most 1/128 of its value. Recording is O(1) and
/// allocation-free; merging and percentiles walk the 4,096 buckets.
struct LatencyHistogram {
    private static let bucketsPerPowerOfTwo = 64
    private static let bucketCount = 64 * bucketsPerPowerOfTwo

    private var counts = [UInt64](repeating: 0, count: bucketCount)
    private(set) var count: UInt64 = 0
    private(set) var maximum: UInt64 = 0

    mutating func record(_ nanoseconds: UInt64) {
        counts[Self.bucket(of: nanoseconds)] += 1
        count += 1
        maximum = max(maximum, nanoseconds)
    }

    mutating func merge(_ other: LatencyHistogram) {
        for index in counts.indices { counts[index] += other.counts[index] }
        count += other.count
        maximum = max(maximum, other.maximum)
    }

    /// The latency at or below which `fraction` (0...1) of the recorded ones lie: the middle of its
    /// bucket, never above the maximum seen. Nil when nothing was recorded.
    func percentile(_ fraction: Double) -> UInt64? {
        guard count > 0 else { return nil }
        let rank = max(1, UInt64((fraction * Double(count)).rounded(.up)))
        var seen: UInt64 = 0
        for (index, bucketCount) in counts.enumerated() {
            seen += bucketCount
            if seen >= rank {
                let (lower, width) = Self.range(of: index)
                return min(lower + width / 2, maximum)
            }
        }
        return maximum
    }

    /// Values of bit width w > 7 share a bucket per top 7 bits.
    private static func bucket(of value: UInt64) -> Int {
        let shift = max(0, (64 - value.leadingZeroBitCount) - 7)
        return shift * bucketsPerPowerOfTwo + Int(value >> UInt64(shift))
    }

    private static func range(of bucket: Int) -> (lower: UInt64, width: UInt64) {
        let shift = max(0, bucket / bucketsPerPowerOfTwo - 1)
        let mantissa = UInt64(bucket - shift * bucketsPerPowerOfTwo)
        return (mantissa << UInt64(shift), 1 << UInt64(shift))
    }
}
