import FolioClient
import FolioJSON

extension FolioConnection {
    /// Opens a connection for the checks: foliod is up and idle, so any failure is a violation.
    static func forChecks(_ path: String, timeout: Double) throws(Violation) -> FolioConnection {
        do { return try FolioConnection(path: path, timeout: timeout) } catch {
            throw Violation("cannot connect to foliod after the restart: \(error)")
        }
    }

    /// Sends `request` and returns the raw answer line; a missing answer is a violation.
    func rawCall(_ request: JSON) throws(Violation) -> [UInt8] {
        do {
            try send(request)
            guard let line = try readLine() else {
                throw Violation("\(request): foliod closed the connection instead of answering")
            }
            return line
        } catch let error as Violation {
            throw error
        } catch {
            throw Violation("\(request): \(error)")
        }
    }

    /// Sends `request` and returns its `result`; an error answer is a violation.
    func call(_ request: JSON) throws(Violation) -> JSONObject {
        try Self.result(of: try rawCall(request), request)
    }

    static func result(of line: [UInt8], _ request: JSON) throws(Violation) -> JSONObject {
        let response: JSON
        do { response = try JSONParser.parse(line) } catch {
            throw Violation("\(request): malformed answer (\(error))")
        }
        guard response.objectValue?["ok"] == .bool(true), case .object(let result)? = response.objectValue?["result"]
        else {
            throw Violation("\(request): answered \(String(decoding: line.prefix(600), as: UTF8.self))")
        }
        return result
    }
}
