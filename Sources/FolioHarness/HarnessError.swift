/// A child process could not be started, did not finish in time, or a pipe for it failed.
public struct HarnessError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}
