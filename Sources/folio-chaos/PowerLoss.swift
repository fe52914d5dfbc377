import FolioHarness
import Foundation
import Glibc

/// `--power-loss`: foliod runs under the power-loss shim (Tests/Faults/powerloss.c), and each kill is
/// a power loss of its data directory. `begin` copies the tracked files as foliod starts on them
/// (durable: a fresh store, or the image of the last loss) and starts a new record log; `strike`,
/// after the kill, replaces them with what a disk could hold then, which `powerloss_image` rebuilds
/// from that copy, the log and a seed (docs/POWERLOSS.md).
///
/// The inputs of the last image stay in `powerloss/last` (base/, log, and the command in `image`),
/// so an image that failed the checks can be rebuilt byte for byte.
final class PowerLoss {
    struct Options {
        /// The shim, an LD_PRELOAD library.
        var shim: String
        /// The powerloss_image program.
        var imageTool: String
        /// Bytes of a unit the disk writes whole: 4096 (a page), 512 to tear pages into sectors.
        var unit = 4096
        /// How pages not flushed are chosen (powerloss_image --style).
        var style = "mixed"
        /// Changes of names are durable only once an fsync of their directory covered them.
        var namesNeedDirectorySync = false
        /// The shim fails about one in this many writev calls to data.mdb (POWERLOSS_FAIL_WRITEV).
        var failWritev: Int?
    }

    /// powerloss_image's styles.
    static let styles = ["mixed", "uniform", "synced", "coin", "latest"]

    /// What a power loss put back, summed over a run (the numbers powerloss_image reports).
    struct Figures {
        var strikes = 0
        var syncedBytes = 0
        var pagesUnsynced = 0
        var pagesKept = 0
        var pagesLatest = 0
        var sizesUnsynced = 0
        var namesUnsynced = 0
        var pagesBehind = 0
        var styles: [String: Int] = [:]

        mutating func add(_ other: Figures) {
            strikes += other.strikes
            syncedBytes += other.syncedBytes
            pagesUnsynced += other.pagesUnsynced
            pagesKept += other.pagesKept
            pagesLatest += other.pagesLatest
            sizesUnsynced += other.sizesUnsynced
            namesUnsynced += other.namesUnsynced
            pagesBehind += other.pagesBehind
            styles.merge(other.styles, uniquingKeysWith: +)
        }

        /// From powerloss_image's line of `key=value` fields.
        init(summary: String) {
            var fields: [String: String] = [:]
            for field in summary.split(separator: " ") {
                let parts = field.split(separator: "=", maxSplits: 1)
                if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
            }
            func number(_ key: String) -> Int { Int(fields[key] ?? "") ?? 0 }
            strikes = 1
            syncedBytes = number("synced_bytes")
            pagesUnsynced = number("pages_unsynced")
            pagesKept = number("pages_kept")
            pagesLatest = number("pages_latest")
            sizesUnsynced = number("sizes_unsynced")
            namesUnsynced = number("names_unsynced")
            pagesBehind = number("checked_pages_behind")
            if let style = fields["style"] { styles[style] = 1 }
        }

        init() {}

        var summary: String {
            let byStyle = styles.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "power losses \(strikes) (styles: \(byStyle)): pages not flushed \(pagesUnsynced), of which kept "
                + "in part or whole \(pagesKept) (at their last write \(pagesLatest)); sizes not flushed \(sizesUnsynced); "
                + "changes of names not flushed \(namesUnsynced); \(syncedBytes / 1024) KiB flushed; "
                + "pages the kill caught mid-write \(pagesBehind)"
        }
    }

    /// Paths relative to the data directory that are not tracked: LMDB's lock file, which it rebuilds
    /// at open (and its draft, lock.mdb.new-PID); file contents (blobs/); verify's scratch stores.
    /// Also the lock file of a new environment's draft (`data.mdb.new-lock`, see
    /// `Environment.createDurably`), which LMDB writes through a map like lock.mdb.
    static let excluded = ["lock.mdb", "data.mdb.new-lock", "blobs/", "verify-"]

    let options: Options
    let dataDirectory: String
    /// `STORE/powerloss`.
    let directory: String
    private var random: SplitMix64
    private var baseDirectory: String { directory + "/base" }
    private var logPath: String { directory + "/log" }
    private var lastDirectory: String { directory + "/last" }
    /// powerloss_image's line for the last strike, and how to rebuild that image.
    private(set) var lastSummary: String?
    private(set) var lastCommand: String?
    /// Power losses so far: each is a boot of its own (`boot`).
    private var strikes = 0
    private let bootPrefix: String

    init(options: Options, dataDirectory: String, directory: String, seed: UInt64) {
        self.options = options
        self.dataDirectory = dataDirectory
        self.directory = directory
        random = SplitMix64(seed: seed ^ 0x706F_7765_726C_6F73)
        bootPrefix = String(seed, radix: 16)
    }

