import FolioHarness
import FolioJSON
import Foundation
import Glibc
import Testing

/// `make install` and `make uninstall` as the README runs them, into a DESTDIR (or a PREFIX) in a
/// temporary directory, with the binaries this test run built.
@Suite struct InstallTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    static let systemdAnalyze = which("systemd-analyze")

    private func make(_ target: String, _ variables: [String: String]) throws -> CommandRun {
        try Binaries.require()
        let assignments =
            (variables.merging(["BINARIES": Binaries.directory!, "SYSTEMD_SETUP": "no"]) { first, _ in first })
            .sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        return try CommandRun.run(
            Self.which("make") ?? "/usr/bin/make", ["-s", "-C", Self.repository, target] + assignments, timeout: 120)
    }

    /// Every file of the README's install, with its mode; the units name the installed binary; the
    /// man pages are made from --help and render without warnings; the completions load and complete;
    /// the configuration file's every key, uncommented, starts foliod; uninstall removes it all but
    /// an edited configuration.
    @Test func installsIntoADestdirAndUninstallsCleanly() throws {
        try withTemporaryDirectory { directory in
            let destination = directory + "/dest"
            let installed = try make("install", ["DESTDIR": destination])
            #expect(installed.status == 0, "\(installed)")
            let expected: [(String, mode_t)] = [
                ("/usr/local/bin/foliod", 0o755), ("/usr/local/bin/folio", 0o755),
                ("/usr/local/lib/systemd/system/foliod.service", 0o644),
                ("/usr/local/lib/systemd/system/foliod.socket", 0o644),
                ("/usr/local/lib/sysusers.d/folio.conf", 0o644), ("/usr/local/lib/tmpfiles.d/folio.conf", 0o644),
                ("/etc/folio/foliod.conf", 0o644), ("/usr/local/share/man/man8/foliod.8", 0o644),
                ("/usr/local/share/man/man1/folio.1", 0o644),
                ("/usr/local/share/bash-completion/completions/folio", 0o644),
                ("/usr/local/share/bash-completion/completions/foliod", 0o644),
                ("/usr/local/share/zsh/site-functions/_folio", 0o644),
                ("/usr/local/share/doc/folio/README.md", 0o644), ("/usr/local/share/doc/folio/PROTOCOL.md", 0o644),
            ]
            for (path, mode) in expected {
                var info = stat()
                #expect(stat(destination + path, &info) == 0 && info.st_mode & 0o777 == mode, "\(path)")
            }
            let version = try CommandRun.run(destination + "/usr/local/bin/foliod", ["--version"])
            #expect(version.stdout.hasPrefix("foliod "), "\(version)")
            let folioVersion = try CommandRun.run(destination + "/usr/local/bin/folio", ["--version"])
            #expect(
                folioVersion.stdout == version.stdout.replacingOccurrences(of: "foliod", with: "folio"),
                "\(folioVersion)")

            let service = try String(
                contentsOfFile: destination + "/usr/local/lib/systemd/system/foliod.service", encoding: .utf8)
            #expect(service.contains("ExecStart=/usr/local/bin/foliod --config /etc/folio/foliod.conf"))

            // The man pages hold every setting and every command --help names.
            let foliodPage = try String(
                contentsOfFile: destination + "/usr/local/share/man/man8/foliod.8", encoding: .utf8)
            let help = try CommandRun.run(Binaries.foliod, ["--help"]).stdout
            let settings = help.split(separator: "\n").filter { $0.hasPrefix("  --") }.map {
                $0.dropFirst(4).split(separator: " ")[0]
            }
            #expect(settings.count > 20)
            for setting in settings {
                #expect(
                    foliodPage.contains("\\fB\\-\\-\(setting.replacingOccurrences(of: "-", with: "\\-"))\\fR"),
                    "\(setting)")
            }
            let folioPage = try String(
                contentsOfFile: destination + "/usr/local/share/man/man1/folio.1", encoding: .utf8)
            for command in ["create", "update", "batch", "backlinks", "schema", "view", "backup", "metrics", "top"] {
                #expect(folioPage.contains(".SS folio \(command)\n"), "\(command)")
            }
            if let groff = Self.which("groff") {
                for page in ["/usr/local/share/man/man8/foliod.8", "/usr/local/share/man/man1/folio.1"] {
                    let rendered = try CommandRun.run(groff, ["-man", "-Tutf8", "-ww", "-z", destination + page])
                    #expect(rendered.status == 0 && rendered.stderr.isEmpty, "\(rendered)")
                }
            }

            // The completions load, and complete from the installed programs' --help.
            let path = destination + "/usr/local/bin:/usr/bin:/bin"
            let bash = try CommandRun.run(
                "/bin/bash",
                [
                    "-c",
                    """
                    source "$1"
                    complete() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _${1}; echo "${COMPREPLY[*]}"; }
                    complete folio up; complete folio update Task t1 --in; complete folio view ""; complete foliod --idle
                    """,
                    "bash", destination + "/usr/local/share/bash-completion/completions/folio",
                ], environment: ["PATH": path])
            #expect(bash.stdout == "update\n--inc\ndefine list drop\n--idle-poll --idle-timeout\n", "\(bash)")
            if let zsh = Self.which("zsh") {
                let zshRun = try CommandRun.run(
                    zsh,
                    [
                        "-f", "-c",
                        """
                        file=$0
                        # compadd as zsh's: it keeps the candidates that start with the word.
                        compadd() {
                            local -a candidates
                            if [[ $1 == -a ]]; then candidates=("${(@P)2}"); else [[ $1 == -- ]] && shift; candidates=("$@"); fi
                            print -r -- "${(@M)candidates:#${words[CURRENT]}*}"
                        }
                        complete() { service=$1; words=("$@"); CURRENT=$#; source "$file"; }
                        complete folio up; complete folio view ""; complete foliod --idle
                        """,
                        destination + "/usr/local/share/zsh/site-functions/_folio",
                    ], environment: ["PATH": path])
                #expect(zshRun.stdout == "update\ndefine list drop\n--idle-poll --idle-timeout\n", "\(zshRun)")
            }

            // Every key the shipped configuration names, with the value it gives, is one foliod takes.
            let shipped = try String(contentsOfFile: destination + "/etc/folio/foliod.conf", encoding: .utf8)
            let keys = shipped.split(separator: "\n").filter {
                $0.range(of: #"^#[a-z.-]+ = "#, options: .regularExpression) != nil
            }
            #expect(keys.count >= 20, "\(shipped)")
            let uncommented = keys.map { $0.dropFirst() }.filter {
                !$0.hasPrefix("metrics-socket") && !$0.hasPrefix("backup-dir")
            }
            .joined(separator: "\n")
            try (uncommented + "\n").write(toFile: directory + "/foliod.conf", atomically: true, encoding: .utf8)
            let hello = try withRunningDaemon(arguments: ["--config", directory + "/foliod.conf"]) { daemon in
                try daemon.request(["op": "hello"])
            }
            #expect(hello.isOK, "\(hello)")

            // A second install keeps an edited configuration, and so does uninstall; the rest goes.
            try (shipped + "idle-timeout = 600\n").write(
                toFile: destination + "/etc/folio/foliod.conf", atomically: true, encoding: .utf8)
            let again = try make("install", ["DESTDIR": destination])
            #expect(again.status == 0 && again.stdout.contains("kept"), "\(again)")
            let removed = try make("uninstall", ["DESTDIR": destination])
            #expect(removed.status == 0 && removed.stdout.contains("edited"), "\(removed)")
            let left = try CommandRun.run("/usr/bin/find", [destination, "-type", "f"])
            #expect(left.stdout == destination + "/etc/folio/foliod.conf\n", "\(left)")
        }
    }

    /// The units as installed (into a PREFIX in a temporary directory, so that the paths they name
    /// exist): `systemd-analyze verify` finds nothing, and `security` rates the service at most 2.0.
    @Test(.enabled(if: systemdAnalyze != nil, "needs systemd-analyze"))
    func theInstalledUnitsVerifyAndAreHardened() throws {
        try withTemporaryDirectory { directory in
            let installed = try make("install", ["PREFIX": directory + "/usr", "SYSCONFDIR": directory + "/etc"])
            #expect(installed.status == 0, "\(installed)")
            let units = directory + "/usr/lib/systemd/system/"
            var options = [String]()
            if Self.which("man") == nil { options.append("--man=no") }
            if !FileManager.default.isExecutableFile(atPath: "/bin/kill") {
                Issue.record("/bin/kill (procps) is missing: ExecReload= names it; install procps")
            }
            let verified = try CommandRun.run(
                Self.systemdAnalyze!, ["verify"] + options + [units + "foliod.service", units + "foliod.socket"],
                environment: ["MANPATH": directory + "/usr/share/man"])
            #expect(verified.status == 0 && verified.stderr.isEmpty && verified.stdout.isEmpty, "\(verified)")
            let security = try CommandRun.run(
                Self.systemdAnalyze!, ["security", "--offline=yes", "--no-pager", units + "foliod.service"])
            let exposure = security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") }
                .flatMap { line in line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) } }
            #expect(exposure != nil && exposure! <= 2.0, "\(security)")
        }
    }
}
