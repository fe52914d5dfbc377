import Foundation
import Synchronization

/// A thread-safe histogram of latencies in microseconds, with logarithmic buckets (each about 10%
/// wider than the last), for percentiles that `stats` reports.
final class LatencyRecorder: Sendable {
    private static let bucketCount = 200
    private let buckets = Mutex<(counts: [Int], total: Int, maximum: UInt64)>(([Int](repeating: 0, count: 200), 0, 0))

    private static func bucket(for micros: UInt64) -> Int {
        guard micros > 1 else { return 0 }
        return min(bucketCount - 1, Int((log(Double(micros)) / log(1.1)).rounded(.down)))
    }

    private static func upperBound(of bucket: Int) -> UInt64 {
        UInt64(pow(1.1, Double(bucket + 1)).rounded(.up))
    }

    func record(_ micros: UInt64, count: Int = 1) {
        let bucket = Self.bucket(for: micros)
        buckets.withLock {
            $0.counts[bucket] += count
            $0.total += count
            $0.maximum = max($0.maximum, micros)
        }
    }

    /// (count, p50, p99, max) in microseconds; a percentile is the upper edge of its bucket.
    var summary: (count: Int, p50: UInt64, p99: UInt64, maximum: UInt64) {
        buckets.withLock { state in
            func percentile(_ fraction: Double) -> UInt64 {
                guard state.total > 0 else { return 0 }
                let rank = Int((Double(state.total) * fraction).rounded(.up))
                var seen = 0
                for (index, count) in state.counts.enumerated() {
                    seen += count
                    if seen >= rank { return min(Self.upperBound(of: index), state.maximum) }
                }
                return state.maximum
            }
            return (state.total, percentile(0.5), percentile(0.99), state.maximum)
        }
    }
}
