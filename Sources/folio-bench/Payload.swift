import FolioJSON

/// The value every write stores: a small JSON object of about 100 bytes. Folio gets it as the
/// record's data, Redis as the string value of `SET`, byte for byte the same.
enum Payload {
    static let object: JSON = [
        "title": "Water the balcony plants",
        "done": false,
        "priority": 3,
        "tags": ["home", "weekly"],
        "owner": "mira",
    ]

    static let bytes: [UInt8] = object.serialized()
}
