/// The most resident (and anonymous) memory seen over a run of samples, and the process's peak at the last one.
struct MemoryWatch {
    let pid: Int32
    private(set) var maxResidentKiB = 0
    private(set) var maxAnonymousKiB = 0
    private(set) var peakKiB = 0

    init(pid: Int32) { self.pid = pid }

    mutating func sample() {
        guard let memory = ProcessMemory.read(pid: pid) else { return }
        maxResidentKiB = max(maxResidentKiB, memory.residentKiB)
        maxAnonymousKiB = max(maxAnonymousKiB, memory.anonymousKiB)
        peakKiB = max(peakKiB, memory.peakKiB)
    }

    mutating func merge(_ other: MemoryWatch) {
        maxResidentKiB = max(maxResidentKiB, other.maxResidentKiB)
        maxAnonymousKiB = max(maxAnonymousKiB, other.maxAnonymousKiB)
        peakKiB = max(peakKiB, other.peakKiB)
    }
}
