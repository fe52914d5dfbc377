import Foundation
import LMDB
import Synchronization
import Testing

private func smallPolicy() -> FileReserve.Policy {
    var policy = FileReserve.Policy()
    policy.minimum = 256 << 10
    policy.maximum = 1 << 20
    policy.step = 64 << 10
    return policy
}

private func dataFile(_ path: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: path + "/data.mdb"))
}

private func fill(_ db: Database, _ environment: Environment, from first: Int, count: Int) throws {
    try environment.write { txn throws in
        for index in first..<(first + count) {
            try txn.put(db, bytes("key \(index)"), bytes(String(repeating: "v\(index % 10)", count: 200)))
        }
    }
}

@Suite("Zeros reserved past the end of data.mdb")
struct FileReserveTests {
    @Test func topUpWritesSyncedZerosPastTheLastPageAndLeavesThePagesAlone() throws {
        try withTemporaryDirectory { path throws in
            let environment = try Environment(path: path)
            let db = try environment.openDatabase("things")
            try fill(db, environment, from: 0, count: 100)
            let before = try dataFile(path)
            let used = environment.info.usedSize
            let reserve = FileReserve(environment: environment, policy: smallPolicy())
            #expect(reserve.isLow)

            try reserve.topUp()

            let after = try dataFile(path)
            #expect(after.count >= used + (256 << 10))
            #expect(after.count < used + (256 << 10) + (64 << 10) + 4096)
            #expect(environment.fileSize == after.count)
            #expect(reserve.reservedBytes == after.count - used)
            #expect(!reserve.isLow)
            #expect(after.prefix(before.count) == before)
            #expect(after.dropFirst(before.count).allSatisfy { $0 == 0 })
            #expect(environment.info.usedSize == used)
        }
    }

    @Test func commitsGrowIntoTheReserveAndPastItAndSurviveReopening() throws {
        try withTemporaryDirectory { path throws in
            do {
                let environment = try Environment(path: path)
                let db = try environment.openDatabase("things")
                let reserve = FileReserve(environment: environment, policy: smallPolicy())
                try reserve.topUp()
                for round in 0..<20 {
                    try fill(db, environment, from: round * 200, count: 200)
                    if round % 5 == 0 { try reserve.topUp() }
                }
                #expect(environment.info.usedSize > 1 << 20)
                let copy = path + "/copy"
                try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
                try environment.copy(to: copy, compact: false)
                #expect(try dataFile(copy).count <= environment.info.usedSize)
            }
            let reopened = try Environment(path: path)
            let db = try reopened.openDatabase("things", create: false)
            try reopened.read { txn throws in
                for index in 0..<4000 {
                    let value = text(try txn.get(db, bytes("key \(index)")))
                    #expect(value == String(repeating: "v\(index % 10)", count: 200), "key \(index)")
                }
            }
        }
    }

    @Test func theReserveEndsWhereTheMapEnds() throws {
        try withTemporaryDirectory { path throws in
            var options = Environment.Options()
            options.mapSize = 1 << 20
            let environment = try Environment(path: path, options: options)
            _ = try environment.openDatabase("things")
            var policy = smallPolicy()
            policy.minimum = 4 << 20
            policy.maximum = 4 << 20
            let reserve = FileReserve(environment: environment, policy: policy)
            try reserve.topUp()
            #expect(environment.fileSize == 1 << 20)
        }
    }

    @Test func aWriteTransactionHoldsTheReserveOffUntilItEnds() throws {
        try withTemporaryDirectory { path throws in
            let environment = try Environment(path: path)
            let db = try environment.openDatabase("things")
            let reserve = FileReserve(environment: environment, policy: smallPolicy())
            let order = Mutex<[String]>([])
            let writing = DispatchSemaphore(value: 0)
            let writer = Thread {
                try? environment.write { txn throws in
                    try txn.put(db, bytes("a"), bytes("one"))
                    writing.signal()
                    Thread.sleep(forTimeInterval: 0.2)
                    order.withLock { $0.append("commit") }
                }
            }
            writer.start()
            writing.wait()
            try reserve.topUp()
            order.withLock { $0.append("reserve") }
            #expect(order.withLock { $0 } == ["commit", "reserve"])
            #expect(try environment.read { txn throws in text(try txn.get(db, bytes("a"))) } == "one")
        }
    }
}
