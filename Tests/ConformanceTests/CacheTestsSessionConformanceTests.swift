import Foundation
import Testing
import TestSupport

/// http-tests/cache-tests through the session, every test that
/// applies to a private cache, 32 at a time.
///
/// Prints `conformance cache-tests: required R/137 optimal O/77 check C/86`,
/// writes `cache-tests.json` in the browsers' result shape (to
/// `$URLLOADING_RESULTS_DIR`, else a temporary folder), and fails
/// when a required test listed in `Results/cache-tests-required-passing.txt`
/// (the ones that passed before) fails now.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(5)))) struct CacheTestsSessionConformanceTests {
    static let resultsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Results")

    @Test func privateCacheTests() async throws {
        guard let suite = ConformanceData.suite("http-cache-tests") else { return }
        let (cases, _) = try CacheTestsPolicyRunner.load(suite.appendingPathComponent("tests.json"))
        let ids = try CacheTestsPolicyConformanceTests.privateIDs(suite.appendingPathComponent("private-cache-test-ids.json"))
            .sorted()
        let origin = try await TestOrigin.start()
        let runner = CacheTestsSessionRunner(origin: origin, cases: cases)
        // Every test that applies, plus whatever it depends on.
        var wanted = Set(ids)
        var frontier = ids
        while let id = frontier.popLast() {
            for dependency in cases[id]?.dependsOn ?? [] where wanted.insert(dependency).inserted { frontier.append(dependency) }
        }
        var raw: [String: CacheTestsPolicyRunner.Outcome] = [:]
        await withTaskGroup(of: (String, CacheTestsPolicyRunner.Outcome).self) { group in
            var pending = wanted.sorted()[...]
            func startNext() {
                guard let id = pending.popFirst(), let test = cases[id] else { return }
                group.addTask { (id, await runner.run(test)) }
            }
            for _ in 0..<32 { startNext() }
            for await (id, outcome) in group {
                raw[id] = outcome
                startNext()
            }
        }
        // No second chance: a required test that fails, fails the run. The
        // suite measures freshness in seconds, so tools/test runs it alone,
        // where no other suite's load decides it.
        let guardFile = Self.resultsDirectory.appendingPathComponent("cache-tests-required-passing.txt")
        let mustPass = ((try? String(contentsOf: guardFile, encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init).filter { !$0.isEmpty && !$0.hasPrefix("#") }
        try await origin.shutdown()

        func final(_ id: String, _ seen: Set<String> = []) -> CacheTestsPolicyRunner.Outcome {
            guard let outcome = raw[id] else { return .fail("not run") }
            if outcome != .pass { return outcome }
            for dependency in cases[id]?.dependsOn ?? [] where !seen.contains(dependency) && final(dependency, seen.union([id])) != .pass {
                return .dependencyFailed
            }
            return .pass
        }
        // Messages name the origin's port and the test's uuid, which change
        // every run: the results file keeps neither, so it changes only
        // when a result does.
        let volatileURL = try NSRegularExpression(pattern: "https?://127\\.0\\.0\\.1:[0-9]+(/test/[0-9a-f-]+)?")
        let volatileUUID = try NSRegularExpression(pattern: "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]*")
        func stable(_ text: String) -> String {
            let withoutURLs = volatileURL.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "<test-url>")
            return volatileUUID.stringByReplacingMatches(
                in: withoutURLs, range: NSRange(withoutURLs.startIndex..., in: withoutURLs), withTemplate: "<uuid>")
        }
        var counts: [String: (passed: Int, total: Int)] = [:]
        var results: [String: Any] = [:]
        var failures: [String] = []
        for id in ids {
            let kind = cases[id]?.kind ?? "required"
            let outcome = final(id)
            counts[kind, default: (0, 0)].total += 1
            switch outcome {
            case .pass:
                counts[kind, default: (0, 0)].passed += 1
                results[id] = true
            case .fail(let text): results[id] = ["Assertion", stable(text)]; failures.append("  \(kind) \(id): \(text)")
            case .setupFail(let text): results[id] = ["Setup", stable(text)]; failures.append("  \(kind) \(id): setup: \(text)")
            case .dependencyFailed: results[id] = ["Dependency", "a test it depends on failed"]; failures.append("  \(kind) \(id): dependency failed")
            }
        }
        func figure(_ kind: String) -> String { "\(counts[kind]?.passed ?? 0)/\(counts[kind]?.total ?? 0)" }
        print("conformance cache-tests: required \(figure("required")) optimal \(figure("optimal")) check \(figure("check"))")
        print(failures.sorted().joined(separator: "\n"))
        // Results are output: never written into the tree (a clone stays clean).
        let json = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
        let output =
            ProcessInfo.processInfo.environment["URLLOADING_RESULTS_DIR"].map { URL(fileURLWithPath: $0) }
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("urlloading-conformance-results")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let file = output.appendingPathComponent("cache-tests.json")
        try json.write(to: file)
        print("cache-tests: per-test results in \(file.path)")

        for id in mustPass {
            #expect(results[id] as? Bool == true, "required cache-test \(id) passed before and fails now: \(final(id))")
        }
        #expect(!mustPass.isEmpty, "the list of required tests that pass is missing")
    }
}
