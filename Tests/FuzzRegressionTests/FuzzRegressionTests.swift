import FolioFuzzing
import Foundation
import Testing

/// Every input kept in fuzz/regressions/<target>/ (inputs that once crashed a fuzz target or broke one
/// of its properties) runs through that target again: each must now pass.
@Suite struct FuzzRegressionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("fuzz/regressions")

    static var inputs: [Input] {
        FuzzTarget.allCases.flatMap { target in
            let directory = root.appendingPathComponent(target.rawValue)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map {
                Input(target: target, file: directory.appendingPathComponent($0))
            }
        }
    }

    struct Input: CustomTestStringConvertible, Sendable {
        let target: FuzzTarget
        let file: URL
        var testDescription: String { "\(target.rawValue)/\(file.lastPathComponent)" }
    }

    @Test func regressionsAreThere() {
        #expect(FileManager.default.fileExists(atPath: Self.root.path), "\(Self.root.path) is missing")
    }

    @Test(arguments: inputs) func replay(_ input: Input) throws {
        let bytes = try Data(contentsOf: input.file)
        let failure = bytes.withUnsafeBytes { input.target.run($0) }
        #expect(failure == nil, "\(input.testDescription): \(failure ?? "")")
    }
}
