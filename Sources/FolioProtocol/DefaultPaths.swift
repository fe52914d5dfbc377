/// Where `foliod` listens and keeps its data when no flag says otherwise, and where `folio` looks for
/// it. `FOLIO_SOCKET` overrides the socket for both; `FOLIO_DATA` the data directory.
///
/// | user       | socket                                      | data                                   |
/// |------------|---------------------------------------------|----------------------------------------|
/// | root       | `/run/folio/folio.sock`                     | `/var/lib/folio`                       |
/// | any other  | `$XDG_RUNTIME_DIR/folio/folio.sock`, or `/tmp/folio-$UID/folio.sock` | `$XDG_DATA_HOME/folio`, or `~/.local/share/folio` |
public struct DefaultPaths: Sendable {
    public static let systemSocket = "/run/folio/folio.sock"
    public static let systemData = "/var/lib/folio"

    public let environment: [String: String]
    public let uid: UInt32

    public init(environment: [String: String], uid: UInt32) {
        self.environment = environment
        self.uid = uid
    }

    public var socket: String {
        if let path = nonEmpty("FOLIO_SOCKET") { return path }
        if uid == 0 { return Self.systemSocket }
        if let runtime = nonEmpty("XDG_RUNTIME_DIR") { return runtime + "/folio/folio.sock" }
        return "/tmp/folio-\(uid)/folio.sock"
    }

    public var dataDirectory: String {
        if let path = nonEmpty("FOLIO_DATA") { return path }
        if uid == 0 { return Self.systemData }
        if let data = nonEmpty("XDG_DATA_HOME") { return data + "/folio" }
        return (nonEmpty("HOME") ?? "/tmp") + "/.local/share/folio"
    }

    /// Sockets the CLI tries in order: the user's own, then the system service's.
    public var clientSocketCandidates: [String] {
        if let path = nonEmpty("FOLIO_SOCKET") { return [path] }
        return socket == Self.systemSocket ? [socket] : [socket, Self.systemSocket]
    }

    private func nonEmpty(_ name: String) -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        return value
    }
}