    /// The boot id foliod sees: a new one after each power loss.
    var boot: String { "powerloss-\(bootPrefix)-\(strikes)" }

    /// What foliod's environment needs for the shim to log.
    var environment: [String: String] {
        var environment = [
            "LD_PRELOAD": options.shim, "POWERLOSS_LOG": logPath,
            // Absolute, as the shim makes the paths foliod opens.
            "POWERLOSS_PREFIX": URL(fileURLWithPath: dataDirectory).standardizedFileURL.path + "/",
            "POWERLOSS_EXCLUDE": Self.excluded.joined(separator: ":"),
        ]
        if let every = options.failWritev { environment["POWERLOSS_FAIL_WRITEV"] = "\(every)" }
        // The machine comes back from a power loss with another boot id: a store whose resume
        // marker names the boot before must go back to its checkpoint (docs/DURABILITY.md).
        environment["FOLIO_BOOT_ID"] = boot
        return environment
    }

    /// Before foliod starts: the tracked files as they are, and an empty log.
    func begin() throws(DriverError) {
        let files = FileManager.default
        try? files.removeItem(atPath: baseDirectory)
        try? files.removeItem(atPath: logPath)
        do {
            // As foliod makes it, if this is the store's first start.
            try files.createDirectory(
                atPath: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try files.createDirectory(atPath: baseDirectory, withIntermediateDirectories: true)
            for path in try Self.trackedFiles(in: dataDirectory) {
                try Self.makeParents(of: path, in: baseDirectory)
                try files.copyItem(atPath: dataDirectory + "/" + path, toPath: baseDirectory + "/" + path)
            }
        } catch {
            throw DriverError("cannot copy the data directory to \(baseDirectory): \(error)")
        }
    }

    /// After foliod was killed: its tracked files become an image of what the disk could hold.
    /// Returns what powerloss_image reported.
    func strike() throws(DriverError) -> Figures {
        strikes += 1
        let files = FileManager.default
        let seed = random.next() >> 11
        let image = directory + "/image"
        try? files.removeItem(atPath: lastDirectory)
        try? files.removeItem(atPath: image)
        var arguments = ["--seed", String(seed), "--unit", String(options.unit), "--style", options.style]
        if options.namesNeedDirectorySync { arguments.append("--names-need-dirsync") }
        let inputs = [lastDirectory + "/base", lastDirectory + "/log"]
        // A process killed before the shim's constructor ran leaves no log: it wrote nothing.
        if !files.fileExists(atPath: logPath) { _ = files.createFile(atPath: logPath, contents: nil) }
        do {
            try files.createDirectory(atPath: lastDirectory, withIntermediateDirectories: true)
            try files.moveItem(atPath: baseDirectory, toPath: inputs[0])
            try files.moveItem(atPath: logPath, toPath: inputs[1])
        } catch {
            throw DriverError("cannot keep the inputs of the power loss in \(lastDirectory): \(error)")
        }
        let command = ([options.imageTool] + arguments + inputs + ["OUT"]).joined(separator: " ")
        try? command.write(toFile: lastDirectory + "/image", atomically: false, encoding: .utf8)
        let run: CommandRun
        do {
            run = try CommandRun.run(
                options.imageTool, arguments + ["--check", dataDirectory] + inputs + [image], timeout: 300)
        } catch {
            throw DriverError("cannot run \(options.imageTool): \(error)")
        }
        // A failed check means the shim missed a write: the harness, not foliod, is wrong.
        guard run.status == 0 else { throw DriverError("the power-loss image failed: \(run)") }
        do {
            for path in try Self.trackedFiles(in: dataDirectory) {
                try files.removeItem(atPath: dataDirectory + "/" + path)
            }
            for path in try Self.trackedFiles(in: image) {
                try Self.makeParents(of: path, in: dataDirectory)
                try files.moveItem(atPath: image + "/" + path, toPath: dataDirectory + "/" + path)
            }
            try files.removeItem(atPath: image)
        } catch {
            throw DriverError("cannot put the power-loss image into \(dataDirectory): \(error)")
        }
        let summary = run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        lastSummary = summary
        lastCommand = command
        return Figures(summary: summary)
    }

    /// The regular files below `directory` that the shim tracks, as paths relative to it.
    static func trackedFiles(in directory: String) throws -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else {
            throw DriverError("cannot list \(directory)")
        }
        var paths: [String] = []
        while let path = enumerator.nextObject() as? String {
            let type = enumerator.fileAttributes?[.type] as? FileAttributeType
            let probe = type == .typeDirectory ? path + "/" : path
            if excluded.contains(where: { probe.hasPrefix($0) }) {
                if type == .typeDirectory { enumerator.skipDescendants() }
            } else if type == .typeRegular {
                paths.append(path)
            }
        }
        return paths.sorted()
    }

    private static func makeParents(of path: String, in directory: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty {
            try FileManager.default.createDirectory(atPath: directory + "/" + parent, withIntermediateDirectories: true)
        }
    }
}
