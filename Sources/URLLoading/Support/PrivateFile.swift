public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files that hold secrets or cached bodies, created with their final mode
/// from the first byte: `open(O_CREAT | O_EXCL | O_NOFOLLOW, 0600)`, never
/// created readable and `chmod`ed after (another user could open it in
/// between and keep reading), never through a link someone put in place.
@_spi(Tools) public enum PrivateFile {
    /// Creates the file at `path` (it must not exist) with mode 0600 and
    /// returns it open for writing.
    ///
    /// - Throws: `CocoaError` with the system's reason (a file already there included).
    public static func create(_ path: String) throws -> FileHandle {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw CocoaError(
                .fileWriteUnknown,
                userInfo: [
                    NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "cannot create \(path): \(String(cString: strerror(errno)))",
                ])
        }
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// Writes `data` to a new file at `path` (it must not exist), mode 0600.
    public static func write(_ data: Data, to path: String) throws {
        let handle = try create(path)
        defer { try? handle.close() }
        do {
            try handle.write(contentsOf: data)
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Writes a stored body file's bytes to a new file at `path`, in chunks, mode 0600.
    static func write(_ body: StoredBodyFile, to path: String) throws {
        let handle = try create(path)
        defer { try? handle.close() }
        do {
            var position = 0
            while position < body.count {
                let chunk = try body.read(at: position, length: StoredBodyFile.chunkSize)
                try handle.write(contentsOf: chunk)
                position += chunk.count
            }
        } catch {
            unlink(path)
            throw error
        }
    }

    /// Replaces the file at `path` with `data`, mode 0600: written to a new
    /// file beside it, then renamed over it.
    public static func replace(_ path: String, with data: Data) throws {
        let temporary = path + ".tmp-\(UUID().uuidString)"
        try write(data, to: temporary)
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path, NSLocalizedDescriptionKey: "cannot write \(path): \(reason)"])
        }
    }
}
