import FolioProtocol

public enum ServerVersion {
    public static let current = Release.version
}
