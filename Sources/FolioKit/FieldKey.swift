/// Any coding key, by its text.
struct FieldKey: CodingKey {
    let stringValue: String
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

/// The coding key of an array element, by its index.
struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { String(intValue!) }
    init(_ index: Int) { intValue = index }
    init?(stringValue: String) { nil }
    init?(intValue: Int) { self.intValue = intValue }
}
