import FolioCommandLine
import Foundation
import Glibc

signal(SIGPIPE, SIG_IGN)

do {
    let options = try ChaosOptions(Array(CommandLine.arguments.dropFirst()))
    if options.showHelp {
        Console.line(ChaosOptions.usage)
        exit(0)
    }
    exit(CrashLoop(options: options).run())
} catch {
    FileHandle.standardError.write(Data("folio-chaos: \(error)\n\n\(ChaosOptions.usage)\n".utf8))
    exit(UsageError.exitStatus)
}
