import FolioFuzzing
import LibFuzzerDriver

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTarget.treeRecord.fuzz(data, size)
}

/// SwiftPM links an executable's `main` to `<module>_main`; this one hands over to libFuzzer.
@_cdecl("FuzzTreeRecord_main")
public func main(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
    runLibFuzzer(argc, argv, fuzz)
}
