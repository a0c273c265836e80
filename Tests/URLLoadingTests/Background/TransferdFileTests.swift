import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import TestSupport
@testable import URLLoading

/// Which file a finished background download may hand to the app's
/// delegate: transferd names it in a message, and the app takes only a
/// regular file of transferd's own naming in transferd's own folder.
@Suite struct TransferdFileTests {
    @Test("A finished download's file is taken only under transferd's naming, in its folder, while it is a regular file")
    func transferdNaming() throws {
        let directory = TemporaryDirectory()
        let files = directory.path("files")
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: files + "2", withIntermediateDirectories: true)
        for name in ["files/download-17", "files2/download-17", "files/upload-17", "files/download-"] {
            #expect(FileManager.default.createFile(atPath: directory.path(name), contents: Data([1])))
        }
        try FileManager.default.createDirectory(atPath: files + "/download-18", withIntermediateDirectories: true)
        #expect(symlink(files + "/download-17", files + "/download-19") == 0)

        #expect(BackgroundEngine.transferdFile(files + "/download-17", in: files)?.path == files + "/download-17")
        // Another folder, even one whose name starts with transferd's.
        #expect(BackgroundEngine.transferdFile(files + "2/download-17", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/../files2/download-17", in: files) == nil)
        // Not a download's name: another kind, no number, digits that are not ASCII, a path below.
        #expect(BackgroundEngine.transferdFile(files + "/upload-17", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/download-", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/download-\u{0661}\u{0662}", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/download-18/x", in: files) == nil)
        // Not a regular file there: gone, a folder, a link.
        #expect(BackgroundEngine.transferdFile(files + "/download-20", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/download-18", in: files) == nil)
        #expect(BackgroundEngine.transferdFile(files + "/download-19", in: files) == nil)
    }
}
