import FolioHarness
import Foundation
import Glibc

/// One store of the loop and its cycles: a single foliod (`Epoch`) or a cluster's nodes (`ClusterEpoch`).
protocol StoreEpoch: AnyObject {
    /// Runs cycle `index` (0-based within this store); throws the first violation.
    func cycle(_ index: Int, _ tally: inout Tally) throws
    /// The files a violation leaves in the store's directory, for its message.
    var keptFiles: String { get }
    /// With `--power-loss`, where the data directory's files come from.
    var powerLossNote: String? { get }
}

/// The whole run: stores one after another (store k on seed + k), cycles in each, a summary.
struct CrashLoop {
    let options: ChaosOptions

    /// The exit status: 0 without violations, 1 with any (or when the driver cannot go on).
    func run() -> Int32 {
        guard FileManager.default.isExecutableFile(atPath: options.foliod) else {
            return fail("no foliod at \(options.foliod) (build it, or give --foliod)")
        }
        guard StaleReader.path != nil else {
            return fail("\(StaleReader.tool) not found: install lmdb-utils (make deps does)")
        }
        let base = options.directory ?? (NSTemporaryDirectory() + "folio-chaos-\(getpid())")
        do { try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true) } catch {
            return fail("cannot create \(base): \(error)")
        }
        if let powerLoss = options.powerLoss {
            for path in [powerLoss.shim, powerLoss.imageTool] where !FileManager.default.fileExists(atPath: path) {
                return fail("no \(path) (make power-loss builds it from Tests/Faults)")
            }
        }
        Console.line(
            "folio-chaos: \(options.cycles) cycles, seed \(options.seed), \(options.clients) clients, \(options.cyclesPerStore) cycles per store, "
                + "workload up to \(options.workloadMilliseconds) ms, --map-size \(options.mapSize), durability \(options.durability), \(options.foliod), in \(base)"
                + (options.foliodArguments.isEmpty
                    ? "" : ", foliod arguments \(options.foliodArguments.joined(separator: " "))")
                + (options.powerLoss.map {
                    ", power loss (\($0.style)) in units of \($0.unit) bytes"
                        + ($0.namesNeedDirectorySync ? ", names durable once their directory is flushed" : "")
                } ?? "")
        )
        var postgres: PostgresServer?
        if options.clusterNodes > 0 {
            do { postgres = try PostgresServer() } catch {
                return fail("cannot start PostgreSQL for --cluster: \(error)")
            }
            Console.line("folio-chaos: \(options.clusterNodes) cluster node(s) on PostgreSQL in \(postgres!.directory)")
        }
        defer { postgres?.remove() }
        let clock = ContinuousClock()
        let start = clock.now
        var tally = Tally()
        var store: UInt64 = 0
        while tally.cycles < options.cycles {
            let seed = options.seed &+ store
            store += 1
            let directory = base + "/store-\(seed)"
            try? FileManager.default.removeItem(atPath: directory)
            do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) } catch {
                return fail("cannot create \(directory): \(error)")
            }
            let epoch: any StoreEpoch
            if let postgres {
                do {
                    epoch = try ClusterEpoch(seed: seed, directory: directory, options: options, postgres: postgres)
                } catch {
                    return fail("cannot set up the cluster's store \(seed): \(error)")
                }
            } else {
                epoch = Epoch(seed: seed, directory: directory, options: options)
            }
            tally.stores += 1
            var clean = true
            for index in 0..<min(options.cyclesPerStore, options.cycles - tally.cycles) {
                let before = tally
                do {
                    try epoch.cycle(index, &tally)
                    tally.cycles += 1
                } catch let violation as Violation {
                    tally.cycles += 1
                    var message = """
                        VIOLATION in cycle \(tally.cycles) (store seed \(seed), its cycle \(index + 1)): \(violation)
                          rerun: \(options.rerun(seed: seed, cycles: index + 1))
                          kept: \(directory) (\(epoch.keptFiles))
                        """
                    if let note = epoch.powerLossNote { message += "\n  power loss: " + note }
                    Console.line(message)
                    tally.violations.append(message)
                    clean = false
                    break
                } catch {
                    Console.line("folio-chaos: cannot go on: \(error)")
                    Console.line(tally.summary)
                    return 1
                }
                if options.verbose {
                    Console.line(
                        "cycle \(tally.cycles) store \(seed)/\(index + 1): writes \(tally.writes - before.writes), unknown \(tally.uncertain - before.uncertain), "
                            + "events \(tally.events - before.events), leftovers \(tally.leftovers.count - before.leftovers.count)"
                    )
                } else if tally.cycles % 10 == 0 {
                    let elapsed = (clock.now - start).components.seconds
                    Console.line(
                        "\(tally.cycles) cycles, \(tally.writes) writes checked, \(tally.uncertain) unknown outcomes, \(tally.violations.count) violations (\(elapsed) s)"
                    )
                }
            }
            if clean && !options.keep { try? FileManager.default.removeItem(atPath: directory) }
        }
        if options.directory == nil && !options.keep && tally.violations.isEmpty {
            try? FileManager.default.removeItem(atPath: base)
        }
        let elapsed = clock.now - start
        Console.line("\nfolio-chaos: seed \(options.seed), \(elapsed.components.seconds) s")
        Console.line(tally.summary)
        if !tally.leftovers.isEmpty {
            Console.line(
                "left in data directories after restarts (removed): "
                    + tally.leftovers.prefix(5).joined(separator: ", ") + (tally.leftovers.count > 5 ? ", …" : ""))
        }
        for violation in tally.violations { Console.line(violation) }
        Console.line("chaos: \(tally.cycles - tally.violations.count) passed, \(tally.violations.count) failed")
        return tally.violations.isEmpty ? 0 : 1
    }

    private func fail(_ message: String) -> Int32 {
        Console.line("folio-chaos: \(message)")
        return 1
    }
}
