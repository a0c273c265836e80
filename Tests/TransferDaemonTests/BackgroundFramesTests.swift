import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
import URLLoading

/// The frames transferd sends an app: compact ones only to an app that
/// said it reads them, JSON to an older one.
extension BackgroundSessionProcessTests {
    @Test("transferd answers an app of revision 2 in JSON frames and one of revision 3 in compact frames")
    func framesFollowTheRevision() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let first = try await world.run(["frames", "download", origin.url("/small").absoluteString])
        #expect(first.contains("complete 1 nil status 200"), "\(first)")
        for (revision, version) in [(2, BackgroundFraming.version), (3, BackgroundFraming.compactVersion)] {
            let socket = try UnixSocket.connect(path: world.paths.socket)
            defer { socket.close() }
            try socket.send(.attach(Attachment(identifier: "frames-\(revision)", processID: getpid(), launchCommand: nil, revision: revision)))
            #expect(socket.waitReadable(seconds: 10))
            var header = [UInt8](repeating: 0, count: BackgroundFraming.headerLength)
            let count = header.withUnsafeMutableBytes { recv(socket.descriptor, $0.baseAddress, $0.count, Int32(MSG_WAITALL)) }
            #expect(count == header.count && header[0] == BackgroundFraming.magic && header[1] == version, "revision \(revision): \(header)")
        }
        try await origin.shutdown()
    }

    @Test("Forty downloads of one app end together: each event is delivered once, every acknowledgement reaches transferd, and a second app is sent nothing again")
    func acknowledgementsTogether() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/small", response: ScriptedResponse(body: "hello"))
        let world = World()
        let lines = try await world.run(["together", "--count", "40", "download", origin.url("/small").absoluteString])
        for task in 1...40 {
            #expect(lines.filter { $0 == "complete \(task) nil status 200" }.count == 1, "task \(task): \(lines)")
        }
        #expect(await eventually { world.records().count == 40 && world.records().allSatisfy { $0.phaseName == "delivered" } }, "\(world.records().map(\.phaseName))")
        let again = try await world.run(["together", "attach"])
        #expect(again.contains("attached tasks 0 pending 0"), "\(again)")
        #expect(!again.contains { $0.hasPrefix("complete ") }, "\(again)")
        // Every file transferd made for them is gone.
        #expect(await eventually { (try? FileManager.default.contentsOfDirectory(atPath: world.paths.files))?.isEmpty ?? true })
        try await origin.shutdown()
    }
}
