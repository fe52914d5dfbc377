import FolioClient
import FolioHarness
import FolioJSON
import Glibc

/// One writing client: over its own connection it sends a request, waits for the answer, takes
/// it into its ledger, and goes on until the connection ends (foliod was killed), a write's outcome
/// is unknown (then the model's states stop being single until the next restart's checks), or
/// `stopped` says so (a cluster's node that was not killed serves on).
final class WorkloadClient: @unchecked Sendable {
    /// Pretended defects of foliod, to show that the checks catch them.
    struct Faults {
        /// Atomic batches without a key go out as two requests, as if foliod applied a batch in two
        /// transactions.
        var splitBatches = false
        /// Replays go out without their key, as if foliod wrote a retry again, and the driver takes
        /// the first answer again as the answer.
        var doubleApplyRetries = false
    }

    let ledger: ClientLedger
    private var random: SplitMix64
    private let socketPath: String
    /// How long an answer may take while foliod runs; longer is a hung daemon.
    private let timeout: Double
    private let faults: Faults
    private let stopped: @Sendable () -> Bool
    /// Another cluster node, through which every other retry goes (it must answer as the first did).
    private let retrySocketPath: String?
    private var retryConnection: FolioConnection?
    private(set) var violations: [Violation] = []
    /// Retries sent through `retrySocketPath`.
    private(set) var crossNodeRetries = 0

    init(
        ledger: ClientLedger, seed: UInt64, socketPath: String, timeout: Double, faults: Faults = Faults(),
        stopped: @escaping @Sendable () -> Bool = { false }, retrySocketPath: String? = nil
    ) {
        self.ledger = ledger
        random = SplitMix64(seed: seed)
        self.socketPath = socketPath
        self.timeout = timeout
        self.faults = faults
        self.stopped = stopped
        self.retrySocketPath = retrySocketPath
    }

    func run() {
        // If foliod is already gone, there is nothing to send.
        guard let connection = try? FolioConnection(path: socketPath, timeout: timeout) else { return }
        while !stopped() {
            let operation = nextOperation()
            let outcome: Outcome
            if let retrySocketPath, operation is RetryOperation, Bool.random(using: &random) {
                crossNodeRetries += 1
                if retryConnection == nil {
                    retryConnection = try? FolioConnection(path: retrySocketPath, timeout: timeout)
                }
                if let retryConnection {
                    outcome = exchange(operation, retryConnection)
                } else {
                    outcome = .noAnswer("cannot connect to the other node \(retrySocketPath)")
                }
            } else {
                outcome = exchange(operation, connection)
            }
            ledger.records.append(WriteRecord(client: ledger.client, operation: operation, outcome: outcome))
            do {
                let kind = try outcome.classify("\(operation.request)")
                try operation.record(kind, in: ledger)
                if case .uncertain = kind { return }
                // Not stored (a cluster's PostgreSQL is down, a commit failed): back off a little,
                // as a client would, rather than send thousands of writes into the outage.
                if case .notStored = kind { usleep(5_000) }
            } catch {
                violations.append(error)
                return
            }
        }
    }

    /// The next request; under `doubleApplyRetries` one in four is a retry of an applied keyed write,
    /// so that some retry of an update is soon written again.
    private func nextOperation() -> any WorkloadOperation {
        if faults.doubleApplyRetries, Int.random(in: 0..<4, using: &random) == 0,
            let key = ledger.requestKeys.filter({ ledger.keyedRequests[$0]!.isApplied }).randomElement(using: &random),
            let retry = RetryOperation.retry(key, ledger)
        {
            return retry
        }
        return OperationKind.next(&random, ledger)
    }

    /// Sends the operation's request and reads its answer (or, under a fault, what stands for it).
    private func exchange(_ operation: any WorkloadOperation, _ connection: FolioConnection) -> Outcome {
        if faults.splitBatches, let write = operation as? ModelWrite, let halves = write.halves {
            let first = call(halves.first, connection)
            guard case .answered(let answer) = first, answer.objectValue?["ok"] == .bool(true),
                case .array(let firstResults)? = answer.objectValue?["result"]?.objectValue?["results"]
            else { return first }
            let second = call(halves.second, connection)
            guard case .answered(let secondAnswer) = second, var envelope = secondAnswer.objectValue else {
                return second
            }
            if var result = envelope["result"]?.objectValue, case .array(let results)? = result["results"] {
                result["results"] = .array(firstResults + results)
                envelope["result"] = .object(result)
            } else if var error = envelope["error"]?.objectValue, let index = error["index"]?.integerValue {
                error["index"] = .int(index + Int64(halves.offset))
                envelope["error"] = .object(error)
            }
            return .answered(.object(envelope))
        }
        if faults.doubleApplyRetries, let retry = operation as? RetryOperation, let unkeyed = retry.withoutKey {
            let outcome = call(unkeyed.request, connection)
            guard case .answered = outcome else { return outcome }
            return .answered(unkeyed.pretendedAnswer)
        }
        return call(operation.request, connection)
    }

    private func call(_ request: JSON, _ connection: FolioConnection) -> Outcome {
        do {
            try connection.send(request)
            if let response = try connection.readJSON() { return .answered(response) }
            return .noAnswer("the connection closed")
        } catch .timedOut(let call) {
            violations.append(Violation("\(request): no answer within \(timeout) s while foliod ran (hung?)"))
            return .noAnswer("\(call) timed out")
        } catch .malformedResponse {
            // A line cut short by the kill: the answer never fully arrived.
            return .noAnswer("a partial answer line")
        } catch {
            return .noAnswer("\(error)")
        }
    }
}
