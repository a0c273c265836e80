import Foundation
import Testing
@testable import URLLoading

/// The resumable upload's machine (draft-ietf-httpbis-resumable-upload,
/// interop versions 3, 5 and 6), without sockets.
@Suite struct ResumableUploadTests {
    static let upload = URL(string: "https://files.example/v1/uploads")!
    static let resume = URL(string: "https://files.example/v1/uploads/7f3a")!

    static func names(_ fields: [(name: String, value: String)]) -> [String] {
        fields.map { "\($0.name): \($0.value)" }
    }

    @Test("The fields each version asks: the interop version always; completion as Upload-Complete (Upload-Incomplete in 3); an append's offset and, in 6, its media type")
    func fieldsByVersion() {
        let v6 = ResumableUpload(version: .v6, length: 10)
        #expect(Self.names(v6.fields(for: .upload)) == ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1"])
        #expect(Self.names(v6.fields(for: .offset(Self.resume))) == ["Upload-Draft-Interop-Version: 6"])
        #expect(
            Self.names(v6.fields(for: .append(Self.resume, offset: 4)))
                == ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?1", "Upload-Offset: 4", "Content-Type: application/partial-upload"])
        let v5 = ResumableUpload(version: .v5, length: 10)
        #expect(Self.names(v5.fields(for: .append(Self.resume, offset: 4))) == ["Upload-Draft-Interop-Version: 5", "Upload-Complete: ?1", "Upload-Offset: 4"])
        let v3 = ResumableUpload(version: .v3, length: 10)
        #expect(Self.names(v3.fields(for: .upload)) == ["Upload-Draft-Interop-Version: 3", "Upload-Incomplete: ?0"])
    }

    @Test("A 104's Location on the request's origin (relative or absolute) is the resumption URL; another origin's, or one that is not a URL, is refused and given back; other answers name none")
    func resumptionURL() throws {
        var machine = ResumableUpload(version: .v6, length: 100)
        #expect(machine.informational(status: 103, location: "/v1/uploads/x", requestURL: Self.upload) == nil)
        #expect(machine.resumptionURL == nil)
        #expect(machine.informational(status: 104, location: "https://evil.example/steal", requestURL: Self.upload) == "https://evil.example/steal")
        #expect(machine.informational(status: 104, location: "http://files.example/v1/uploads/7f3a", requestURL: Self.upload) != nil, "another scheme")
        #expect(machine.informational(status: 104, location: "https://files.example:8443/x", requestURL: Self.upload) != nil, "another port")
        for unreadable in ["https://[files.example", "http://files.example:99999/x", ""] {
            #expect(machine.informational(status: 104, location: unreadable, requestURL: Self.upload) == unreadable, "not a URL: \(unreadable)")
        }
        #expect(machine.resumptionURL == nil)
        #expect(machine.informational(status: 104, location: "uploads/7f3a", requestURL: Self.upload) == nil)
        #expect(machine.resumptionURL == Self.resume)
        #expect(machine.informational(status: 104, location: "https://files.example:443/v1/uploads/other", requestURL: Self.upload) == nil)
        #expect(machine.resumptionURL?.path == "/v1/uploads/other", "the default port written out is the same origin")
    }

    @Test("A failure after a 104: HEAD for the offset, PATCH from it, and that exchange's answer is the task's")
    func resumes() {
        var machine = ResumableUpload(version: .v6, length: 1000)
        #expect(machine.failed() == .fail(reason: nil), "no resumption URL yet: the failure is the task's")
        var fresh = ResumableUpload(version: .v6, length: 1000)
        _ = fresh.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        #expect(fresh.failed() == .send(.offset(Self.resume)))
        let offered = fresh.response(status: 204, fields: [("Upload-Offset", "640"), ("Upload-Complete", "?0"), ("Cache-Control", "no-store")])
        #expect(offered == .send(.append(Self.resume, offset: 640)))
        #expect(fresh.confirmed == 640)
        // The append fails too: ask again, append from the new offset.
        #expect(fresh.failed() == .send(.offset(Self.resume)))
        #expect(fresh.response(status: 204, fields: [("upload-offset", "900")]) == .send(.append(Self.resume, offset: 900)))
        #expect(fresh.response(status: 201, fields: []) == .answer)
        #expect(fresh.resumptions == 2)
        #expect(!fresh.restarted)
    }

