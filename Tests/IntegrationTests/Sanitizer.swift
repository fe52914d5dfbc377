import Foundation

/// `make test-asan` and `make test-tsan` set FOLIO_SANITIZER: tests that judge foliod's resident
/// memory are left out then, since a sanitizer's allocator does not give memory back as glibc does.
let underSanitizer = ProcessInfo.processInfo.environment["FOLIO_SANITIZER"] != nil
