/// The release of Folio that foliod and folio were built from; `foliod --version`,
/// `folio --version` and `hello` report it.
public enum Release {
    public static let version = "0.1.0"
}
