import FolioModel
import Foundation
import Glibc

/// Who may do what: roles by user, group, uid or gid, per collection. The most permissive entry
/// that matches the peer and the collection wins. Root and the daemon's own user are always
/// admins. Without any entry, the members of the socket's group may write, and nobody else gets in.
public struct AccessPolicy: Sendable, Equatable {
    public enum Role: Int, Sendable, Comparable, CustomStringConvertible {
        case none = 0, read, write, admin

        public static func < (lhs: Role, rhs: Role) -> Bool { lhs.rawValue < rhs.rawValue }

        public init?(name: String) {
            switch name {
            case "none": self = .none
            case "read": self = .read
            case "write": self = .write
            case "admin": self = .admin
            default: return nil
            }
        }

        public var description: String {
            switch self {
            case .none: return "none"
            case .read: return "read"
            case .write: return "write"
            case .admin: return "admin"
            }
        }
    }

    public enum Subject: Sendable, Equatable {
        case user(String), group(String), uid(UInt32), gid(UInt32)
    }

    public struct Entry: Sendable, Equatable {
        public let subject: Subject
        public let role: Role
        /// nil: every collection (`*`).
        public let collections: Set<String>?
        /// The key as written, for messages.
        public let key: String
    }

    public private(set) var entries: [Entry] = []

    public init() {}

    /// `access.user.NAME`, `access.group.NAME`, `access.uid.N`, `access.gid.N` = `ROLE COLLECTION...`
    mutating func add(key: String, value: String) throws(SettingError) {
        let parts = key.split(separator: ".", maxSplits: 2).map(String.init)
        guard parts.count == 3, !parts[2].isEmpty else {
            throw SettingError(
                "\(key): an access entry is access.user.NAME, access.group.NAME, access.uid.N or access.gid.N")
        }
        let subject: Subject
        switch parts[1] {
        case "user": subject = .user(parts[2])
        case "group": subject = .group(parts[2])
        case "uid", "gid":
            guard let number = UInt32(parts[2]) else { throw SettingError("\(key): \(parts[1]) takes a number") }
            subject = parts[1] == "uid" ? .uid(number) : .gid(number)
        default:
            throw SettingError(
                "\(key): an access entry is access.user.NAME, access.group.NAME, access.uid.N or access.gid.N")
        }
        let words = value.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let first = words.first, let role = Role(name: first), role != .none else {
            throw SettingError(
                "\(key): the value is 'ROLE COLLECTION...' with ROLE read, write or admin, not '\(value)'")
        }
        let names = Array(words.dropFirst())
        guard !names.isEmpty else {
            throw SettingError("\(key): name the collections after the role, or * for all of them")
        }
        var collections: Set<String>?
        if !names.contains("*") {
            for name in names where name != AccessControl.filesCollection {
                do { try Names.validateCollection(name) } catch { throw SettingError("\(key): \(error.message)") }
            }
            collections = Set(names)
        }
        entries.append(Entry(subject: subject, role: role, collections: collections, key: key))
    }

    /// The peer's role for `collection` (nil: the role it has on every collection, for ops that
    /// name none).
    func role(of peer: Peer, for collection: String?) -> Role {
        if peer.uid == 0 || peer.uid == peer.daemonUID { return .admin }
        guard !entries.isEmpty else { return peer.groups.contains(peer.socketGID) ? .write : .none }
        var best = Role.none
        for entry in entries where best < entry.role && matches(entry.subject, peer) {
            if let collections = entry.collections {
                guard let collection, collections.contains(collection) else { continue }
            }
            best = entry.role
        }
        return best
    }

    /// The best role the peer has on any collection: whether it may connect at all.
    func bestRole(of peer: Peer) -> Role {
        if peer.uid == 0 || peer.uid == peer.daemonUID { return .admin }
        guard !entries.isEmpty else { return peer.groups.contains(peer.socketGID) ? .write : .none }
        return entries.filter { matches($0.subject, peer) }.map(\.role).max() ?? .none
    }

    private func matches(_ subject: Subject, _ peer: Peer) -> Bool {
        switch subject {
        case .user(let name): return peer.userName == name
        case .group(let name): return peer.groupNames.contains(name)
        case .uid(let uid): return peer.uid == uid
        case .gid(let gid): return peer.groups.contains(gid)
        }
    }
}

/// A connected client as the policy sees it: its credentials (`SO_PEERCRED`) and the groups of its
/// user, looked up once when it connects.
struct Peer: Sendable {
    let uid: UInt32
    let gid: UInt32
    let userName: String?
    /// The primary group and the supplementary groups of the user.
    let groups: Set<UInt32>
    let groupNames: Set<String>
    let daemonUID: UInt32
    let socketGID: UInt32

    init(uid: UInt32, gid: UInt32, daemonUID: UInt32, socketGID: UInt32) {
        self.uid = uid
        self.gid = gid
        self.daemonUID = daemonUID
        self.socketGID = socketGID
        var name: String?
        var groups: Set<UInt32> = [gid]
        var buffer = [CChar](repeating: 0, count: 16384)
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        if getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, let found = result,
            let user = found.pointee.pw_name
        {
            name = String(cString: user)
            var count: Int32 = 64
            var list = [gid_t](repeating: 0, count: Int(count))
            if getgrouplist(user, gid, &list, &count) < 0 {
                list = [gid_t](repeating: 0, count: Int(count))
                _ = getgrouplist(user, gid, &list, &count)
            }
            for group in list.prefix(Int(max(0, count))) { groups.insert(group) }
        }
        userName = name
        self.groups = groups
        var names: Set<String> = []
        for group in groups {
            var groupEntry = group_t()
            var groupResult: UnsafeMutablePointer<group_t>?
            if getgrgid_r(group, &groupEntry, &buffer, buffer.count, &groupResult) == 0, let found = groupResult,
                let text = found.pointee.gr_name
            {
                names.insert(String(cString: text))
            }
        }
        groupNames = names
    }
}

// swift-format-ignore: TypeNamesShouldBeCapitalized
// Named as C names it, beside Glibc's passwd.
typealias group_t = Glibc.group
