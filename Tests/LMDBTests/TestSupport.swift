import Foundation
import LMDB

/// Runs `body` with a new empty directory, removed afterwards whatever happens.
func withTemporaryDirectory<R>(_ body: (String) throws -> R) throws -> R {
    let path = NSTemporaryDirectory() + "folio-lmdb-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ buffer: UnsafeRawBufferPointer?) -> String? {
    buffer.map { String(decoding: $0, as: UTF8.self) }
}

func keys(in db: Database, of environment: Environment) throws -> [String] {
    try environment.read { txn throws in
        try txn.withCursor(db) { cursor throws in
            var keys: [String] = []
            var entry = try cursor.first()
            while let current = entry {
                keys.append(text(current.key)!)
                entry = try cursor.next()
            }
            return keys
        }
    }
}
