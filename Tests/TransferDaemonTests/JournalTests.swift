import Foundation
import Testing
import TestSupport
@testable import TransferDaemon
import URLLoading

/// transferd's journal on real SQLite files: what it keeps,
/// and the secrets it never keeps in plain text.
@Suite struct JournalTests {
    static let token = "Bearer tok-3f9a1c77e2"
    static let cookie = "sid=c0ffee5ecret"
    static let secretURL = "https://user:pa55word@example.com/file?access_token=qq77zz&page=2"
    /// The app's proxies: two with credentials (one without a scheme, as
    /// `http_proxy` may name it), one without.
    static let proxies = ProxyRules(
        http: "http://pu:pr0xyPW1@proxy.test:3128", https: "pu:pr0xyPW2@proxy.test:3129", all: "socks5h://socks.test:1080",
        exceptions: [.name("internal.test"), .network([10, 0, 0, 0], prefixLength: 8)])

    static func record(session: String = "s", task: Int = 1) -> TransferRecord {
        let request = RequestSpec(
            url: secretURL, method: "GET", headers: [["Authorization", token], ["Cookie", cookie], ["Accept", "*/*"]], timeout: 30)
        let spec = TaskSpec(
            task: task, kind: .download, request: request, bodyFile: nil, earliestBeginDate: nil, isDiscretionary: false, taskDescription: nil,
            proxies: proxies)
        return TransferRecord(
            id: 0, session: session, spec: spec, machine: BackgroundTransferMachine(earliestBeginDate: nil, now: Date()), suspended: true, created: Date())
    }

