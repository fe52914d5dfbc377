import Foundation
import Synchronization
import Testing

@testable import FolioStore

/// `ChainHash.next` hashes with an EVP context kept by each thread and initialized again for every
/// hash: its results must be SHA-256's, whatever came before on the thread and on other threads.
@Suite struct ChainHashTests {
    /// Known answers, computed apart (Python's hashlib): SHA-256 of 32 zero bytes and "abc", and a
    /// chain of three small events from the genesis hash.
    @Test func theChainIsSHA256OverThePreviousHashAndTheEvent() {
        #expect(
            ChainHash.genesis.next(Array("abc".utf8)).hex
                == "365aa7d8f7f9402c4b9434502b4cc89ddb09fe50d7cd95b493b834c62d5a5370")
        var chain = ChainHash.genesis
        for sequence in 1...3 { chain = chain.next(Array("{\"seq\":\(sequence)}".utf8)) }
        #expect(chain.hex == "b94dfd11521c5dc81e3e4e26cfdf1b0bae0014902617ad6e18cd3875e417881d")
    }

    /// Eight threads each chain 500 events of 0 to 70,000 bytes; every hash equals one made with a
    /// fresh `SHA256Hasher` (its own context), so no state leaks from one hash to the next or
    /// between threads.
    @Test func aThreadsReusedContextHashesLikeAFreshOne() {
        let mismatches = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            var chain = ChainHash.genesis
            var state = UInt64(thread) &* 0x9E37_79B9_7F4A_7C15 &+ 1
            for index in 0..<500 {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let count = index % 50 == 0 ? 70_000 : Int(state >> 54)
                let event = (0..<count).map { UInt8(truncatingIfNeeded: (state >> 8) &+ UInt64($0)) }
                let fresh = SHA256Hasher()
                fresh.update(chain.bytes)
                fresh.update(event)
                chain = chain.next(event)
                if chain.bytes != fresh.finalize() { mismatches.add(1, ordering: .relaxed) }
            }
        }
        #expect(mismatches.load(ordering: .relaxed) == 0)
    }
}
