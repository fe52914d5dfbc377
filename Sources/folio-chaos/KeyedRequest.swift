import FolioJSON

/// A write the client sent with a request key, and what a retry of it must get.
final class KeyedRequest {
    enum Status {
        /// Not applied (refused, all its ops failed, or unanswered and not in the log): foliod keeps no
        /// key then, and a retry runs as a new request.
        case notApplied
        /// Applied and answered: a retry gets this result again.
        case answered(JSONObject)
        /// Sent, no answer yet; the checks after the restart tell whether it was applied.
        case unanswered
        /// Applied, its answer lost: a retry gets the results its events imply.
        case appliedUnanswered(ReplayExpectation)
    }

    let key: String
    let commands: [ModelCommand]
    let form: ModelWrite.Form
    var status: Status

    init(key: String, commands: [ModelCommand], form: ModelWrite.Form, status: Status) {
        self.key = key
        self.commands = commands
        self.form = form
        self.status = status
    }

    /// Whether foliod remembers the key (a different request with it must be refused).
    var isApplied: Bool {
        switch status {
        case .answered, .appliedUnanswered: return true
        case .notApplied, .unanswered: return false
        }
    }
}
