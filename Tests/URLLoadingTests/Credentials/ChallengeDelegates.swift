import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking
import URLLoading

/// A challenge answer as Apple's delegate methods give it.
typealias ChallengeAnswer = (Session.AuthChallengeDisposition, Credential?)

/// `(.useCredential, credential)`.
func use(_ credential: Credential?) -> ChallengeAnswer { (.useCredential, credential) }

/// A delegate that answers challenges with closures and records them. A
/// level without a closure is a method the delegate does not have: Swift
/// cannot take a method away at run time, so each combination is a class
/// of its own, as a real delegate would be.
struct ChallengeDelegate: Sendable {
    typealias Answering = @Sendable (AuthenticationChallenge) -> ChallengeAnswer

    /// The delegate to give a session.
    let delegate: any SessionDelegate
    private let recorder: ChallengeRecorder

    init(evaluatesServerTrust: Bool = false, session: Answering? = nil, task: Answering? = nil) {
        let recorder = ChallengeRecorder(evaluatesServerTrust: evaluatesServerTrust)
        self.recorder = recorder
        switch (session, task) {
        case let (session?, task?): delegate = BothLevels(recorder, session: session, task: task)
        case let (session?, nil): delegate = SessionLevelOnly(recorder, session: session)
        case let (nil, task?): delegate = TaskLevelOnly(recorder, task: task)
        case (nil, nil): delegate = NoChallengeMethods(recorder)
        }
    }

    /// "session <method>" and "task <method> <realm> failures=<n>", in order.
    var calls: [String] { recorder.log.withLock { $0 } }
    /// Every challenge either method received.
    var seen: [AuthenticationChallenge] { recorder.seen.withLock { $0 } }
}

final class ChallengeRecorder: Sendable {
    let log = Lock<[String]>([])
    let seen = Lock<[AuthenticationChallenge]>([])
    let evaluatesServerTrust: Bool
    init(evaluatesServerTrust: Bool) { self.evaluatesServerTrust = evaluatesServerTrust }

    func sessionLevel(_ challenge: AuthenticationChallenge) {
        seen.withLock { $0.append(challenge) }
        log.withLock { $0.append("session \(challenge.protectionSpace.authenticationMethod)") }
    }

    func taskLevel(_ challenge: AuthenticationChallenge) {
        seen.withLock { $0.append(challenge) }
        let space = challenge.protectionSpace
        log.withLock { $0.append("task \(space.authenticationMethod) \(space.realm ?? "-") failures=\(challenge.previousFailureCount)") }
    }
}

private final class BothLevels: SessionDelegate {
    let recorder: ChallengeRecorder
    let session: ChallengeDelegate.Answering
    let task: ChallengeDelegate.Answering
    init(_ recorder: ChallengeRecorder, session: @escaping ChallengeDelegate.Answering, task: @escaping ChallengeDelegate.Answering) {
        self.recorder = recorder
        self.session = session
        self.task = task
    }
    var evaluatesServerTrust: Bool { recorder.evaluatesServerTrust }
    func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
        recorder.sessionLevel(challenge)
        return self.session(challenge)
    }
    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
        recorder.taskLevel(challenge)
        return self.task(challenge)
    }
}

private final class SessionLevelOnly: SessionDelegate {
    let recorder: ChallengeRecorder
    let session: ChallengeDelegate.Answering
    init(_ recorder: ChallengeRecorder, session: @escaping ChallengeDelegate.Answering) {
        self.recorder = recorder
        self.session = session
    }
    var evaluatesServerTrust: Bool { recorder.evaluatesServerTrust }
    func urlSession(_ session: Session, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
        recorder.sessionLevel(challenge)
        return self.session(challenge)
    }
}

private final class TaskLevelOnly: SessionDelegate {
    let recorder: ChallengeRecorder
    let task: ChallengeDelegate.Answering
    init(_ recorder: ChallengeRecorder, task: @escaping ChallengeDelegate.Answering) {
        self.recorder = recorder
        self.task = task
    }
    var evaluatesServerTrust: Bool { recorder.evaluatesServerTrust }
    func urlSession(_ session: Session, task: SessionTask, didReceive challenge: AuthenticationChallenge) async -> ChallengeAnswer {
        recorder.taskLevel(challenge)
        return self.task(challenge)
    }
}

private final class NoChallengeMethods: SessionDelegate {
    let recorder: ChallengeRecorder
    init(_ recorder: ChallengeRecorder) { self.recorder = recorder }
    var evaluatesServerTrust: Bool { recorder.evaluatesServerTrust }
}
