import FolioStore
import Synchronization

/// The state digest of the last sequence it was computed at: `stats` shows the digest, which takes a
/// pass over the whole store, so it is computed once per sequence and only when asked for.
final class DigestCache: Sendable {
    private let latest = Mutex<(sequence: UInt64, digest: ChainHash)?>(nil)

    func isFresh(at sequence: UInt64) -> Bool {
        latest.withLock { $0?.sequence == sequence }
    }

    func digest(at sequence: UInt64, compute: () throws -> ChainHash) rethrows -> ChainHash {
        if let cached = latest.withLock({ $0 }), cached.sequence == sequence { return cached.digest }
        let digest = try compute()
        latest.withLock { $0 = (sequence, digest) }
        return digest
    }
}
