import FolioClient
import FolioHarness
import FolioJSON

/// One writing client: over its own connection it sends a request, waits for the answer, takes
/// it into its ledger, and goes on until the connection ends (foliod was killed).
final class WorkloadClient: @unchecked Sendable {
    let ledger: ClientLedger
    private var random: SplitMix64
    private let socketPath: String
    /// How long an answer may take while foliod runs; longer is a hung daemon.
    private let timeout: Double
    private(set) var violations: [Violation] = []

    init(ledger: ClientLedger, seed: UInt64, socketPath: String, timeout: Double) {
        self.ledger = ledger
        random = SplitMix64(seed: seed)
        self.socketPath = socketPath
        self.timeout = timeout
    }

    func run() {
        // If foliod is already gone, there is nothing to send.
        guard let connection = try? FolioConnection(path: socketPath, timeout: timeout) else { return }
        while true {
            let operation = OperationKind.next(&random, ledger)
            let outcome: Outcome
            do {
                try connection.send(operation.request)
                if let response = try connection.readJSON() {
                    outcome = .answered(response)
                } else {
                    outcome = .noAnswer("the connection closed")
                }
            } catch .timedOut(let call) {
                outcome = .noAnswer("\(call) timed out")
                violations.append(
                    Violation("\(operation.request): no answer within \(timeout) s while foliod ran (hung?)"))
            } catch .malformedResponse {
                // A line cut short by the kill: the answer never fully arrived.
                outcome = .noAnswer("a partial answer line")
            } catch {
                outcome = .noAnswer("\(error)")
            }
            ledger.records.append(WriteRecord(client: ledger.client, operation: operation, outcome: outcome))
            do {
                try operation.record(try outcome.classify("\(operation.request)"), in: ledger)
            } catch {
                violations.append(error)
                return
            }
            if case .noAnswer = outcome { return }
        }
    }
}
