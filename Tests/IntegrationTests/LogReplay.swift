import FolioModel

@testable import FolioStore

/// Replays `source`'s event log into a new store in `path` (an empty directory), a chunk of events
/// per transaction, as an import does.
func replayLog(of source: Store, into path: String, chunk: Int = 97) throws -> Store {
    let target = try Store(directory: path)
    try target.append { after in
        try source.read { snapshot in
            var events: [Event] = []
            try snapshot.forEachEvent(after: after, limit: chunk) { sequence, record in
                events.append(try EventLog.decode(record, sequence: sequence))
                return true
            }
            return events
        }
    }
    return target
}
