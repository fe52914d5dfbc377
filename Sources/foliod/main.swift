import FolioCommandLine
import FolioProtocol
import FolioServer
import FolioStore
import Foundation
import Glibc

let usage = """
    usage: foliod [--config PATH] [--SETTING VALUE ...]
           foliod rebuild | verify | import ...

    Serves a Folio data directory on a Unix-domain socket until SIGTERM or SIGINT; SIGHUP reads the
    configuration again and applies what it can without a restart (the settings marked reloadable).
    Every setting is a flag (--name VALUE or --name=VALUE) and a key of the configuration file
    (name = VALUE, # for comments); flags win over the file. access.user.NAME, access.group.NAME,
    access.uid.N and access.gid.N = ROLE COLLECTION... (read, write or admin; * for every collection)
    set who may do what.

    \(Settings.help)

    FOLIO_SOCKET and FOLIO_DATA override the default socket and data directory.

    \(OfflineCommands.usage)
    """

/// The default configuration file, read when it exists and no --config names another.
let defaultConfigPath = "/etc/folio/foliod.conf"

/// `--name value` and `--name=value` pairs, in order; `--help`, `--version` as flags.
func parseFlags(_ argv: [String]) throws -> (flags: [(name: String, value: String)], help: Bool, version: Bool) {
    var flags: [(String, String)] = []
    var help = false
    var version = false
    var iterator = argv.makeIterator()
    while let argument = iterator.next() {
        switch argument {
        case "--help", "-h": help = true
        case "--version": version = true
        default:
            guard argument.hasPrefix("--") else { throw UsageError("unexpected argument '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var value: String
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            } else {
                guard let next = iterator.next() else { throw UsageError("--\(name) needs a value") }
                value = next
            }
            guard Settings.byName[name] != nil || name.hasPrefix("access.") else {
                throw UsageError("unknown option --\(name)")
            }
            flags.append((name, value))
        }
    }
    return (flags, help, version)
}

/// The configuration the daemon starts (or reloads) with: defaults, then the file, then the flags.
func loadConfiguration(flags: [(name: String, value: String)]) throws -> ServerConfiguration {
    let environment = ProcessInfo.processInfo.environment
    let defaults = DefaultPaths(environment: environment, uid: getuid())
    let configPath = flags.last(where: { $0.name == "config" })?.value
    var file: (path: String, text: String)?
    if let path = configPath ?? (FileManager.default.fileExists(atPath: defaultConfigPath) ? defaultConfigPath : nil) {
        do {
            file = (path, try String(contentsOfFile: path, encoding: .utf8))
        } catch {
            throw UsageError("cannot read the configuration file \(path): \(error.localizedDescription)")
        }
    }
    do {
        return try Settings.configuration(
            defaults: ServerConfiguration(dataDirectory: defaults.dataDirectory, socketPath: defaults.socket),
            file: file,
            flags: flags.filter { $0.name != "config" })
    } catch {
        throw UsageError(error.message)
    }
}

func serve(_ argv: [String]) throws -> Int32 {
    let (flags, help, version) = try parseFlags(argv)
    if help {
        print(usage)
        return 0
    }
    if version {
        print("foliod \(ServerVersion.current)")
        return 0
    }
    let configuration = try loadConfiguration(flags: flags)
    return try Daemon(configuration: configuration, log: log) { try loadConfiguration(flags: flags) }.run()
}

let log = Log()
do {
    let argv = Array(CommandLine.arguments.dropFirst())
    switch argv.first {
    case "rebuild"?, "verify"?, "import"?: exit(try OfflineCommands.run(argv[0], Array(argv.dropFirst())))
    default:
        // Everything durable is done and LMDB is closed by now; _exit skips atexit handlers, which
        // must not wait on library threads still parked in the background.
        let status = try serve(argv)
        fflush(nil)
        _exit(status)
    }
} catch let error as ImportError {
    FileHandle.standardError.write(Data("foliod import: \(error)\n".utf8))
    exit(1)
} catch let error as UsageError {
    FileHandle.standardError.write(Data("foliod: \(error)\n\n\(usage)\n".utf8))
    exit(UsageError.exitStatus)
} catch {
    log.error("cannot start: \(error)")
    exit(1)
}
