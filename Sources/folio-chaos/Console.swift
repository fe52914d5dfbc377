import Foundation

/// Lines on standard output, written at once (also when piped to make or a CI log).
enum Console {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }
}
