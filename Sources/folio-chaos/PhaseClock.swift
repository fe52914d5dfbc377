/// Where a cycle's time goes: each `end(name)` closes the phase that began at the previous one.
struct PhaseClock {
    private let clock = ContinuousClock()
    private var last: ContinuousClock.Instant
    private(set) var phases: [(name: String, seconds: Double)] = []

    init() { last = clock.now }

    mutating func end(_ name: String) {
        let now = clock.now
        let elapsed = now - last
        phases.append((name, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
        last = now
    }
}
