import Foundation
import Glibc

/// Copies foliod's stderr from a pipe to its log file, and signals `mapGrowths` once for every
/// "map full" line (foliod has just grown the LMDB map and retries the batch).
final class LogPump: @unchecked Sendable {
    private let finished = DispatchSemaphore(value: 0)

    /// Starts reading `pipe` (the read end, which the pump closes at end of stream).
    init(pipe: Int32, logFile: Int32, mapGrowths: DispatchSemaphore) {
        let thread = Thread { [finished] in
            let marker = Array("map full".utf8)
            var carry: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 1 << 14)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(pipe, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                _ = chunk.withUnsafeBytes { write(logFile, $0.baseAddress, count) }
                // Search the new bytes together with the end of the previous chunk.
                let window = carry + chunk[..<count]
                var start = 0
                while start + marker.count <= window.count {
                    if window[start..<(start + marker.count)].elementsEqual(marker) {
                        mapGrowths.signal()
                        start += marker.count
                    } else {
                        start += 1
                    }
                }
                carry = Array(window.suffix(marker.count - 1))
            }
            close(pipe)
            close(logFile)
            finished.signal()
        }
        thread.start()
    }

    /// Waits (at most `timeout` s) until foliod's stderr has ended: every line is in the log.
    func waitForEnd(timeout: Double) {
        _ = finished.wait(timeout: .now() + timeout)
    }
}
