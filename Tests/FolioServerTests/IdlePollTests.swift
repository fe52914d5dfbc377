import CFolioSystem
import Foundation
import Glibc
import Synchronization
import Testing

@testable import FolioServer

/// How an event loop learns how long to look for work before it sleeps (`IdlePoll`).
@Suite struct IdlePollTests {
    @Test func theWindowGrowsWhileWorkComesSoonAndShrinksToNothingWhileItDoesNot() {
        var poll = IdlePoll(limit: 100)
        #expect(poll.window == 0)
        poll.record(sleptMicroseconds: 40)
        #expect(poll.window == IdlePoll.start)
        poll.record(sleptMicroseconds: 40)
        poll.record(sleptMicroseconds: 100)
        #expect(poll.window == 40)
        for _ in 0..<10 { poll.record(sleptMicroseconds: 5) }
        #expect(poll.window == 100)
        poll.record(sleptMicroseconds: 101)
        #expect(poll.window == 50)
        poll.record(sleptMicroseconds: 5_000)
        poll.record(sleptMicroseconds: 5_000)
        #expect(poll.window == 12)
        poll.record(sleptMicroseconds: 5_000)
        #expect(poll.window == 0)
        poll.record(sleptMicroseconds: 1_000_000)
        #expect(poll.window == 0)
    }

    @Test func aTurnThatLostTheCPUStopsThePollAndHoldsOffLearningLongerEachTime() {
        var poll = IdlePoll(limit: 1000)
        for _ in 0..<20 { poll.record(sleptMicroseconds: 1) }
        #expect(poll.window == 1000)
        poll.preempted()
        #expect(poll.window == 0)
        // Short sleeps teach nothing for the next holdOffWaits waits.
        for _ in 0..<IdlePoll.holdOffWaits { poll.record(sleptMicroseconds: 1) }
        #expect(poll.window == 0)
        poll.record(sleptMicroseconds: 1)
        #expect(poll.window == IdlePoll.start)
        // Lost again before any poll found work: twice as long.
        poll.preempted()
        for _ in 0..<(2 * IdlePoll.holdOffWaits) { poll.record(sleptMicroseconds: 1) }
        #expect(poll.window == 0)
        poll.record(sleptMicroseconds: 1)
        #expect(poll.window == IdlePoll.start)
        // A poll that finds work brings the hold-off back to its start.
        poll.found()
        poll.preempted()
        for _ in 0..<IdlePoll.holdOffWaits { poll.record(sleptMicroseconds: 1) }
        poll.record(sleptMicroseconds: 1)
        #expect(poll.window == IdlePoll.start)
        // Never more than maximumHoldOff.
        for _ in 0..<20 { poll.preempted() }
        for _ in 0..<IdlePoll.maximumHoldOff { poll.record(sleptMicroseconds: 1) }
        poll.record(sleptMicroseconds: 1)
        #expect(poll.window == IdlePoll.start)
    }

    @Test func aYieldThatLetsAnotherThreadRunCountsAsASwitchAway() throws {
        // This thread and one that spins, both on CPU 0: each yield hands the CPU over.
        let all = UInt64.max >> (64 - min(64, max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        try #require(folio_set_thread_cpus(0, 1) == 0)
        defer { _ = folio_set_thread_cpus(0, all) }
        let spinning = Atomic<Bool>(true)
        let started = Atomic<Bool>(false)
        let spinner = Thread {
            _ = folio_set_thread_cpus(0, 1)
            started.store(true, ordering: .releasing)
            let deadline = monotonicMicroseconds() + 2_000_000
            while spinning.load(ordering: .acquiring) && monotonicMicroseconds() < deadline {}
        }
        spinner.start()
        defer { spinning.store(false, ordering: .releasing) }
        while !started.load(ordering: .acquiring) { sched_yield() }
        let before = IdlePoll.switchesAway()
        for _ in 0..<100 { sched_yield() }
        #expect(IdlePoll.switchesAway() > before)
    }

    @Test func aLimitOfZeroNeverPolls() {
        var poll = IdlePoll(limit: 0)
        for _ in 0..<20 { poll.record(sleptMicroseconds: 1) }
        #expect(poll.window == 0)
    }

    @Test func theRunnableThreadsAreReadFromLoadavg() {
        func runnable(_ text: String) -> Int? {
            var text = text
            return text.withUTF8 { IdlePoll.runnable(inLoadavg: UnsafeRawBufferPointer($0)) }
        }
        #expect(runnable("0.52 0.58 0.59 3/412 12345\n") == 3)
        #expect(runnable("10.00 9.00 8.00 17/2048 99\n") == 17)
        #expect(runnable("0.52 0.58 0.59 /412 12345\n") == nil)
        #expect(runnable("0.52 0.58 0.59 x/412 12345\n") == nil)
        #expect(runnable("0.52 0.58 0.59 3") == nil)
        #expect(runnable("") == nil)
        // The machine's own file reads as a number.
        let poll = IdlePoll(limit: 100)
        _ = poll.machineHasRoom()
    }

    @Test func theSettingTakesZeroToAThousandMicroseconds() throws {
        let defaults = ServerConfiguration(dataDirectory: "/d", socketPath: "/s")
        #expect(try Settings.configuration(defaults: defaults, file: nil, flags: []).idlePollMicroseconds == 100)
        #expect(
            try Settings.configuration(defaults: defaults, file: nil, flags: [("idle-poll", "0")]).idlePollMicroseconds
                == 0)
        let file = try Settings.configuration(
            defaults: defaults, file: (path: "/etc/folio/foliod.conf", text: "idle-poll = 250\n"), flags: [])
        #expect(file.idlePollMicroseconds == 250)
        for value in ["1001", "-1", "soon"] {
            #expect {
                try Settings.configuration(defaults: defaults, file: nil, flags: [("idle-poll", value)])
            } throws: { error in
                "\(error)".contains("idle-poll takes")
            }
        }
        #expect(defaults.restartOnlyDifferences(from: file) == ["idle-poll"])
    }
}
