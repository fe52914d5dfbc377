import FolioJSON
import Foundation
import Glibc

/// Prints results: JSON lines for scripts, tables and text for people.
struct Output {
    let json: Bool
    /// --json was given: also text that is already meant for programs (metrics) comes as JSON.
    let askedForJSON: Bool

    func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func jsonLine(_ value: JSON) {
        var bytes = value.serialized()
        bytes.append(0x0A)
        FileHandle.standardOutput.write(Data(bytes))
    }

    /// One object as `field: value` lines, or one JSON line.
    func object(_ value: JSON) {
        guard !json, case .object(let object) = value else { return jsonLine(value) }
        let width = object.keys.map(\.count).max() ?? 0
        for field in object {
            line(field.key.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + Self.cell(field.value))
        }
    }

    /// Rows of objects as a table with the given leading columns, then every other field seen.
    func table(_ rows: [JSON], leading: [String], skipping: Set<String> = []) {
        var columns = leading
        for row in rows {
            guard case .object(let object) = row else { continue }
            for key in object.keys where !columns.contains(key) && !skipping.contains(key) { columns.append(key) }
        }
        let cells = rows.map { row in columns.map { Self.cell(row.objectValue?[$0]) } }
        var widths = columns.map(\.count)
        for row in cells {
            for (index, cell) in row.enumerated() { widths[index] = min(40, max(widths[index], cell.count)) }
        }
        func format(_ values: [String]) -> String {
            zip(values, widths).map { value, width in
                let shown = value.count > width ? String(value.prefix(width - 1)) + "…" : value
                return shown.padding(toLength: width, withPad: " ", startingAt: 0)
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        line(format(columns.map { $0.uppercased() }))
        for row in cells { line(format(row)) }
    }

    static func cell(_ value: JSON?) -> String {
        switch value {
        case nil: return ""
        case .string(let text)?: return text
        case let other?:
            if case .object(let object) = other, object.count == 1,
                let (key, inner) = object.fields.first.map({ ($0.key, $0.value) }),
                key == "$date" || key == "$ref", case .string(let text) = inner
            {
                return text
            }
            return other.description
        }
    }

    static var isTerminal: Bool { isatty(1) == 1 }
}

/// Writes all of `bytes` to stdout, straight from where they are (`FileHandle` wants them copied
/// into a `Data` first: a whole export, byte by byte, once more).
func writeToStandardOutput(_ bytes: UnsafeRawBufferPointer, what label: String) throws {
    var written = 0
    while written < bytes.count {
        let wrote = write(1, bytes.baseAddress! + written, bytes.count - written)
        if wrote < 0 && errno == EINTR { continue }
        guard wrote > 0 else {
            throw CommandError("cannot write \(label) to stdout: \(String(cString: strerror(errno)))")
        }
        written += wrote
    }
}
