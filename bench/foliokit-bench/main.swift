// `make bench-sdk`: N sequential `get`s of one record through FolioKit (request encoded, answer
// routed by the reader thread to the awaiting task, decoded into a Codable struct) against the same
// `get` as raw lines on a blocking socket (written, and read up to its newline, nothing parsed), each
// on one connection to the same foliod. Prints both, per get, and the ratio.
//
//     foliokit-bench --socket PATH [--count N] [--rounds R]
import CFolioSystem
import FolioKit
import Foundation
import Glibc

struct TodoListItem: FolioRecord {
    static let collection = "TodoListItem"
    var id: String?
    var version: Int?
    var title: String?
    var description: String?
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("foliokit-bench: \(message)\n".utf8))
    exit(1)
}

var socketPath = ProcessInfo.processInfo.environment["FOLIO_SOCKET"] ?? ""
var count = 5_000
var rounds = 20
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
    switch argument {
    case "--socket": socketPath = value
    case "--count": count = Int(value) ?? 0
    case "--rounds": rounds = Int(value) ?? 0
    default: fail("unknown option \(argument); usage: foliokit-bench --socket PATH [--count N] [--rounds R]")
    }
}
guard !socketPath.isEmpty, count > 0, rounds > 0 else {
    fail("usage: foliokit-bench --socket PATH [--count N] [--rounds R]")
}

/// A blocking socket that sends a line and reads one back, as a client without an SDK would.
final class RawLines: @unchecked Sendable {
    let fd: Int32
    var buffer = [UInt8](repeating: 0, count: 1 << 16)

    init(path: String) {
        fd = folio_unix_socket(0)
        guard fd >= 0, folio_unix_connect(fd, path) == 0 else {
            fail("cannot connect to \(path): \(String(cString: strerror(errno)))")
        }
    }

    func exchange(_ line: [UInt8]) {
        let sent = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == line.count else { fail("send: \(String(cString: strerror(errno)))") }
        while true {
            let received = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard received > 0 else { fail("read: the connection ended") }
            if buffer[received - 1] == 0x0A { return }
        }
    }
}

let folio = try await Folio.connect(socketPath)
let record = try await TodoListItem(
    id: "bench-\(getpid())", title: "Buy milk", description: "2 litres, the usual brand"
).save(on: folio)
let id = record.id!
let raw = RawLines(path: socketPath)
let line = Array(#"{"op":"get","tag":1,"collection":"TodoListItem","id":"\#(id)"}"#.utf8) + [0x0A]

/// On the cooperative pool, like `timeKit`, so that both run on the same kind of thread.
nonisolated func timeRaw(_ n: Int, _ raw: RawLines) async -> Double {
    let start = ContinuousClock.now
    for _ in 0..<n { raw.exchange(line) }
    return (ContinuousClock.now - start) / .microseconds(1) / Double(n)
}

/// Runs off the main actor, as a server's request handler would: no hop to the main thread per get.
nonisolated func timeKit(_ n: Int, _ id: String, _ folio: Folio) async throws -> Double {
    let start = ContinuousClock.now
    for _ in 0..<n {
        let item = try await TodoListItem.get(id, on: folio)
        if item.title == nil { fail("the record lost its title") }
    }
    return (ContinuousClock.now - start) / .microseconds(1) / Double(n)
}

/// The same from the main actor, as a script's top-level code (or a UI) would call it.
@MainActor func timeKitOnMainActor(_ n: Int, _ id: String, _ folio: Folio) async throws -> Double {
    let start = ContinuousClock.now
    for _ in 0..<n {
        let item = try await TodoListItem.get(id, on: folio)
        if item.title == nil { fail("the record lost its title") }
    }
    return (ContinuousClock.now - start) / .microseconds(1) / Double(n)
}

// Warm up both paths, then alternate them so that drift on a shared machine hits both alike.
_ = await timeRaw(2000, raw)
_ = try await timeKit(2000, id, folio)
var rawTimes: [Double] = []
var kitTimes: [Double] = []
var mainActorTimes: [Double] = []
for _ in 0..<rounds {
    rawTimes.append(await timeRaw(count, raw))
    kitTimes.append(try await timeKit(count, id, folio))
    mainActorTimes.append(try await timeKitOnMainActor(count, id, folio))
}
try await TodoListItem.delete(id, on: folio)

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
func format(_ value: Double) -> String { String(format: "%.2f", value) }
func ratio(_ value: Double) -> String { String(format: "%.3f", value) }
// Each round times the three paths back to back, so a round's ratios compare like with like on a
// machine whose load drifts; the median of those, and the ratio of the fastest rounds, are reported.
@MainActor func line(_ name: String, _ times: [Double]) -> String {
    let ratios = zip(times, rawTimes).map { $0 / $1 }
    let best = times.min()! / rawTimes.min()!
    return "\(name) median \(format(median(times))) µs/get, fastest \(format(times.min()!)) µs/get; "
        + "ratio to raw: median of rounds \(ratio(median(ratios))), fastest rounds \(ratio(best))"
}
print("\(rounds) rounds of \(count) sequential gets of one record, one connection each:")
print(
    "raw lines:                   median \(format(median(rawTimes))) µs/get, fastest \(format(rawTimes.min()!)) µs/get")
print(line("FolioKit:                   ", kitTimes))
print(line("FolioKit from the main actor:", mainActorTimes))
