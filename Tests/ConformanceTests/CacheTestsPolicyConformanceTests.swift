import Foundation
import Testing

/// http-tests/cache-tests, the groups that need no network, against
/// CachePolicy and ResponseCache (issue: the HTTP cache).
@Suite struct CacheTestsPolicyConformanceTests {
    static let groups = ["cc-parse", "age-parse", "expires-parse", "vary-parse", "heuristic"]

    /// Required tests that fail, each with the reason it is accepted. Empty:
    /// every required test of these groups passes.
    static let acceptedRequiredFailures: [String: String] = [:]

    @Test func parseGroups() throws {
        guard let suite = ConformanceData.suite("http-cache-tests") else { return }
        let (cases, bySuite) = try CacheTestsPolicyRunner.load(suite.appendingPathComponent("tests.json"))
        let privateIDs = try Self.privateIDs(suite.appendingPathComponent("private-cache-test-ids.json"))
        var results: [String: CacheTestsPolicyRunner.Outcome] = [:]
        var counts: [String: (passed: Int, total: Int)] = ["required": (0, 0), "optimal": (0, 0), "check": (0, 0)]
        var failures: [String] = []
        for group in Self.groups {
            for id in bySuite[group] ?? [] where privateIDs.contains(id) {
                let outcome = CacheTestsPolicyRunner.run(id, cases: cases, results: &results)
                let kind = cases[id]?.kind ?? "required"
                counts[kind, default: (0, 0)].total += 1
                if outcome == .pass {
                    counts[kind, default: (0, 0)].passed += 1
                } else {
                    failures.append("  \(kind) \(id): \(outcome)")
                    if kind == "required" {
                        #expect(Self.acceptedRequiredFailures[id] != nil, "required test \(id) failed: \(outcome)")
                    }
                }
            }
        }
        func figure(_ kind: String) -> String { "\(counts[kind]?.passed ?? 0)/\(counts[kind]?.total ?? 0)" }
        print("conformance cache-tests-policy: required \(figure("required")) optimal \(figure("optimal")) check \(figure("check")) (groups \(Self.groups.joined(separator: ", ")))")
        if !failures.isEmpty { print(failures.joined(separator: "\n")) }
        #expect((counts["required"]?.total ?? 0) > 0)
    }

    static func privateIDs(_ file: URL) throws -> Set<String> {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
        let suites = object?["suites"] as? [String: [[String: Any]]] ?? [:]
        return Set(suites.values.flatMap { $0.compactMap { $0["id"] as? String } })
    }
}
