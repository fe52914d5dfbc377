/// The states an object or a view may be in, given every answer so far: one state while all its
/// writes were answered, more after a write whose outcome is unknown. Never empty.
struct Possibilities<State: Equatable & CustomStringConvertible>: CustomStringConvertible {
    /// What a write does to one possible prior state, when nothing else (a unique view) stops it.
    enum Transition: Equatable {
        case applied(State)
        /// Refused with this error code.
        case refused(code: String)
    }

    private(set) var states: [State]

    init(_ state: State) { states = [state] }

    var single: State? { states.count == 1 ? states[0] : nil }

    var description: String {
        states.count == 1 ? states[0].description : "one of: " + states.map(\.description).joined(separator: " | ")
    }

    /// An acknowledged write: the state it reports must follow from one of the possible states.
    mutating func acknowledge(_ observed: State, by transition: (State) -> Transition, _ write: String)
        throws(Violation)
    {
        guard states.contains(where: { transition($0) == .applied(observed) }) else {
            throw Violation(
                "\(write) was acknowledged as \(observed), which follows from none of the possible prior states (\(description))"
            )
        }
        states = [observed]
    }

    /// A refusal. `byConstraint`: a unique view (not the write's own precondition) refused it, which
    /// is possible only where the write would otherwise apply. `fits` narrows further (a conflict's
    /// reported current version).
    mutating func refuse(
        code: String, byConstraint: Bool, fits: (State) -> Bool = { _ in true }, by transition: (State) -> Transition,
        _ write: String
    ) throws(Violation) {
        let remaining = states.filter { state in
            let outcome = transition(state)
            if byConstraint, case .applied = outcome { return fits(state) }
            return outcome == .refused(code: code) && fits(state)
        }
        guard !remaining.isEmpty else {
            throw Violation(
                "\(write) was refused with \(code), which none of the possible prior states explains (\(description))")
        }
        states = remaining
    }

    /// A write of unknown outcome: each possible state, and what the write would make of it.
    mutating func widen(by transition: (State) -> Transition) {
        for state in states {
            if case .applied(let next) = transition(state), !states.contains(next) { states.append(next) }
        }
    }

    /// A write of unknown outcome worked out for the one possible state: that state, or `next`.
    mutating func include(_ next: State) {
        if !states.contains(next) { states.append(next) }
    }

    /// What the store holds now must be one of the possibilities; afterwards it is the only one.
    mutating func settle(on observed: State, _ subject: String) throws(Violation) {
        guard states.contains(observed) else {
            throw Violation("\(subject) is \(observed) after the restart; expected \(description)")
        }
        states = [observed]
    }
}
