import Testing

@testable import FolioServer

/// `log`, `log-timeout` and `min-seq-timeout`, from the file and from flags.
@Suite struct ClusterSettingsTests {
    let defaults = ServerConfiguration(dataDirectory: "/d", socketPath: "/s")

    @Test func theLogIsLMDBUnlessPostgresIsNamed() throws {
        let plain = try Settings.configuration(defaults: defaults, file: nil, flags: [])
        #expect(plain.clusterLog == nil)
        let file = try Settings.configuration(
            defaults: defaults,
            file: (
                path: "/etc/folio/foliod.conf",
                text: "log = postgres:host=/run/postgresql dbname=folio\nlog-timeout = 0.5\n"
            ),
            flags: [])
        #expect(file.clusterLog == "host=/run/postgresql dbname=folio")
        #expect(file.clusterTimeoutSeconds == 0.5)
        let back = try Settings.configuration(
            defaults: defaults, file: nil, flags: [("log", "postgres:dbname=x"), ("log", "lmdb")])
        #expect(back.clusterLog == nil)
        #expect(
            try Settings.configuration(defaults: defaults, file: nil, flags: [("min-seq-timeout", "2.5")])
                .minSeqTimeoutSeconds == 2.5)
    }

    @Test func badValuesSayWhatIsExpected() {
        for (name, value, message) in [
            ("log", "mysql:x", "log takes lmdb or postgres:CONNINFO"),
            ("log", "postgres: ", "needs a libpq connection string"),
            ("log-timeout", "0", "above 0"), ("min-seq-timeout", "soon", "number of seconds"),
        ] {
            #expect {
                try Settings.configuration(defaults: defaults, file: nil, flags: [(name, value)])
            } throws: { error in
                "\(error)".contains(message)
            }
        }
        #expect(throws: SettingError.self) {
            try Settings.configuration(
                defaults: defaults, file: nil, flags: [("log", "postgres:dbname=x"), ("journal", "on")])
        }
    }
}
