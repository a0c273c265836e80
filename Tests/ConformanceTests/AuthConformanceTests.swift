import Foundation
import Testing
@testable import URLLoading

/// ../shared/conformance/http-auth (Basic and Digest vectors from the RFCs
/// and from curl's tests) and ../shared/conformance/auth-challenges
/// (WWW-Authenticate parsing cases of several libraries).
@Suite struct AuthConformanceTests {
    /// Authorization parameters as a dictionary (names lower-cased), for
    /// comparing parameter by parameter as the suite's README says.
    static func parameters(_ field: String) -> [String: String]? {
        guard let challenge = AuthChallenge.parse([field]).first else { return nil }
        var result = [String: String](uniqueKeysWithValues: challenge.parameters.map { ($0.name, $0.value) })
        result["(scheme)"] = challenge.scheme.lowercased()
        return result
    }

    @Test func httpAuthVectors() throws {
        guard let suite = ConformanceData.suite("http-auth") else { return }
        let rfc = try JSONSerialization.jsonObject(with: Data(contentsOf: suite.appendingPathComponent("rfc-vectors.json"))) as? [String: Any] ?? [:]
        let curl = try JSONSerialization.jsonObject(with: Data(contentsOf: suite.appendingPathComponent("curl-digest-vectors.json"))) as? [String: Any] ?? [:]
        var total = 0, passed = 0
        func check(_ name: String, _ ok: Bool, _ detail: @autoclosure () -> String) {
            total += 1
            if ok { passed += 1 } else { Issue.record("http-auth \(name): \(detail())") }
        }
        for vector in rfc["basic"] as? [[String: Any]] ?? [] {
            let got = BasicAuthentication.authorization(user: vector["username"] as? String ?? "", password: vector["password"] as? String ?? "")
            check(vector["source"] as? String ?? "basic", got == vector["expectedAuthorization"] as? String, "got \(got ?? "nil")")
        }
        for vector in rfc["digest"] as? [[String: Any]] ?? [] {
            let name = vector["source"] as? String ?? "digest"
            let challenges = AuthChallenge.parse(vector["challenges"] as? [String] ?? [])
            let index = vector["useChallenge"] as? Int ?? 0
            guard index < challenges.count, let digest = DigestChallenge(challenges[index]) else {
                check(name, false, "challenge not understood")
                continue
            }
            let nc = UInt32(vector["nc"] as? String ?? "1", radix: 16) ?? 1
            let (response, field) = digest.authorization(
                user: vector["username"] as? String ?? "", password: vector["password"] as? String ?? "",
                method: vector["method"] as? String ?? "GET", uri: vector["uri"] as? String ?? "/", nonceCount: nc,
                cnonce: vector["cnonce"] as? String ?? "")
            var ok = response == vector["expectedResponse"] as? String
            if let expected = vector["expectedAuthorization"] as? String {
                ok = ok && Self.parameters(field) == Self.parameters(expected)
            }
            if let userhash = vector["expectedUserhash"] as? String {
                ok = ok && Self.parameters(field)?["username"] == userhash
            }
            check(name, ok, "got \(field)")
        }
        for vector in curl["vectors"] as? [[String: Any]] ?? [] {
            let name = "curl test \(vector["curlTest"] ?? "?")"
            // Servers that repeat a parameter are read as curl reads them: the last one counts.
            guard let challenge = AuthChallenge.parse([vector["challenge"] as? String ?? ""], duplicateParameters: .lastWins).first,
                let digest = DigestChallenge(challenge)
            else {
                check(name, false, "challenge not understood")
                continue
            }
            let (_, field) = digest.authorization(
                user: vector["username"] as? String ?? "", password: vector["password"] as? String ?? "",
                method: vector["method"] as? String ?? "GET", uri: vector["uri"] as? String ?? "/", nonceCount: 1, cnonce: "")
            let expected = vector["expectedAuthorization"] as? String ?? ""
            check(name, Self.parameters(field) == Self.parameters(expected), "got \(field) expected \(expected)")
        }
        print("conformance http-auth: \(passed)/\(total)")
        #expect(total == 42)
    }

    @Test func challengeParsing() throws {
        guard let suite = ConformanceData.suite("auth-challenges") else { return }
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: suite.appendingPathComponent("challenges.json"))) as? [String: Any]
        let cases = root?["cases"] as? [[String: Any]] ?? []
        typealias Shape = [String]
        /// A challenge list in a comparable form: scheme and names lower case, parameters sorted.
        func shape(_ list: [[String: Any]]) -> Shape {
            list.map { challenge in
                let scheme = (challenge["scheme"] as? String ?? "").lowercased()
                let token = (challenge["token68"] as? String).map { " token68=\($0)" } ?? ""
                let params = (challenge["params"] as? [String: Any] ?? [:]).map { "\($0.key.lowercased())=\($0.value)" }.sorted()
                return scheme + token + " " + params.joined(separator: "; ")
            }
        }
        func shape(_ list: [AuthChallenge]) -> Shape {
            list.map { challenge in
                let token = challenge.token68.map { " token68=\($0)" } ?? ""
                return challenge.scheme.lowercased() + token + " " + challenge.parameters.map { "\($0.name)=\($0.value)" }.sorted().joined(separator: "; ")
            }
        }
        var strictTotal = 0, strictPassed = 0, otherTotal = 0, otherMatching = 0
        for testCase in cases {
            let id = testCase["id"] as? String ?? "?"
            let fields = testCase["headers"] as? [String] ?? []
            let got = shape(AuthChallenge.parse(fields))
            let kind = testCase["class"] as? String ?? ""
            if kind == "rfc" || kind.hasPrefix("invalid") {
                strictTotal += 1
                // Invalid input: nothing (strict), or what the source kept before the error.
                let strict = (testCase["rfc9110_strict_parse"] as? [[String: Any]]).map(shape) ?? []
                let upstream = shape(testCase["expected"] as? [[String: Any]] ?? [])
                if got == strict || (kind == "invalid-partial-drop" && got == upstream) {
                    strictPassed += 1
                } else {
                    Issue.record("auth-challenges \(id) \(fields): got \(got) expected \(strict)")
                }
            } else {
                otherTotal += 1
                if got == shape(testCase["expected"] as? [[String: Any]] ?? []) { otherMatching += 1 }
            }
        }
        print("conformance auth-challenges: \(strictPassed)/\(strictTotal) (RFC 9110 and invalid cases; \(otherMatching)/\(otherTotal) lenient or quirk cases also match their library's choice)")
        #expect(strictTotal == 129)
    }
}
