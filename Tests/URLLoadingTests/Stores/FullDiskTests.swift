import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TestSupport
@_spi(Tools) @testable import URLLoading

/// Full and read-only disks, on a small tmpfs mounted
/// for each test: mounting needs root, as CI runs; elsewhere these tests
/// fail saying so.
@Suite(.serialized) struct FullDiskTests {
    /// A tmpfs mounted for one test.
    struct SmallDisk {
        let url: URL

        /// Mounts a tmpfs of `kilobytes` in a fresh directory, runs `body`
        /// on it, and unmounts and removes it whatever `body` does.
        static func with(kilobytes: Int, _ body: (SmallDisk) async throws -> Void) async throws {
            let parent = FileManager.default.temporaryDirectory.appendingPathComponent("urlloading-fulldisk-\(UUID().uuidString)")
            let url = parent.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: parent) }
            let result = try await ChildProcess.run(
                URL(fileURLWithPath: "/bin/mount"), ["-t", "tmpfs", "-o", "size=\(kilobytes)k,mode=0700", "tmpfs", url.path])
            try #require(result.status == 0, "these tests mount a tmpfs and need root: \(result.standardError)")
            do {
                try await body(SmallDisk(url: url))
            } catch {
                _ = try? await ChildProcess.run(URL(fileURLWithPath: "/bin/umount"), [url.path])
                throw error
            }
            _ = try? await ChildProcess.run(URL(fileURLWithPath: "/bin/umount"), [url.path])
        }

        func remountReadOnly() async throws {
            let result = try await ChildProcess.run(URL(fileURLWithPath: "/bin/mount"), ["-o", "remount,ro", url.path])
            try #require(result.status == 0, "\(result.standardError)")
        }

        /// Fills the disk with a file, leaving `slack` bytes free (0: none).
        func fill(leaving slack: Int) throws -> URL {
            let filler = url.appendingPathComponent("filler")
            let descriptor = open(filler.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            let block = [UInt8](repeating: 0xAA, count: 4096)
            var written = 0
            while true {
                let count = block.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                written += count
            }
            #expect(errno == ENOSPC, "filled until the disk was full")
            if slack > 0 { try #require(ftruncate(descriptor, off_t(max(0, written - slack))) == 0) }
            return filler
        }
    }

    @Test("Full disk: a cache write that fails never fails the fetch, is logged once, and the store stays consistent")
    func fullDiskCacheWrite() async throws {
        try await SmallDisk.with(kilobytes: 2048) { disk in
            let origin = try await TestOrigin.start()
            let body = TestOrigin.pattern(offset: 0, count: 400_000)
            origin.route(
                "/big",
                response: ScriptedResponse(
                    headers: [HeaderField("Cache-Control", "max-age=600"), HeaderField("Set-Cookie", "seen=1; Max-Age=3600")],
                    parts: [.bytes(body)]))
            let cache = disk.url.appendingPathComponent("cache"), cookies = disk.url.appendingPathComponent("cookies")
            // Room for the stores' files and small writes, not for a 400 KB body.
            _ = try disk.fill(leaving: 160 * 1024)
            let result = try await ChildProcess.run(
                ChildProcess.helper, ["full-disk-fetch", cache.path, cookies.path, origin.url("/big").absoluteString, "3"])
            #expect(result.status == 0, "\(result.standardError)")
            #expect(
                result.standardOutput.split(separator: "\n") == Array(repeating: "status 200 bytes 400000", count: 3),
                "every fetch gets its whole response")
            let reports = result.standardError.components(separatedBy: "cache store failed").count - 1
            #expect(reports == 1, "one report for three failed writes: \(result.standardError)")
            #expect(
                result.standardError.contains("No space left on device") || result.standardError.contains("full"),
                "the report says why: \(result.standardError)")
            #expect(try CacheMaintenance.verify(in: cache).isEmpty, "the store is consistent after the failed writes")
            try await origin.shutdown()
        }
    }

    @Test("Full disk: a cookie write that fails keeps the cookie in memory and flush() reports it; with room again it is written")
    func fullDiskCookieWrite() async throws {
        try await SmallDisk.with(kilobytes: 1024) { disk in
            let store = try CookieStore(directory: disk.url)
            let url = try #require(URL(string: "https://example.com/"))
            _ = store.setCookies(["first=1; Max-Age=3600"], for: url)
            let filler = try disk.fill(leaving: 0)
            let big = String(repeating: "v", count: 3000)
            for index in 0..<8 {
                _ = store.setCookies(["c\(index)=\(big); Max-Age=3600"], for: url)
            }
            #expect(store.cookies(for: url, mainDocumentURL: nil).count == 9, "nothing is dropped while the disk is full")
            #expect(throws: StoreError.self, "flush() reports the write that fails") { try store.flush() }
            try FileManager.default.removeItem(at: filler)
            try store.flush()
            let reopened = try CookieStore(directory: disk.url)
            #expect(reopened.cookies(for: url, mainDocumentURL: nil).count == 9, "written once there was room")
        }
    }

    @Test("Read-only store folder: a default session keeps its stores in memory, logs why once, and says so in startupErrors")
    func readOnlyStores() async throws {
        let origin = try await TestOrigin.start()
        origin.route("/set", response: ScriptedResponse(headers: [HeaderField("Set-Cookie", "kept=1; Max-Age=600")], body: "ok"))
        try await SmallDisk.with(kilobytes: 256) { disk in
            try await disk.remountReadOnly()
            let environment = ProcessInfo.processInfo.environment.merging(
                [
                    "XDG_DATA_HOME": disk.url.appendingPathComponent("data").path,
                    "XDG_CACHE_HOME": disk.url.appendingPathComponent("cache").path,
                ]) { $1 }
            let result = try await ChildProcess.run(
                ChildProcess.helper, ["cookie-fetch", "readonly-test", origin.url("/set").absoluteString], environment: environment)
            // The session works, with cookies in memory.
            #expect(result.status == 0, "\(result.standardError)")
            #expect(result.standardOutput.contains("status 200") && result.standardOutput.contains("cookies kept"), "\(result.standardOutput)")
            // startupErrors names the stores and says why.
            let reported = result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("startup error:") }
            #expect(reported.count == 2, "the cookie and credential stores: \(result.standardOutput)")
            for line in reported {
                #expect(line.contains(disk.url.path), "the error names where: \(line)")
                #expect(line.lowercased().contains("read only") || line.lowercased().contains("read-only"), "and why: \(line)")
            }
            // The log says it once per store.
            let logged = result.standardError.split(separator: "\n").filter { $0.contains("could not be opened") }
            #expect(logged.count == 2, "\(result.standardError)")
        }
        try await origin.shutdown()
    }
}
