import FolioStore
import Glibc

/// Removes, in the background, the blobs no name has referred to for `file-grace` seconds, and the
/// uploads in pieces idle for `upload-timeout` seconds. It looks every quarter of the shorter
/// (between 0.1 s and 60 s), so a blob or an upload goes at most that long after its time ends. A put
/// holds a pin on its blob until its event commits, which the sweep honors (`BlobStore.sweep`).
final class BlobSweeper: @unchecked Sendable {
    private let lock = ConditionLock()
    private var stopping = false
    private var thread: pthread_t?

    init(store: Store, uploads: Uploads, graceSeconds: Double, uploadTimeoutSeconds: Double, log: Log) {
        let interval = min(60, max(0.1, min(graceSeconds, uploadTimeoutSeconds) / 4))
        thread = startThread(name: "folio-sweep") { [self] in
            while !lock.withLock({ stopping }) {
                let now = Double(monotonicMicroseconds()) / 1_000_000
                let expired = uploads.expire(now: monotonicMilliseconds(), timeout: UInt64(uploadTimeoutSeconds * 1000))
                if expired > 0 {
                    log.notice("aborted \(expired) upload(s) that got no piece for \(Int(uploadTimeoutSeconds)) s")
                }
                do {
                    let removed = try store.blobs.sweep(grace: graceSeconds, now: now) { sha256 in
                        try store.read { try $0.fileReferences(toBlob: sha256) > 0 }
                    }
                    if !removed.isEmpty { log.info("removed \(removed.count) blob(s) no file name refers to") }
                } catch {
                    log.error("the sweep of unreferenced blobs failed: \(error)")
                }
                var slept = 0.0
                while slept < interval && !lock.withLock({ stopping }) {
                    usleep(UInt32(min(0.1, interval) * 1_000_000))
                    slept += min(0.1, interval)
                }
            }
        }
    }

    func stop() {
        lock.withLock { stopping = true }
        if let thread { pthread_join(thread, nil) }
    }
}
