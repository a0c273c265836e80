import Foundation
import Locking
import Testing
import TestSupport
@testable import Transport

/// Several transport loops: each origin stays on one loop,
/// so its connections stay within the per-host limit; every loop carries,
/// cancels and shuts down its own transfers.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TransportLoopsTests {
    static func index(_ url: String, loops: Int = 4, proxy: String? = nil) -> Int {
        var request = TransferRequest(url: url)
        request.proxy = proxy
        return CurlMulti.loopIndex(for: request, loops: loops)
    }

    @Test("An origin's requests go to one loop whatever their path, case, user information or default port; a proxy decides for what goes through it")
    func routing() {
        let base = Self.index("http://example.com/a")
        #expect(Self.index("http://example.com/b?q=1#f") == base)
        #expect(Self.index("HTTP://Example.COM/c") == base)
        #expect(Self.index("http://user:secret@example.com/d") == base)
        #expect(Self.index("http://example.com:80/e") == base)
        #expect(Self.index("http://example.com") == base)
        #expect(Self.index("https://example.com:443/") == Self.index("https://example.com/x"))
        #expect(CurlMulti.originBytes(of: "http://u@example.com:8080/x").elementsEqual("http://example.com:8080".utf8))
        // Through a proxy: every origin on the proxy's loop.
        let viaProxy = Self.index("http://127.0.0.1:3128", loops: 16)
        #expect(Self.index("http://a.example/", loops: 16, proxy: "http://127.0.0.1:3128") == viaProxy)
        #expect(Self.index("https://b.example/", loops: 16, proxy: "http://127.0.0.1:3128") == viaProxy)
        // One loop: nothing routed; many origins: every loop used.
        #expect(Self.index("http://example.com/", loops: 1) == 0)
        let used = Set((0..<64).map { Self.index("https://host\($0).example/") })
        #expect(used == [0, 1, 2, 3])
        #expect((0..<64).allSatisfy { (0..<4).contains(Self.index("http://127.0.0.1:\(40_000 + $0)/", loops: 4)) })
    }

    @Test("Loop counts out of range are clamped; one loop runs without a share object")
    func loopCounts() throws {
        for (asked, runs) in [(0, 1), (-3, 1), (1, 1), (3, 3), (1_000, CurlMulti.maximumLoops)] {
            let multi = try CurlMulti(loops: asked)
            #expect(multi.loopCount == runs)
            multi.shutdown()
        }
    }

    /// Origins on loopback until one is routed to each of `loops` loops
    /// (each new origin has a new port, so a new hash).
    static func originsCoveringLoops(_ loops: Int) async throws -> [Int: TestOrigin] {
        var byLoop: [Int: TestOrigin] = [:]
        var extra: [TestOrigin] = []
        for _ in 0..<64 where byLoop.count < loops {
            let origin = try await TestOrigin.start()
            let index = index(origin.url("/").absoluteString, loops: loops)
            if byLoop[index] == nil { byLoop[index] = origin } else { extra.append(origin) }
        }
        for origin in extra { try await origin.shutdown() }
        return byLoop
    }

    @Test("Two loops, two origins: 12 GETs at once to each arrive whole over at most 2 connections per origin (the per-host limit holds across loops)")
    func originsStayOnTheirLoop() async throws {
        let origins = try await Self.originsCoveringLoops(2)
        #expect(origins.count == 2, "no origin was routed to one of the loops")
        let multi = try CurlMulti(maximumConnectionsPerHost: 2, loops: 2)
        for (_, origin) in origins {
            origin.route("/page", response: ScriptedResponse(parts: [.pause(.milliseconds(20)), .bytes(Array("page".utf8))], framing: .contentLength))
        }
        let outcomes = await withTaskGroup(of: (Int, UInt64, Recorder.Outcome).self) { group in
            for (loop, origin) in origins {
                for _ in 0..<12 {
                    group.addTask {
                        let recorder = Recorder()
                        let id = multi.start(TransferRequest(url: origin.url("/page").absoluteString), observer: recorder)
                        return (loop, id.raw, await recorder.outcome())
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.count == 24)
        for (loop, raw, outcome) in outcomes {
            #expect(raw % 2 == UInt64(loop), "a transfer's number names its loop")
            #expect(outcome.head?.status == 200)
            #expect(outcome.body == Data("page".utf8))
        }
        for (_, origin) in origins {
            #expect(origin.requests(to: "/page").count == 12)
            #expect(origin.connectionCount <= 2, "an origin got \(origin.connectionCount) connections")
        }
        multi.shutdown()
        for (_, origin) in origins { try await origin.shutdown() }
    }

    @Test("A transfer on either of two loops is cancelled mid-body; after shutdown both loops refuse new transfers")
    func cancelAndShutdownOnEveryLoop() async throws {
        let origins = try await Self.originsCoveringLoops(2)
        #expect(origins.count == 2, "no origin was routed to one of the loops")
        let multi = try CurlMulti(loops: 2)
        for (_, origin) in origins {
            origin.route("/slow", response: ScriptedResponse(parts: [.bytes([1]), .waitFor(OriginGate()), .bytes([2])], framing: .contentLength))
        }
        for (_, origin) in origins {
            let recorder = Recorder()
            let id = multi.start(TransferRequest(url: origin.url("/slow").absoluteString), observer: recorder)
            #expect(await eventually { recorder.bytesSoFar > 0 }, "no byte arrived")
            multi.cancel(id)
            guard case .failure(let error) = (await recorder.outcome()).result else {
                Issue.record("expected a failure")
                continue
            }
            #expect(error.kind == .cancelled)
        }
        multi.shutdown()
        for (_, origin) in origins {
            let outcome = await TransportTests.transfer(multi, TransferRequest(url: origin.url("/slow").absoluteString))
            guard case .failure(let error) = outcome.result else {
                Issue.record("a transfer started after shutdown did not fail")
                continue
            }
            #expect(error.kind == .shutDown)
        }
        for (_, origin) in origins { try await origin.shutdown() }
    }
}

/// Whether a transport's loops spin after a turn that did work.
@Suite(.timeLimit(.minutes(Sanitizer.minutes(1)))) struct TransportSpinsTests {
    @Test("Sequential GETs: a transport that spins would spin after its turns; one told not to never does, and its GETs arrive whole")
    func spinsOnlyWhenAsked() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/page", response: ScriptedResponse(body: "page"))
        for spins in [true, false] {
            let multi = try CurlMulti(spins: spins)
            for _ in 0..<5 {
                let outcome = await TransportTests.transfer(multi, TransferRequest(url: origin.url("/page").absoluteString))
                #expect(outcome.head?.status == 200 && outcome.body == Data("page".utf8))
            }
            multi.shutdown()
            if spins {
                #expect(multi.spinsWanted > 0, "a spinning transport never wanted to spin")
            } else {
                #expect(multi.spinsWanted == 0)
            }
        }
        try await origin.shutdown()
    }
}

/// A transport thread holds readers' wake-ups to the end of its turn.
@Suite struct TurnWakeupsTests {
    @Test("A wake-up runs at once off a loop thread; on one it waits for the turn's end, in order")
    func heldUntilTheTurnEnds() {
        let ran = Lock<[Int]>([])
        TurnWakeups.run { ran.withLock { $0.append(0) } }
        #expect(ran.withLock { $0 } == [0])
        let held = TurnWakeups.Held()
        TurnWakeups.hold(in: held)
        TurnWakeups.run { ran.withLock { $0.append(1) } }
        TurnWakeups.run {
            ran.withLock { $0.append(2) }
            // Woken during the flush: runs in the same flush.
            TurnWakeups.run { ran.withLock { $0.append(3) } }
        }
        #expect(ran.withLock { $0 } == [0])
        held.flush()
        #expect(ran.withLock { $0 } == [0, 1, 2, 3])
        TurnWakeups.hold(in: nil)
        TurnWakeups.run { ran.withLock { $0.append(4) } }
        #expect(ran.withLock { $0 } == [0, 1, 2, 3, 4])
    }
}
