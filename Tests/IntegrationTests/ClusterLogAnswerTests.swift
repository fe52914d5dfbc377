import Testing

@testable import FolioCluster

/// `ClusterLog.firstsAndHead`: the first row `folio_append` answers, each write's first sequence
/// (0 when refused) and the log's head, read strictly.
@Suite struct ClusterLogAnswerTests {
    @Test func readsTheFirstsAndTheHead() {
        #expect(ClusterLog.firstsAndHead(";17")! == ([], 17))
        #expect(ClusterLog.firstsAndHead("5;5")! == ([5], 5))
        #expect(ClusterLog.firstsAndHead("3,0,9;12")! == ([3, 0, 9], 12))
        #expect(ClusterLog.firstsAndHead("18446744073709551615;18446744073709551615")! == ([.max], .max))
    }

    @Test func refusesAnythingElse() {
        for text in [
            "", ";", "5", "5;", ",5;6", "5,;6", "5,,6;7", "5;6;7", "5;6,7", " 5;6", "5;6 ", "-1;2", "a;1",
            "18446744073709551616;1", "1;99999999999999999999",
        ] {
            #expect(ClusterLog.firstsAndHead(text) == nil, "\(text)")
        }
    }
}
