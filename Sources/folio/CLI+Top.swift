import FolioClient
import FolioCommandLine
import FolioJSON
import Foundation
import Glibc

/// `folio metrics` and `folio top`.
extension CLI {
    /// The `metrics` op's Prometheus text, as it came.
    func metrics() throws {
        try finishArguments()
        let result = try call(["op": "metrics"])
        // Prometheus text is for programs already, so it is printed as it is unless --json asks.
        if output.askedForJSON { return output.jsonLine(result) }
        print(result.objectValue?["text"]?.stringValue ?? "", terminator: "")
    }

    /// A live view, once a second (`--interval S`), `--iterations N` times (default: until interrupted):
    /// requests/s by op with p50/p99, connections, commits/s, queues, map use.
    func top() throws {
        let interval = Double(try arguments.integer("--interval") ?? 1)
        guard (1...3600).contains(interval) else { throw UsageError("--interval takes 1 to 3600 seconds") }
        let count = try arguments.integer("--iterations")
        try finishArguments()
        let connection = try connect()
        defer { connection.close() }
        var previous: MetricSamples?
        var frames = 0
        while count.map({ frames < $0 + 1 }) ?? true {
            let text = try result(of: try connection.request(["op": "metrics"])).objectValue?["text"]?.stringValue ?? ""
            let samples = MetricSamples(text)
            if let previous {
                let frame = Self.frame(samples, since: previous, seconds: interval)
                if Output.isTerminal {
                    print("\u{1B}[H\u{1B}[2J" + frame, terminator: "")
                } else {
                    print(frame)
                }
                fflush(nil)
            }
            previous = samples
            frames += 1
            if count.map({ frames >= $0 + 1 }) ?? false { break }
            usleep(UInt32(interval * 1_000_000))
        }
    }

    private static func frame(_ now: MetricSamples, since before: MetricSamples, seconds: Double) -> String {
        var lines: [String] = []
        let stamp = Date().formatted(.iso8601)
        lines.append("folio top — \(stamp) — every \(Int(seconds)) s")
        let gauge = { (name: String) in now.value(name) ?? 0 }
        let rate = { (name: String) in ((now.value(name) ?? 0) - (before.value(name) ?? 0)) / seconds }
        lines.append(
            String(
                format:
                    "connections %.0f   watches %.0f   pending requests %.0f   writer queue %.0f   worker queue %.0f",
                gauge("folio_connections"), gauge("folio_watches"), gauge("folio_requests_pending"),
                gauge("folio_writer_queue"),
                gauge("folio_worker_queue")))
        lines.append(
            String(
                format: "commits/s %.1f   events/s %.1f   last seq %.0f   map %.1f of %.1f MiB   readers %.0f",
                rate("folio_commits_total"), rate("folio_events_appended_total"), gauge("folio_last_sequence"),
                gauge("folio_lmdb_used_bytes") / 1_048_576, gauge("folio_lmdb_map_size_bytes") / 1_048_576,
                gauge("folio_lmdb_readers")))
        lines.append("")
        lines.append("op              req/s       p50        p99    errors/s")
        var rows: [(String, Double, Double, Double, Double)] = []
        for op in now.labels("folio_requests_total", "op") {
            let total = now.sum("folio_requests_total", ["op": op]) - before.sum("folio_requests_total", ["op": op])
            let errors =
                total - (now.value("folio_requests_total", ["op": op, "outcome": "ok"]) ?? 0)
                + (before.value("folio_requests_total", ["op": op, "outcome": "ok"]) ?? 0)
            guard total > 0 else { continue }
            let p50 = now.quantile(0.5, "folio_request_duration_seconds", op: op, since: before)
            let p99 = now.quantile(0.99, "folio_request_duration_seconds", op: op, since: before)
            rows.append((op, total / seconds, p50, p99, errors / seconds))
        }
        for row in rows.sorted(by: { $0.1 > $1.1 }) {
            lines.append(
                row.0.padding(toLength: 14, withPad: " ", startingAt: 0)
                    + String(
                        format: "%7.1f %9@ %10@ %10.1f", row.1, Self.duration(row.2) as NSString,
                        Self.duration(row.3) as NSString, row.4))
        }
        if rows.isEmpty { lines.append("(no requests in the last \(Int(seconds)) s)") }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func duration(_ seconds: Double) -> String {
        if seconds.isNaN { return "-" }
        if seconds < 0.001 { return String(format: "%.0f µs", seconds * 1_000_000) }
        if seconds < 1 { return String(format: "%.1f ms", seconds * 1000) }
        return String(format: "%.2f s", seconds)
    }
}

/// Samples of Prometheus text: `name{label="value",...} number` lines.
struct MetricSamples {
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: Double
    }

    let samples: [Sample]

    init(_ text: String) {
        var samples: [Sample] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                continue
            }
            let head = line[..<space]
            var labels: [String: String] = [:]
            var name = String(head)
            if let brace = head.firstIndex(of: "{"), head.last == "}" {
                name = String(head[..<brace])
                for pair in head[head.index(after: brace)..<head.index(before: head.endIndex)].split(separator: ",") {
                    guard let equals = pair.firstIndex(of: "=") else { continue }
                    labels[String(pair[..<equals])] = String(pair[pair.index(after: equals)...]).trimmingCharacters(
                        in: CharacterSet(charactersIn: "\""))
                }
            }
            samples.append(Sample(name: name, labels: labels, value: value))
        }
        self.samples = samples
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { sample in sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value }
        }?.value
    }

    func sum(_ name: String, _ labels: [String: String]) -> Double {
        samples.filter { sample in
            sample.name == name && labels.allSatisfy { key, value in sample.labels[key] == value }
        }.reduce(0) { $0 + $1.value }
    }

    func labels(_ name: String, _ key: String) -> [String] {
        Array(Set(samples.filter { $0.name == name }.compactMap { $0.labels[key] })).sorted()
    }

    /// The upper bound of the bucket where the quantile of the requests since `before` falls.
    func quantile(_ q: Double, _ name: String, op: String, since before: MetricSamples) -> Double {
        let buckets = samples.filter { $0.name == name + "_bucket" && $0.labels["op"] == op }
        let counts = buckets.map { bucket in
            (
                bound: Double(bucket.labels["le"] ?? "") ?? .infinity,
                count: bucket.value
                    - (before.value(name + "_bucket", ["op": op, "le": bucket.labels["le"] ?? ""]) ?? 0)
            )
        }.sorted { $0.bound < $1.bound }
        guard let total = counts.last?.count, total > 0 else { return .nan }
        return counts.first { $0.count >= q * total }?.bound ?? .nan
    }
}
