/// Rows of text cells under a header, rendered as aligned plain text or as a Markdown table.
/// The first `leftAligned` columns are left-aligned, the rest (numbers) right-aligned.
struct TextTable {
    let header: [String]
    var rows: [[String]] = []
    var leftAligned = 1

    init(header: [String], leftAligned: Int = 1) {
        self.header = header
        self.leftAligned = leftAligned
    }

    mutating func append(_ row: [String]) {
        precondition(row.count == header.count, "a row of \(row.count) cells under \(header.count) columns")
        rows.append(row)
    }

    var plain: String {
        let widths = columnWidths
        let lines = [header, widths.map { String(repeating: "-", count: $0) }] + rows
        return lines.map { cells in
            cells.enumerated().map { column, cell in pad(cell, to: widths[column], column: column) }.joined(
                separator: "  ")
        }.joined(separator: "\n")
    }

    var markdown: String {
        let rule = header.indices.map { $0 < leftAligned ? "---" : "---:" }
        return ([header, rule] + rows).map { "| " + $0.joined(separator: " | ") + " |" }.joined(separator: "\n")
    }

    private var columnWidths: [Int] {
        header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    }

    private func pad(_ cell: String, to width: Int, column: Int) -> String {
        let fill = String(repeating: " ", count: max(0, width - cell.count))
        return column < leftAligned ? cell + fill : fill + cell
    }
}