    /// Every byte of the journal's files (the database, its WAL).
    static func bytes(in folder: String) throws -> Data {
        var all = Data()
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasPrefix("Journal.sqlite") {
            all.append(try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name)))
        }
        return all
    }

    @Test("Authorization, Cookie and Set-Cookie values, a URL and proxies with secrets are sealed on disk, whole in memory; the key file is 0600")
    func secretsSealed() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("Journal.sqlite")
        let journal = try Journal(path: path)
        var record = try journal.insert(Self.record())
        record.response = ResponseSpec(url: Self.secretURL, status: 200, httpVersion: "HTTP/1.1", headers: [["Set-Cookie", "sid=n3wsess10n"]])
        try journal.save(record)
        let disk = try Self.bytes(in: directory.url.path)
        for secret in ["tok-3f9a1c77e2", "c0ffee5ecret", "pa55word", "qq77zz", "n3wsess10n", "pr0xyPW1", "pr0xyPW2"] {
            #expect(disk.range(of: Data(secret.utf8)) == nil, "\(secret) is not in the journal's files")
        }
        let read = try #require(try Journal(path: path).records().first)
        #expect(read.spec == record.spec && read.response == record.response, "unsealed as written")
        #expect(read.uploadResume == nil)
        record.uploadResume = Data("{\"resumptionURL\":\"https://example.com/uploads/1\"}".utf8)
        try journal.save(record)
        #expect(try Journal(path: path).records().first?.uploadResume == record.uploadResume, "an upload's resume data kept as written")
        // One whose resumption URL holds a secret query value is sealed on disk.
        record.uploadResume = Data("{\"resumptionURL\":\"https://example.com/uploads/1?upload_token=upt0ken77\"}".utf8)
        try journal.save(record)
        #expect(try Self.bytes(in: directory.url.path).range(of: Data("upt0ken77".utf8)) == nil, "the resumption token is in the journal's files")
        #expect(try Journal(path: path).records().first?.uploadResume == record.uploadResume, "unsealed as written")
        var info = stat()
        #expect(lstat(directory.path("Journal.key"), &info) == 0 && info.st_mode & 0o777 == 0o600)
        // A reader without the key sees no secret either.
        try FileManager.default.removeItem(atPath: directory.path("Journal.key"))
        let blind = try #require(try Journal(path: path, writer: false).records().first)
        let listed = try TransferListing.json([blind])
        #expect(!"\(blind.spec)".contains("tok-3f9a1c77e2") && !"\(blind.spec)".contains("pr0xyPW") && !listed.contains("qq77zz"))
    }

    @Test("New tasks that arrive together are journaled in one transaction: ids in order, each read back whole, the session's next task past them all")
    func insertTogether() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("Journal.sqlite")
        let journal = try Journal(path: path)
        let inserted = try journal.insert([Self.record(task: 4), Self.record(task: 5), Self.record(session: "other", task: 9)])
        #expect(inserted.map(\.spec.task) == [4, 5, 9])
        #expect(inserted.allSatisfy { $0.id > 0 } && inserted.map(\.id) == inserted.map(\.id).sorted() && Set(inserted.map(\.id)).count == 3)
        let read = try Journal(path: path).records().sorted { $0.id < $1.id }
        #expect(read.map(\.id) == inserted.map(\.id) && read.map(\.spec) == inserted.map(\.spec), "not read back as written")
        #expect(try journal.nextTask(session: "s") == 6 && journal.nextTask(session: "other") == 10)
        // A state saved after the batch writes only the state: the batch remembered what it wrote.
        var first = inserted[0]
        first.suspended = false
        try journal.save(first)
        #expect(try Journal(path: path).records().first { $0.id == first.id }?.suspended == false)
        #expect(try journal.insert([]).isEmpty)
    }

    @Test("A replaced key: the fields it cannot unseal are left out, the task is kept")
    func replacedKey() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("Journal.sqlite")
        _ = try Journal(path: path).insert(Self.record())
        try FileManager.default.removeItem(atPath: directory.path("Journal.key"))
        let again = try Journal(path: path)
        let read = try #require(try again.records().first)
        #expect(read.spec.request.headers == [["Accept", "*/*"]])
        // A proxy whose credentials are lost is left out, never sent on without them.
        #expect(read.spec.proxies == ProxyRules(all: Self.proxies.all, exceptions: Self.proxies.exceptions))
        #expect(read.spec.task == 1 && read.session == "s")
    }

    @Test("A key file that is not private, or damaged, is refused with a clear error")
    func hostileKey() throws {
        let directory = TemporaryDirectory()
        let key = directory.path("Journal.key")
        #expect(FileManager.default.createFile(atPath: key, contents: Data(repeating: 7, count: 32), attributes: [.posixPermissions: 0o644]))
        #expect(throws: (any Error).self) { try Journal(path: directory.path("Journal.sqlite")) }
        chmod(key, 0o600)
        try Data(repeating: 7, count: 5).write(to: URL(fileURLWithPath: key))
        #expect(throws: (any Error).self) { try Journal(path: directory.path("Journal.sqlite")) }
    }

    @Test("Listings never show a secret: Authorization and Cookie values, the URL's password and query values, an upload's resumption token")
    func listings() throws {
        var record = Self.record()
        record.expected = 10
        record.uploadResume = Data("{\"resumptionURL\":\"https://example.com/uploads/9?token=r3sum3tok\",\"offset\":0}".utf8)
        let text = TransferListing.table([record]) + TransferListing.details(record) + (try TransferListing.json([record]))
        for secret in ["tok-3f9a1c77e2", "c0ffee5ecret", "pa55word", "qq77zz", "r3sum3tok"] { #expect(!text.contains(secret), "\(secret)") }
        #expect(text.contains("example.com/file"))
        #expect(TransferListing.details(record).contains("resumes at: https://example.com/uploads/9?token="))
    }

    @Test("Saves that change only the state keep the spec and response as last written; a changed response is written without the spec, a changed spec whole")
    func stateOnlySaves() throws {
        let directory = TemporaryDirectory()
        let path = directory.path("Journal.sqlite")
        let journal = try Journal(path: path)
        var record = try journal.insert(Self.record())
        record.machine = BackgroundTransferMachine(phase: .running(attempt: 1), bytes: 10, validator: "\"v1\"", attempts: 1)
        try journal.save(record)
        record.response = ResponseSpec(url: Self.secretURL, status: 200, httpVersion: "HTTP/1.1", headers: [["ETag", "\"v1\""]])
        try journal.save(record)
        record.machine.noteBytes(500)
        record.expected = 900
        try journal.save(record)
        var read = try #require(try Journal(path: path).records().first)
        // (`created` goes through a Double: compared apart, to the microsecond.)
        #expect(abs(read.created.timeIntervalSince(record.created)) < 1e-5)
        read.created = record.created
        #expect(read == record, "the state-only save lost or changed something")
        record.spec.request.headers.append(["X-Late", "1"])
        record.response?.status = 206
        record.machine = BackgroundTransferMachine(phase: .finished(.succeeded(status: 206)), bytes: 900, validator: nil, attempts: 1)
        try journal.save(record)
        read = try #require(try Journal(path: path).records().first)
        #expect(read.spec == record.spec && read.response?.status == 206 && read.phaseName == "finished")
    }

    @Test("A response head's JSON, written by hand, reads back whole with Foundation's decoder: quotes, reverse solidi, control characters, non-ASCII text, no reason phrase")
    func responseJSON() throws {
        let heads = [
            ResponseSpec(
                url: "https://example.com/a\"b\\c?q=\u{1}", status: 200, httpVersion: "HTTP/1.1",
                headers: [["Content-Type", "text/plain; charset=\"utf-8\""], ["X-Ctl", "a\tb\r\n\u{0}\u{1F}\u{7F}"], ["X-Ünïcode", "välue ✓ 🎉"], []],
                reasonPhrase: "OK \"fine\""),
            ResponseSpec(url: "", status: 599, httpVersion: "HTTP/2", headers: [], reasonPhrase: nil),
            ResponseSpec(url: "http://h/", status: 204, httpVersion: "HTTP/1.0", headers: [["A", "1", "extra"]], reasonPhrase: ""),
        ]
        for head in heads {
            let text = JournalJSON.response(head)
            #expect(try JSONDecoder().decode(ResponseSpec.self, from: Data(text.utf8)) == head, "\(text)")
        }
    }

    @Test("A task's JSON, written by hand, reads back whole with Foundation's decoder: every optional present or absent, awkward text, dates and times; a time that is no number is refused")
    func specJSON() throws {
        var full = TaskSpec(
            task: -7, kind: .upload,
            request: RequestSpec(
                url: "https://example.com/a\"b\\c?q=\u{1}", method: "PATCH",
                headers: [["Authorization", Self.token], ["X-Ctl", "a\tb\r\n\u{0}\u{1F}"], ["X-Ünïcode", "välue ✓ 🎉"], [], ["A", "1", "extra"]],
                timeout: 12.345678901234),
            bodyFile: "/tmp/up \"load\".body", earliestBeginDate: Date(timeIntervalSinceReferenceDate: 812_345_678.123456),
            isDiscretionary: true, taskDescription: "nightly \\ sync\n", proxies: Self.proxies, trustRootsFile: "/etc/roots.pem",
            resumableUploadVersion: 0, tlsMinimumVersion: [1, 2], tlsMaximumVersion: [1, 3])
        full.bodyPassed = true
        full.resumed = false
        let bare = TaskSpec(
            task: Int.max, kind: .download, request: RequestSpec(url: "", method: "GET", headers: [], timeout: 0), bodyFile: nil,
            earliestBeginDate: nil, isDiscretionary: false, taskDescription: nil)
        var tiny = bare
        tiny.request.timeout = 1e-300
        tiny.earliestBeginDate = Date(timeIntervalSinceReferenceDate: -1e9)
        tiny.tlsMinimumVersion = []
        for spec in [full, bare, tiny, Self.record().spec] {
            let text = try JournalJSON.spec(spec)
            #expect(try JSONDecoder().decode(TaskSpec.self, from: Data(text.utf8)) == spec, "\(text)")
        }
        var endless = bare
        endless.request.timeout = .infinity
        #expect(throws: EncodingError.self) { try JournalJSON.spec(endless) }
        endless.request.timeout = 1
        endless.earliestBeginDate = Date(timeIntervalSinceReferenceDate: .nan)
        #expect(throws: EncodingError.self) { try JournalJSON.spec(endless) }
    }
}
