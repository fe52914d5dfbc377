/// What a counter's `count` may be: the sum of its acknowledged increments plus those of any subset
/// of the requests that incremented it and got no answer. Kept for the store's whole life, apart from
/// the log, so that it checks the log too.
struct CounterTally {
    private(set) var acknowledged: Int64 = 0
    private(set) var unanswered: [Int64] = []
    /// The sums of the subsets of `unanswered`.
    private(set) var extras: Set<Int64> = [0]

    mutating func acknowledge(_ amount: Int64) { acknowledged += amount }

    mutating func leaveUnanswered(_ amount: Int64) {
        unanswered.append(amount)
        extras.formUnion(extras.map { $0 + amount })
    }

    func allows(_ count: Int64) -> Bool { extras.contains(count - acknowledged) }

    var description: String {
        "the acknowledged increments sum to \(acknowledged)"
            + (unanswered.isEmpty ? "" : ", the unanswered ones are \(unanswered)")
    }
}
