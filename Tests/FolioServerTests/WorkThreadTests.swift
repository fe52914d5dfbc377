import FolioHarness
import Foundation
import Glibc
import Synchronization
import Testing

@testable import FolioServer

@Suite struct WorkThreadTests {
    final class Recorder: Sendable {
        /// A `Locked` (FolioHarness), not a `Synchronization.Mutex`: that one is a futex
        /// ThreadSanitizer does not see, so `make test-tsan` took the test's reads of the items,
        /// under the lock, for races with the work thread's appends.
        let items = Locked<[Int]>([])
        let tid = Atomic<Int32>(0)
        let thread = Atomic<UInt>(0)
    }

    /// A thread's scheduling state ("R" running, "S" sleeping, …) and its voluntary context
    /// switches (each time it blocked), from /proc.
    static func state(of tid: Int32) throws -> (state: Character, voluntarySwitches: Int) {
        let status = try String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8)
        var state: Character = "?"
        var switches = -1
        for line in status.split(separator: "\n") {
            if line.hasPrefix("State:") {
                state = line.dropFirst("State:".count).trimmingCharacters(in: .whitespaces).first ?? "?"
            }
            if line.hasPrefix("voluntary_ctxt_switches:") {
                switches = Int(line.split(separator: "\t").last ?? "") ?? -1
            }
        }
        return (state, switches)
    }

    /// The calling thread's id: /proc/thread-self links to "PID/task/TID".
    static func threadID() -> Int32 {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? ""
        return Int32(link.split(separator: "/").last ?? "") ?? 0
    }

    /// Waits up to `seconds` for `condition`.
    static func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return true }
            usleep(200)
        }
        return try condition()
    }

    static func start(spin: UInt64, _ recorder: Recorder) -> WorkThread<Int> {
        WorkThread<Int>(name: "test-work", spinMicroseconds: spin) { items in
            recorder.tid.store(Self.threadID(), ordering: .relaxed)
            recorder.thread.store(UInt(pthread_self()), ordering: .relaxed)
            recorder.items.withLock { $0.append(contentsOf: items) }
        }
    }

    /// A thread that has handled one item (which told its thread id) and sleeps, waiting for more.
    static func idleThread(spin: UInt64) throws -> (WorkThread<Int>, Recorder, Int32) {
        let recorder = Recorder()
        let work = start(spin: spin, recorder)
        work.enqueue([0])
        #expect(eventually { recorder.items.withLock { $0.count } == 1 })
        let tid = recorder.tid.load(ordering: .relaxed)
        #expect(try eventually { try state(of: tid).state == "S" }, "an idle thread sleeps")
        return (work, recorder, tid)
    }

    @Test func itemsAreHandledInOrderAndStopFinishesTheQueue() {
        let recorder = Recorder()
        let work = Self.start(spin: 0, recorder)
        for item in 0..<1000 { work.enqueue([item]) }
        work.stop()
        #expect(recorder.items.withLock { $0 } == Array(0..<1000))
    }

    /// An anticipated item is waited for by a thread that does not block: woken by
    /// `anticipate`, it runs until the item comes and takes it without sleeping in between.
    @Test func anAnticipatedItemIsTakenWithoutSleeping() throws {
        let (work, recorder, tid) = try Self.idleThread(spin: 10_000_000)
        defer { work.stop() }

        work.anticipate()
        #expect(try Self.eventually { try Self.state(of: tid).state == "R" }, "an anticipating thread spins")
        let before = try Self.state(of: tid).voluntarySwitches
        usleep(20_000)
        #expect(try Self.state(of: tid).state == "R")
        work.enqueue([1])
        #expect(Self.eventually { recorder.items.withLock { $0.count } == 2 })
        // It took the item without having blocked since it began to spin (it blocks after).
        let after = try Self.state(of: tid).voluntarySwitches
        #expect(after - before <= 1, "the thread blocked \(after - before) times while it anticipated")
        #expect(try Self.eventually { try Self.state(of: tid).state == "S" }, "it sleeps again once the queue is empty")
    }

    /// An anticipation that no item follows ends after `spinMicroseconds`: the thread sleeps
    /// again, having spent about that long, and the next item wakes it as usual.
    @Test func anAnticipationWithoutAnItemGivesUp() throws {
        let (work, recorder, tid) = try Self.idleThread(spin: 20_000)
        defer { work.stop() }
        var clock = clockid_t()
        var cpu = timespec()
        #expect(pthread_getcpuclockid(pthread_t(recorder.thread.load(ordering: .relaxed)), &clock) == 0)
        clock_gettime(clock, &cpu)
        let cpuBefore = Double(cpu.tv_sec) + Double(cpu.tv_nsec) / 1e9

        work.anticipate()
        usleep(300_000)
        #expect(try Self.state(of: tid).state == "S", "the spin ended")
        clock_gettime(clock, &cpu)
        let spent = Double(cpu.tv_sec) + Double(cpu.tv_nsec) / 1e9 - cpuBefore
        #expect(spent < 0.2, "the spin took \(spent) s of CPU, for a bound of 0.02 s")

        work.enqueue([1])
        #expect(Self.eventually { recorder.items.withLock { $0.count } == 2 })
    }

    /// A thread that looks for work before it sleeps (`idlePollMicroseconds`): items that come a
    /// millisecond apart teach it a window longer than that, and it then takes them without
    /// blocking; with no room to poll, no polling, or items not worth a look after them
    /// (`pollsAfter`), it blocks for each. Once nothing comes, it sleeps after at most its limit.
    @Test(arguments: [(100_000, true, true), (100_000, false, true), (0, true, true), (100_000, true, false)])
    func itemsComingSoonAreTakenWithoutSleepingOnceTheWindowIsLearnt(limit: UInt64, room: Bool, worthALook: Bool) throws
    {
        let recorder = Recorder()
        let found = Atomic<Int>(0)
        let work = WorkThread<Int>(
            // Other tests share the machine: a yield that lets one of their threads run does not
            // end the poll here.
            name: "test-poll", idlePollMicroseconds: limit, roomToPoll: { _ in room }, pollYieldsForGood: false,
            foundWhilePolling: { found.add(1, ordering: .relaxed) }, pollsAfter: { _ in worthALook }
        ) { items in
            recorder.tid.store(Self.threadID(), ordering: .relaxed)
            recorder.items.withLock { $0.append(contentsOf: items) }
        }
        defer { work.stop() }
        // Learning: 10 µs doubling past 1 ms takes eight waits of about a millisecond.
        for item in 0..<20 {
            work.enqueue([item])
            #expect(Self.eventually { recorder.items.withLock { $0.count } == item + 1 })
            usleep(1_000)
        }
        let tid = recorder.tid.load(ordering: .relaxed)
        let before = try Self.state(of: tid).voluntarySwitches
        let foundBefore = found.load(ordering: .relaxed)
        for item in 20..<40 {
            work.enqueue([item])
            #expect(Self.eventually { recorder.items.withLock { $0.count } == item + 1 })
            usleep(1_000)
        }
        let blocked = try Self.state(of: tid).voluntarySwitches - before
        let foundNow = found.load(ordering: .relaxed) - foundBefore
        if limit > 0 && room && worthALook {
            #expect(foundNow >= 15, "the poll found \(foundNow) of 20 items")
            #expect(blocked <= 10, "the thread blocked \(blocked) times for 20 items it should have found polling")
        } else {
            #expect(foundNow == 0)
            #expect(blocked >= 20, "the thread blocked \(blocked) times for 20 items")
        }
        // Nothing comes now: it sleeps within its limit (0.1 s here).
        #expect(try Self.eventually(2) { try Self.state(of: tid).state == "S" }, "an idle thread sleeps")
        #expect(recorder.items.withLock { $0 } == Array(0..<40))
    }
}
