import Foundation
import Glibc
import Testing

/// Memory that foliod held for clients goes back to the system once they leave, not only back to
/// its allocator: after 100 clients streamed over-long lines (`make storms`), foliod kept 110 MiB
/// of heap for good while holding 2 KiB for clients.
@Suite struct MemoryReturnTests {
    /// `RssAnon` of a process, in KiB: its heap and stacks, not the LMDB map.
    private func anonymousKiB(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            if let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({
                Int($0)
            }) {
                return kib
            }
        }
        throw DaemonError("no RssAnon in /proc/\(pid)/status")
    }

    @Test(
        .disabled(
            if: underSanitizer, "a sanitizer's allocator keeps freed memory in quarantine: RSS says nothing of foliod's"
        ))
    func memoryHeldForLongLinesIsReturnedWhenTheirClientsLeave() throws {
        try withRunningDaemon { daemon in
            let pid = try #require(daemon.pid)
            let quiet = try anonymousKiB(pid)
            // Lines just under --max-line (1 MiB), never ended: foliod grows a buffer for each.
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 10)
            let opening = Array(#"{"op":"create","collection":"T","data":{"s":""#.utf8)
            var clients: [TestConnection] = []
            for _ in 0..<60 {
                let client = try daemon.connect(timeout: 10)
                try client.send(bytes: opening)
                for _ in 0..<15 { try client.send(bytes: chunk) }
                clients.append(client)
            }
            let probe = try daemon.connect(timeout: 10)
            let held = try probe.request(["op": "stats"]).result?["clientMemory"]?.integerValue ?? 0
            #expect(held > 40 << 20, "foliod holds \(held) bytes for the 60 clients")
            let busy = try anonymousKiB(pid)
            for client in clients { client.close() }
            clients.removeAll()

            var after = busy
            for _ in 0..<50 where after > quiet + 16 << 10 {
                usleep(200_000)
                after = try anonymousKiB(pid)
            }
            #expect(
                after <= quiet + 16 << 10,
                "RssAnon \(quiet) KiB before, \(busy) KiB holding 60 lines of 960 KiB, \(after) KiB 10 s after they left"
            )
            #expect(try probe.request(["op": "hello"]).isOK)
        }
    }
}
