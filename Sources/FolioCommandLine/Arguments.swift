/// A command line split into options and positional arguments, read by name.
///
/// Forms: `--name value` or `--name=value` for options in `valued`, `--name` / `-x` for flags,
/// `--` ends the options. Whatever is left unread at the end is an error (`rejectUnused`).
public struct Arguments {
    public private(set) var positionals: [String] = []
    private var options: [(name: String, value: String?)] = []

    public init(_ argv: some Sequence<String>, valued: Set<String>) throws(UsageError) {
        var iterator = argv.makeIterator()
        var onlyPositionals = false
        while let argument = iterator.next() {
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" {
                positionals.append(argument)
            } else if argument == "--" {
                onlyPositionals = true
            } else if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                options.append((String(argument[..<equals]), String(argument[argument.index(after: equals)...])))
            } else if valued.contains(argument) {
                guard let value = iterator.next() else { throw UsageError("\(argument) needs a value") }
                options.append((argument, value))
            } else {
                options.append((argument, nil))
            }
        }
    }

    /// Whether any of `names` was given (as a flag).
    public mutating func flag(_ names: String...) throws(UsageError) -> Bool {
        var found = false
        while let index = options.firstIndex(where: { names.contains($0.name) }) {
            if options[index].value != nil { throw UsageError("\(options[index].name) takes no value") }
            options.remove(at: index)
            found = true
        }
        return found
    }

    /// Whether any of `names` was given, leaving it to be read.
    public func contains(_ names: String...) -> Bool {
        options.contains { names.contains($0.name) }
    }

    /// The value of the last of `names` given, if any.
    public mutating func value(_ names: String...) -> String? {
        var found: String?
        while let index = options.firstIndex(where: { names.contains($0.name) }) {
            found = options[index].value
            options.remove(at: index)
        }
        return found
    }

    /// Every value given for `names`, in order (for repeatable options).
    public mutating func values(_ names: String...) -> [String] {
        var found: [String] = []
        while let index = options.firstIndex(where: { names.contains($0.name) }) {
            if let value = options[index].value { found.append(value) }
            options.remove(at: index)
        }
        return found
    }

    public mutating func integer(_ names: String...) throws(UsageError) -> Int? {
        var found: String?
        for name in names { if let value = value(name) { found = value } }
        guard let found else { return nil }
        guard let number = Int(found), number >= 0 else {
            throw UsageError("\(names[0]) needs a non-negative integer, not '\(found)'")
        }
        return number
    }

    public mutating func takePositional() -> String? {
        positionals.isEmpty ? nil : positionals.removeFirst()
    }

    public func rejectUnused() throws(UsageError) {
        if let option = options.first { throw UsageError("unknown option \(option.name)") }
    }
}

/// A mistake in how a command was called: printed with the usage, exit status 64 (EX_USAGE).
public struct UsageError: Error, CustomStringConvertible {
    public static let exitStatus: Int32 = 64
    public let message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