    @Test("An upload the server lost (404 or 410, or a 409 whose next HEAD finds nothing) goes whole once more, as a new upload; a second loss fails")
    func restartsOnce() {
        var machine = ResumableUpload(version: .v5, length: 50)
        _ = machine.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        #expect(machine.failed() == .send(.offset(Self.resume)))
        #expect(machine.response(status: 404, fields: []) == .send(.upload))
        #expect(machine.restarted && machine.resumptionURL == nil && machine.confirmed == 0)
        _ = machine.informational(status: 104, location: "/v1/uploads/8b", requestURL: Self.upload)
        #expect(machine.failed() == .send(.offset(URL(string: "https://files.example/v1/uploads/8b")!)))
        #expect(machine.response(status: 410, fields: []) == .fail(reason: nil))

        var conflicting = ResumableUpload(version: .v6, length: 50)
        _ = conflicting.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        _ = conflicting.failed()
        #expect(conflicting.response(status: 204, fields: [("Upload-Offset", "10")]) == .send(.append(Self.resume, offset: 10)))
        #expect(conflicting.response(status: 409, fields: [("Upload-Offset", "20")]) == .send(.offset(Self.resume)))
        #expect(conflicting.response(status: 404, fields: []) == .send(.upload), "the 409 ended the upload on the server")

        var appendLost = ResumableUpload(version: .v6, length: 50)
        _ = appendLost.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        _ = appendLost.failed()
        _ = appendLost.response(status: 204, fields: [("Upload-Offset", "10")])
        #expect(appendLost.response(status: 404, fields: []) == .send(.upload))
        // A server that answers every append with 409 and asks for the same offset again: the upload ends there.
        var refusing = ResumableUpload(version: .v6, length: 50)
        _ = refusing.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        _ = refusing.failed()
        _ = refusing.response(status: 204, fields: [("Upload-Offset", "10")])
        #expect(refusing.response(status: 409, fields: []) == .send(.offset(Self.resume)))
        guard case .fail(let reason?) = refusing.response(status: 204, fields: [("Upload-Offset", "10")]) else {
            Issue.record("a second append at a refused offset was sent")
            return
        }
        #expect(reason.contains("409") && reason.contains("offset 10"))
        // A 409 after which the server has more is progress: the rest goes from there.
        var moving = ResumableUpload(version: .v6, length: 50)
        _ = moving.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        _ = moving.failed()
        _ = moving.response(status: 204, fields: [("Upload-Offset", "10")])
        _ = moving.response(status: 409, fields: [])
        #expect(moving.response(status: 204, fields: [("Upload-Offset", "30")]) == .send(.append(Self.resume, offset: 30)))
        // The first request's own 409 or 404 is the server's answer, not a lost upload.
        var first = ResumableUpload(version: .v6, length: 50)
        #expect(first.response(status: 409, fields: []) == .answer)
    }

    @Test("Offsets from the server are checked: one RFC 8941 integer, within the body, never behind what it confirmed; a complete upload whose answer was lost fails")
    func offsetsChecked() {
        for bad in ["-1", "1e3", "0x10", "", "1234567890123456", " 12 34"] {
            #expect(ResumableUpload.offset(in: [("Upload-Offset", bad)]) == nil, "\(bad)")
        }
        #expect(ResumableUpload.offset(in: [("Upload-Offset", "5"), ("Upload-Offset", "5")]) == nil, "two values")
        #expect(ResumableUpload.offset(in: [("Upload-Offset", " 999999999999999 ")]) == 999_999_999_999_999)

        func asked() -> ResumableUpload {
            var machine = ResumableUpload(version: .v6, length: 100)
            _ = machine.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
            _ = machine.failed()
            return machine
        }
        var tooFar = asked()
        if case .fail(let reason) = tooFar.response(status: 204, fields: [("Upload-Offset", "101")]) {
            #expect(reason?.contains("101") == true)
        } else {
            Issue.record("an offset past the body was taken")
        }
        var unreadable = asked()
        #expect(unreadable.response(status: 204, fields: [("Upload-Offset", "ten")]) != .send(.append(Self.resume, offset: 10)))
        var backwards = asked()
        _ = backwards.response(status: 204, fields: [("Upload-Offset", "60")])
        _ = backwards.failed()
        if case .fail = backwards.response(status: 204, fields: [("Upload-Offset", "30")]) {} else { Issue.record("an offset behind the confirmed one was taken") }
        var done = asked()
        #expect(done.response(status: 204, fields: [("Upload-Offset", "100"), ("Upload-Complete", "?1")]) == .fail(reason: nil))
        var serverError = asked()
        #expect(serverError.response(status: 503, fields: []) == .fail(reason: nil))
        #expect(ResumableUpload.complete(in: [("Upload-Incomplete", "?1")], version: .v3) == false)
        #expect(ResumableUpload.complete(in: [("Upload-Complete", "?1")], version: .v6) == true)
        #expect(ResumableUpload.complete(in: [("Upload-Complete", "yes")], version: .v6) == nil)
    }

    @Test("Resumptions are bounded: after the limit, a failure is the task's")
    func bounded() {
        var machine = ResumableUpload(version: .v6, length: 100, maximumResumptions: 2)
        _ = machine.informational(status: 104, location: Self.resume.absoluteString, requestURL: Self.upload)
        #expect(machine.failed() == .send(.offset(Self.resume)))
        #expect(machine.failed() == .send(.offset(Self.resume)))
        #expect(machine.failed() == .fail(reason: nil))
    }
}
