import FolioClient
import FolioJSON
import Foundation

/// The client that sends the long requests of a cycle, `verify` and `backup`, one after another at
/// given moments, and signals `sent` as each goes out (the kill may be timed from it).
final class ServiceClient: @unchecked Sendable {
    enum Task {
        case verify
        case backup(directory: String)
    }

    struct Record {
        let task: Task
        /// The result, if answered with `ok: true`.
        let result: JSONObject?
        /// Why there was no result: no answer, or an error answer (a violation for verify).
        let problem: String?
        let seconds: Double
    }

    let sent = DispatchSemaphore(value: 0)
    private let socketPath: String
    private let tasks: [(afterMilliseconds: Int, task: Task)]
    private let timeout: Double
    private(set) var records: [Record] = []
    private(set) var violations: [Violation] = []

    init(socketPath: String, tasks: [(afterMilliseconds: Int, task: Task)], timeout: Double) {
        self.socketPath = socketPath
        self.tasks = tasks
        self.timeout = timeout
    }

    func run() {
        let clock = ContinuousClock()
        let start = clock.now
        for (after, task) in tasks {
            let wait = start + .milliseconds(after) - clock.now
            if wait > .zero {
                Thread.sleep(
                    forTimeInterval: Double(wait.components.attoseconds) / 1e18 + Double(wait.components.seconds))
            }
            guard let connection = try? FolioConnection(path: socketPath, timeout: timeout) else { return }
            let request: JSON
            switch task {
            case .verify: request = ["op": "verify"]
            case .backup(let directory): request = ["op": "backup", "directory": .string(directory)]
            }
            let began = clock.now
            var result: JSONObject?
            var problem: String?
            do {
                try connection.send(request)
                sent.signal()
                if let response = try connection.readJSON() {
                    if response.objectValue?["ok"] == .bool(true) {
                        result = response.objectValue?["result"]?.objectValue
                    } else {
                        problem = "answered \(response)"
                    }
                } else {
                    problem = "no answer"
                }
            } catch .timedOut {
                problem = "no answer"
                violations.append(Violation("\(request): no answer within \(timeout) s while foliod ran (hung?)"))
            } catch {
                problem = "no answer"
            }
            let elapsed = clock.now - began
            records.append(
                Record(
                    task: task, result: result, problem: problem,
                    seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
            if problem == "no answer" { return }
        }
    }
}
