import Foundation
import Testing
@testable import URLLoading

/// A task's authentication rounds as named transitions, without sockets.
@Suite struct AuthenticationStateTests {
    typealias State = SessionTask.AuthenticationState
    static let origin = ProtectionSpace(host: "example.test", port: 80, protocol: "http", realm: "r", authenticationMethod: .httpBasic)
    static let proxy = ProtectionSpace(host: "proxy.test", port: 3128, protocol: "http", realm: "p", authenticationMethod: .httpBasic, isProxy: true)

    static func sent(_ space: ProtectionSpace, user: String = "ann") -> SessionTask.SentAuthorization {
        SessionTask.SentAuthorization(
            space: space, credential: Credential(user: user, password: "pw", persistence: .none), fieldName: "Authorization", value: "Basic x")
    }

    @Test("Queued credentials go with the next hop only; remembered ones count as sent when nothing was queued")
    func hops() {
        var state = State()
        state.beginHop()
        #expect(state.sent == nil)
        state.queue(Self.sent(Self.origin))
        #expect(state.pending != nil && state.sent == nil)
        state.beginHop()
        #expect(state.pending == nil && state.sent?.space == Self.origin)
        state.sendRemembered(Self.sent(Self.proxy))
        #expect(state.sent?.space == Self.origin, "queued credentials stay the hop's")
        state.beginHop()
        #expect(state.sent == nil, "the next hop carries nothing unless queued again")
        state.sendRemembered(Self.sent(Self.proxy))
        #expect(state.sent?.space == Self.proxy)
    }

    @Test("Success is a head that is not a challenge for the space sent to, given once; a 401 after origin credentials is no success")
    func success() {
        var state = State()
        state.queue(Self.sent(Self.origin))
        state.beginHop()
        let refused = state.succeeded(status: 401)
        #expect(refused == nil && state.sent != nil)
        let worked = state.succeeded(status: 407)
        #expect(worked?.space == Self.origin, "a 407 does not refuse origin credentials")
        let again = state.succeeded(status: 200)
        #expect(again == nil, "given once")
        state.queue(Self.sent(Self.proxy))
        state.beginHop()
        let proxyRefused = state.succeeded(status: 407)
        let proxyWorked = state.succeeded(status: 401)
        #expect(proxyRefused == nil && proxyWorked?.space == Self.proxy)
    }

    @Test("Failures count per space and user; rejected spaces are kept; stale nonces are answered twice in a row at most")
    func failuresAndStale() {
        var state = State()
        state.failed(Self.sent(Self.origin))
        state.failed(Self.sent(Self.origin, user: "bob"))
        #expect(state.failures[Self.origin] == 2 && state.failedUsers[Self.origin] == ["ann", "bob"] && state.failures[Self.proxy] == nil)
        state.reject(Self.proxy)
        #expect(state.rejected == [Self.proxy])
        let answers = (0..<3).map { _ in state.answerStaleNonce(maximum: 2) }
        #expect(answers == [true, true, false])
        state.noStaleNonce()
        let afterReset = state.answerStaleNonce(maximum: 2)
        #expect(afterReset, "a challenge without a stale nonce ends the run")
    }
}

/// A task's TLS questions as named transitions.
@Suite struct TrustStateTests {
    @Test("A client certificate is asked for once per task, never after an identity was given; a failed probe is skipped from then on")
    func transitions() {
        var state = SessionTask.TrustState()
        #expect(state.mayAskForClientCertificate && !state.skipsProbe)
        state.askedForClientCertificate()
        #expect(!state.mayAskForClientCertificate, "once per task")
        var given = SessionTask.TrustState()
        given.use(Credential(certificatePath: "/c.pem", privateKeyPath: "/k.pem"))
        #expect(!given.mayAskForClientCertificate && given.clientIdentity != nil)
        state.probeFailed()
        #expect(state.skipsProbe)
    }
}
