/// libFuzzer's driver (in libclang_rt.fuzzer, linked by `-sanitize=fuzzer`): parses the flags, then
/// calls `testOneInput` with each input it makes.
@_silgen_name("LLVMFuzzerRunDriver")
private func runLibFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

/// Runs libFuzzer from a fuzz executable's `main`.
public func runLibFuzzer(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
    _ testOneInput: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt {
    var argc = argc
    var argv = argv
    return runLibFuzzerDriver(&argc, &argv, testOneInput)
}
