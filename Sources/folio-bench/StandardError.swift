import Foundation

/// Progress and diagnostics go to stderr, so stdout holds only the report.
enum StandardError {
    static func write(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
