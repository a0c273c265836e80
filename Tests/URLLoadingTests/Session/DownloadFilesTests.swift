import Foundation
import Testing
import TestSupport
@testable import URLLoading

/// The file `download(for:)` hands its caller: kept in the private download
/// folder under a new name, whichever folder the task's file was in.
struct DownloadFilesTests {
    @Test("A finished download is kept under a new name in the download folder: renamed beside itself, moved in from elsewhere, an error when gone")
    func keep() throws {
        let (handle, made) = try DownloadFiles.create()
        try handle.write(contentsOf: Data("in the folder".utf8))
        try handle.close()
        let kept = try DownloadFiles.keep(made)
        defer { try? FileManager.default.removeItem(at: kept) }
        #expect(kept.deletingLastPathComponent().path == DownloadFiles.directory.path && kept != made)
        #expect(!FileManager.default.fileExists(atPath: made.path), "the task's name is free for it to delete")
        #expect(try String(contentsOf: kept, encoding: .utf8) == "in the folder")

        let elsewhere = TemporaryDirectory()
        let outside = elsewhere.url.appendingPathComponent("download.tmp")
        try Data("from elsewhere".utf8).write(to: outside)
        let moved = try DownloadFiles.keep(outside)
        defer { try? FileManager.default.removeItem(at: moved) }
        #expect(moved.deletingLastPathComponent().path == DownloadFiles.directory.path)
        #expect(try String(contentsOf: moved, encoding: .utf8) == "from elsewhere")
        #expect(!FileManager.default.fileExists(atPath: outside.path))

        for gone in [made, outside] {
            #expect {
                _ = try DownloadFiles.keep(gone)
            } throws: { error in
                (error as? SessionError)?.code == .cannotWriteFile && "\(error)".contains("cannot keep the download")
            }
        }
    }
}
