import FolioHarness

/// Every random choice of one cycle, drawn up front in a fixed order, so that the same seed gives
/// the same plan whatever happens while it runs. Delays inside start-up, verify and backup are
/// fractions of the durations measured so far.
struct CyclePlan {
    let point: CrashPoint
    /// Kills during start-up before the real start: each after this fraction of the last start-up.
    let startupKills: [Double]
    /// When the kill comes at the latest (and, for `workload`, when it comes).
    let killAfterMilliseconds: Int
    /// The verify and backup requests of the cycle, by when they go out.
    let verifyAfterMilliseconds: Int?
    let backupAfterMilliseconds: Int?
    /// For `verify` and `backup`: the kill comes this fraction of the request's last duration after it went out.
    let killFraction: Double
    /// For `mapGrowth`: the kill comes this long after foliod logged the growth.
    let growthDelaySeconds: Double
    /// For `staleReader`: when the reader is started and killed.
    let readerAfterMilliseconds: Int

    init(_ random: inout SplitMix64, workloadMilliseconds: Int) {
        point = CrashPoint.random(&random)
        let startupKills = (0..<Int.random(in: 1...3, using: &random)).map { _ in
            Double.random(in: 0...1.2, using: &random)
        }
        self.startupKills = point == .startup ? startupKills : []
        let killAt = Int.random(in: 20...workloadMilliseconds, using: &random)
        killAfterMilliseconds = killAt
        let early = Int.random(in: 0...(killAt / 2), using: &random)
        let verifyAt = Int.random(in: 0...4 * killAt, using: &random)
        let backupAt = Int.random(in: 0...4 * killAt, using: &random)
        // A verify or backup point has that one request; other cycles have each in one of four,
        // finished or killed.
        let other = point != .verify && point != .backup
        verifyAfterMilliseconds = point == .verify ? early : other && verifyAt < killAt ? verifyAt : nil
        backupAfterMilliseconds = point == .backup ? early : other && backupAt < killAt ? backupAt : nil
        killFraction = Double.random(in: 0...1.1, using: &random)
        growthDelaySeconds = Double.random(in: 0...0.002, using: &random)
        readerAfterMilliseconds = Int.random(in: 10...max(10, killAt / 2), using: &random)
    }
}
