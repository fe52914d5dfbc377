import FolioCommandLine
import Foundation
import Glibc

func runBench(_ argv: [String]) -> Int32 {
    let options: BenchOptions
    do {
        options = try BenchOptions(argv)
    } catch {
        StandardError.write("folio-bench: \(error)\n\n\(BenchOptions.usage)")
        return UsageError.exitStatus
    }
    if options.showHelp {
        print(BenchOptions.usage)
        return 0
    }
    var benchmark = Benchmark(options: options)
    let report: Report
    do {
        report = try benchmark.run()
    } catch {
        StandardError.write("folio-bench: \(error)")
        return 1
    }
    let timing = options.timing
    let settings =
        "\(options.keyCount) keys, payload \(Payload.bytes.count) bytes, warm-up \(timing.warmupSeconds) s, "
        + "\(timing.durationSeconds) s measured per scenario per daemon, \(options.rounds) round(s), alternating"
    print((benchmark.context + [settings]).joined(separator: "\n"))
    for table in [report.throughput, report.failuresAndResources, report.latencyByKind] {
        print("\n" + table.plain)
    }
    let threads = report.cpuByThread
    if !threads.isEmpty { print("\nCPU by thread:\n" + threads.joined(separator: "\n")) }
    let markdown =
        ([report.throughput, report.failuresAndResources, report.latencyByKind].map(\.markdown)).joined(
            separator: "\n\n")
        + (threads.isEmpty ? "" : "\n\nCPU by thread:\n\n" + threads.map { "- " + $0 }.joined(separator: "\n"))
    print("\nMarkdown:\n\n" + markdown)
    if let path = options.markdownPath {
        let text = (benchmark.context + [settings]).map { "- " + $0 }.joined(separator: "\n") + "\n\n" + markdown + "\n"
        if !FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) {
            StandardError.write("folio-bench: cannot write \(path)")
            return 1
        }
    }
    let failures = report.failureMessages
    for message in failures { StandardError.write("folio-bench: FAILED: \(message)") }
    return failures.isEmpty ? 0 : 1
}

/// `folio-bench views|relations|watch|live|populate|fill|apply-lag|storms|soak ...`, or the Folio-versus-Redis scenarios.
func runSubcommand(_ argv: [String]) -> Int32 {
    do {
        switch argv.first {
        case "views": return try ViewsBenchmark(Array(argv.dropFirst())).run()
        case "relations": return try RelationsBenchmark(Array(argv.dropFirst())).run()
        case "watch": return try WatchBenchmark(Array(argv.dropFirst())).run()
        case "live": return try LiveQueryBenchmark(Array(argv.dropFirst())).run()
        case "populate": return try PopulateCommand(Array(argv.dropFirst())).run()
        case "fill": return try BatchFill(Array(argv.dropFirst())).run()
        case "apply-lag": return try ApplyLagBenchmark(Array(argv.dropFirst())).run()
        case "storms": return try StormsCommand(Array(argv.dropFirst())).run()
        case "soak": return try SoakCommand(Array(argv.dropFirst())).run()
        default: return runBench(argv)
        }
    } catch let error as UsageError {
        StandardError.write(
            "folio-bench: \(error)\n\n\(ViewsBenchmark.usage)\n\(RelationsBenchmark.usage)\n\(WatchBenchmark.usage)\n\(LiveQueryBenchmark.usage)\n\(PopulateCommand.usage)\n\(BatchFill.usage)\n\(ApplyLagBenchmark.usage)\n\(StormsCommand.usage)\n\(SoakCommand.usage)"
        )
        return UsageError.exitStatus
    } catch {
        StandardError.write("folio-bench: \(error)")
        return 1
    }
}

exit(runSubcommand(Array(CommandLine.arguments.dropFirst())))
