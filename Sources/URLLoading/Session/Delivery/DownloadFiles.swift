import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where download tasks keep their files: `$TMPDIR/urlloading-downloads`, a
/// folder that must be the user's own and closed to everybody else (0700,
/// not a symbolic link). Another local user can create that name first in a
/// shared `/tmp`; such a folder is refused, never written into. Files are
/// created with `O_EXCL | O_NOFOLLOW` and mode 0600 from their first byte
/// and written through the descriptor that created them; a partial file
/// that resume data names is reopened with `O_NOFOLLOW` and checked to be
/// a regular file of ours.
enum DownloadFiles {
    /// The folder (it may not exist yet).
    static var directory: URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("urlloading-downloads", isDirectory: true)
    }

    /// The folder, created if needed, once it is known to be private.
    ///
    /// - Throws: `SessionError.Code.cannotWriteFile` naming the folder and
    ///   what is wrong with it.
    static func privateDirectory() throws(SessionError) -> URL {
        let url = directory
        if let problem = PrivateDirectory.ensure(url.path, what: "download folder") {
            throw failure(problem + (problem.hasSuffix("remove it") ? " or set TMPDIR" : ""))
        }
        return url
    }

    /// A new, empty file for a download (or, named `upload-<uuid>.body`,
    /// the copy of an upload's body its resume data names), open for writing.
    static func create(prefix: String = "download", suffix: String = ".tmp") throws(SessionError) -> (handle: FileHandle, url: URL) {
        let folder = try privateDirectory()
        let url = folder.appendingPathComponent("\(prefix)-\(UUID().uuidString)\(suffix)", isDirectory: false)
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw failure("cannot create a download file in \(folder.path): \(String(cString: strerror(errno)))")
        }
        return (FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), url)
    }

    /// A finished download's file under a new name in the folder, for a
    /// caller who keeps it (the task deletes the file it named when its
    /// handler returns). A file already in the folder, which was private when
    /// the file was made in it, is renamed beside itself: one system call.
    static func keep(_ location: URL) throws(SessionError) -> URL {
        let name = "download-\(UUID().uuidString).tmp"
        let folder = location.deletingLastPathComponent()
        guard folder.path == directory.path else {
            let kept = try privateDirectory().appendingPathComponent(name, isDirectory: false)
            do {
                try FileManager.default.moveItem(at: location, to: kept)
            } catch {
                throw failure("cannot keep the download: \(error.localizedDescription)")
            }
            return kept
        }
        let kept = folder.appendingPathComponent(name, isDirectory: false)
        guard rename(location.path, kept.path) == 0 else {
            throw failure("cannot keep the download in \(folder.path): \(String(cString: strerror(errno)))")
        }
        return kept
    }

    /// Reopens the partial file `name` (a bare name, checked by `ResumeData`)
    /// for writing.
    static func reopen(_ name: String) throws(SessionError) -> (handle: FileHandle, url: URL) {
        let url = try privateDirectory().appendingPathComponent(name, isDirectory: false)
        let descriptor = open(url.path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw failure("cannot reopen the partial download: \(String(cString: strerror(errno)))") }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else {
            close(descriptor)
            throw failure("the partial download \(name) is not a regular file of this user")
        }
        return (FileHandle(fileDescriptor: descriptor, closeOnDealloc: true), url)
    }

    /// Writes `data` to a new private file in the folder; its bare name.
    static func spill(_ data: Data) throws(SessionError) -> String {
        let (handle, url) = try create(prefix: "upload", suffix: ".body")
        do {
            try handle.write(contentsOf: data)
            try handle.close()
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw failure("cannot keep the upload's body for its resume data: \(error.localizedDescription)")
        }
        return url.lastPathComponent
    }

    /// Removes the file `name` (a bare name) from the folder, if it is there.
    static func remove(_ name: String) {
        guard !name.contains("/"), !name.hasPrefix(".") else { return }
        unlink(directory.appendingPathComponent(name, isDirectory: false).path)
    }

    private static func failure(_ message: String) -> SessionError {
        SessionError(.cannotWriteFile, failingURL: nil, message: message)
    }
}
