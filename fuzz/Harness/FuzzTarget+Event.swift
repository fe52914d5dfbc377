@_spi(Fuzzing) import FolioModel

extension FuzzTarget {
    /// The bytes as one event's canonical bytes, decoded both ways, with the data checked and not:
    /// - whatever the layout reading (`decodingCanonicalObjectEvent`) accepts, the general decoder
    ///   accepts with the same event and data range;
    /// - `Event(decoding:)` answers as the general decoder does;
    /// - an object event the general decoder reads from bytes that are its canonical encoding is
    ///   read by the layout too (the fast path covers every canonical object event).
    static func eventDecoder(_ bytes: UnsafeRawBufferPointer) -> String? {
        for checkingData in [false, true] {
            var fastRange: Range<Int>?
            let fast = Event.decodingCanonicalObjectEvent(bytes, dataRange: &fastRange, checkingData: checkingData)
            var generalRange: Range<Int>?
            let general = try? Event(decodingGenerally: bytes, dataRange: &generalRange, checkingData: checkingData)
            var answeredRange: Range<Int>?
            let answered = try? Event(decoding: bytes, dataRange: &answeredRange, checkingData: checkingData)
            if let fast {
                guard let general else { return "the layout reading accepted an event the general decoder refuses" }
                guard general == fast else { return "the layout reading gave \(fast), the general decoder \(general)" }
                guard generalRange == fastRange else {
                    return "data range \(String(describing: fastRange)) against \(String(describing: generalRange))"
                }
            }
            guard answered == general, answeredRange == generalRange else {
                return "Event(decoding:) does not answer as the general decoder"
            }
            if fast == nil, let general, general.isObjectEvent, general.encoded().elementsEqual(bytes) {
                return "a canonical \(general.typeName) event went the general way"
            }
        }
        return nil
    }
}

extension Event {
    fileprivate var isObjectEvent: Bool {
        switch change {
        case .created, .updated, .deleted: true
        default: false
        }
    }
}
