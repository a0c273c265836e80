import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A folder that must be the user's own and closed to everybody else (0700,
/// not a symbolic link): download files, transferd's socket and journal.
/// Another local user can create such a name first in a shared `/tmp`; a
/// folder like that is refused, never written into.
package enum PrivateDirectory {
    /// Creates `path` (and, when `parents`, its missing parents, 0700) if
    /// needed, then checks that it is a private folder of this user.
    ///
    /// - Returns: nil when all is well, else what is wrong, naming the folder.
    package static func ensure(_ path: String, what: String, parents: Bool = false) -> String? {
        if parents {
            let parent = (path as NSString).deletingLastPathComponent
            if !parent.isEmpty, parent != path, !FileManager.default.fileExists(atPath: parent) {
                do {
                    try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    return "cannot create \(parent): \(error.localizedDescription)"
                }
            }
        }
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            return "cannot create the \(what) \(path): \(String(cString: strerror(errno)))"
        }
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return "cannot inspect the \(what) \(path): \(String(cString: strerror(errno)))"
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            return "the \(what) \(path) is not a folder (a link or a file is in its place): remove it"
        }
        guard info.st_uid == getuid() else {
            return "the \(what) \(path) belongs to another user (uid \(info.st_uid)): remove it"
        }
        guard info.st_mode & 0o077 == 0 else {
            return "the \(what) \(path) can be read or written by others (mode \(String(info.st_mode & 0o777, radix: 8))): remove it or make it 0700"
        }
        return nil
    }
}
