package import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A stored body too large to keep inline: the disk tier's body
/// file, opened at lookup and read in chunks as the task delivers it, so a
/// 256 MiB entry never sits in memory whole. The descriptor stays readable
/// when another process evicts (unlinks) the file meanwhile.
package struct StoredBodyFile: Sendable, Equatable {
    /// Owns the descriptor; closed when the last slice is gone.
    final class Descriptor: Sendable {
        let fd: Int32
        init(_ fd: Int32) { self.fd = fd }
        deinit { close(fd) }
    }

    let descriptor: Descriptor
    /// Where the body starts in the file (a range of it, for a 206).
    package let offset: Int
    /// The body's length.
    package let count: Int

    /// The chunk size of deliveries from a body file.
    package static let chunkSize = 256 << 10

    /// Opens `path` (a regular file, no link followed) holding exactly `count` bytes.
    ///
    /// - Returns: nil when it is gone, of another size, or not a regular file.
    static func open(_ path: String, count: Int) -> StoredBodyFile? {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, Int64(info.st_size) == Int64(count) else {
            close(fd)
            return nil
        }
        return StoredBodyFile(descriptor: Descriptor(fd), offset: 0, count: count)
    }

    private init(descriptor: Descriptor, offset: Int, count: Int) {
        self.descriptor = descriptor
        self.offset = offset
        self.count = count
    }

    /// The bytes `range` of this body, as a body of its own.
    package func slice(_ range: Range<Int>) -> StoredBodyFile {
        let lower = min(max(0, range.lowerBound), count)
        let upper = min(max(lower, range.upperBound), count)
        return StoredBodyFile(descriptor: descriptor, offset: offset + lower, count: upper - lower)
    }

    /// Reads up to `length` bytes at `position` of the body.
    ///
    /// - Throws: `CocoaError` when the file cannot be read, or ends early.
    package func read(at position: Int, length: Int) throws -> Data {
        let wanted = max(0, min(length, count - position))
        var data = Data(count: wanted)
        var done = 0
        try data.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in
            guard let base = raw.baseAddress else { return }
            while done < wanted {
                let got = pread(descriptor.fd, base + done, wanted - done, off_t(offset + position + done))
                if got < 0, errno == EINTR { continue }
                guard got > 0 else {
                    throw CocoaError(
                        .fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "a cached body file ended early or cannot be read"])
                }
                done += got
            }
        }
        return data
    }

    /// The whole body in memory (completion handlers, `cachedResponse(for:)`).
    package func readAll() throws -> Data {
        try read(at: 0, length: count)
    }

    package static func == (a: StoredBodyFile, b: StoredBodyFile) -> Bool {
        a.descriptor === b.descriptor && a.offset == b.offset && a.count == b.count
    }
}

extension StoredResponse {
    /// The body's length, inline or in its file.
    package var bodyCount: Int { bodyFile?.count ?? body.count }

    /// The whole body in memory: the inline bytes or the file's.
    package func wholeBody() throws -> Data {
        try bodyFile?.readAll() ?? body
    }

    /// The same response with its body in memory (for the memory tier); nil
    /// when the file cannot be read.
    package func materialized() -> StoredResponse? {
        guard let file = bodyFile else { return self }
        guard let data = try? file.readAll() else { return nil }
        var copy = self
        copy.body = data
        copy.bodyFile = nil
        return copy
    }
}
