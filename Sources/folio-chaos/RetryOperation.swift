import FolioJSON

/// A request sent with the key of an earlier keyed write that foliod remembers: the same request
/// again, which must be answered with the first result marked `"replayed": true` and write nothing
/// (also when it gets no answer), or a different request with that key, which must be refused with
/// `conflict` and detail `requestKey`.
struct RetryOperation: WorkloadOperation {
    enum Mode {
        case replay(ReplayExpectation)
        case reuse
    }

    let key: String
    let request: JSON
    let mode: Mode
    let label: String

    /// The retry of the client's keyed write `key`: a replay if it was applied, the write run as new if
    /// not (nil while its outcome is unknown, or when the model cannot tell what it would do now).
    static func retry(_ key: String, _ ledger: ClientLedger) -> (any WorkloadOperation)? {
        guard let entry = ledger.keyedRequests[key] else { return nil }
        let request = ModelWrite.request(entry.commands, form: entry.form, requestKey: key)
        switch entry.status {
        case .answered(let result):
            return RetryOperation(key: key, request: request, mode: .replay(.answer(result)), label: "retry of \(key)")
        case .appliedUnanswered(let expectation):
            return RetryOperation(
                key: key, request: request, mode: .replay(expectation), label: "retry of \(key) (answer lost)")
        case .notApplied:
            return try? ModelWrite(
                commands: entry.commands, form: entry.form, requestKey: key, isRetry: true, ledger: ledger)
        case .unanswered:
            return nil
        }
    }

    /// `write` (new) sent with the key of an applied keyed write.
    static func reuse(_ key: String, for write: ModelWrite) -> RetryOperation {
        var fields = write.request.objectValue!
        fields["requestKey"] = .string(key)
        return RetryOperation(key: key, request: .object(fields), mode: .reuse, label: "key \(key) reused")
    }

    var kind: String {
        switch mode {
        case .replay(.answer): return "retry, replayed"
        case .replay(.derived): return "retry after a lost answer, replayed"
        case .reuse: return "request key reused"
        }
    }

    func record(_ outcome: Outcome.Kind, in ledger: ClientLedger) throws(Violation) {
        switch (mode, outcome) {
        case (_, .uncertain), (_, .notStored):
            return
        case (.replay(let expectation), .acknowledged(let result)):
            if let problem = expectation.problem(result) {
                throw Violation("\(label) was answered \(JSON.object(result)): \(problem)")
            }
        case (.replay, .refused(let code, let error)):
            throw Violation("\(label) was refused with \(code) \(JSON.object(error)); it must get its first result")
        case (.reuse, .refused(let code, let error)):
            guard code == "conflict", error["requestKey"]?.stringValue == key else {
                throw Violation("\(label) was refused with \(JSON.object(error)), not a conflict on the key")
            }
        case (.reuse, .acknowledged(let result)):
            throw Violation("\(label) for a different request (\(request)) was acknowledged: \(JSON.object(result))")
        }
    }

    /// Nothing, whatever the answer.
    func expectedEvents(_ outcome: Outcome.Kind, in log: LoggedState) -> [ExpectedEvent] { [] }

    // MARK: Faults

    /// For `--double-apply-retries`: the request without its key (so foliod applies it again), and
    /// the answer foliod should have given, which the driver then pretends it got.
    var withoutKey: (request: JSON, pretendedAnswer: JSON)? {
        guard case .replay(.answer(var result)) = mode else { return nil }
        var fields = request.objectValue!
        fields["requestKey"] = nil
        result["replayed"] = true
        return (.object(fields), ["ok": true, "result": .object(result)])
    }
}
