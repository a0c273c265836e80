package import Foundation
import CZlib

/// One direction of WebSocket permessage-deflate (RFC 7692 §7.2): raw
/// DEFLATE, each message flushed with `Z_SYNC_FLUSH` and its trailing
/// `00 00 FF FF` removed (added back before inflating), the window kept
/// across messages unless `reset()` is called (no context takeover).
///
/// Used one message at a time under its owner's lock (the WebSocket
/// task's), which is why the class may cross threads.
package final class MessageDeflate: @unchecked Sendable {
    private let stream: UnsafeMutablePointer<z_stream>
    private let inflating: Bool
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    /// Why a message could not be inflated.
    package enum Failure: Error, Equatable {
        /// More than the limit came out (a compression bomb stops here).
        case tooBig
        /// Not DEFLATE data.
        case corrupt
    }

    /// A compressor (`inflating` false) or decompressor with a window of
    /// 2^`windowBits` bytes (8…15; zlib's raw deflate takes 8 as 9).
    package init?(inflating: Bool, windowBits: Int) {
        self.inflating = inflating
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let bits = -Int32(min(15, max(9, windowBits)))
        let status = inflating ? czlib_inflate_init(stream, bits) : czlib_deflate_init(stream, bits)
        guard status == Z_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            return nil
        }
    }

    deinit {
        if inflating { inflateEnd(stream) } else { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Starts the next message with an empty window.
    package func reset() {
        if inflating { inflateReset(stream) } else { deflateReset(stream) }
    }

    /// A whole message compressed (the trailing `00 00 FF FF` removed).
    package func compress(_ data: Data) -> Data {
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        data.withUnsafeBytes { input in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: UInt8.self).baseAddress)
            stream.pointee.avail_in = UInt32(input.count)
            repeat {
                chunk.withUnsafeMutableBufferPointer { buffer in
                    stream.pointee.next_out = buffer.baseAddress
                    stream.pointee.avail_out = UInt32(buffer.count)
                    _ = deflate(stream, Z_SYNC_FLUSH)
                    if let base = buffer.baseAddress { output.append(base, count: buffer.count - Int(stream.pointee.avail_out)) }
                }
            } while stream.pointee.avail_out == 0
        }
        if output.count >= 4, Array(output.suffix(4)) == Self.tail { output.removeLast(4) }
        // Nothing new to flush (an empty message after another): zlib writes
        // nothing, and the tail alone does not inflate. One empty stored
        // block's first byte, as RFC 7692 §7.2.3.6 shows.
        if output.isEmpty { output = Data([0x00]) }
        return output
    }

    /// A whole message inflated, at most `limit` bytes.
    package func decompress(_ data: Data, limit: Int) -> Result<Data, Failure> {
        var input = data
        input.append(contentsOf: Self.tail)
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        var failure: Failure?
        guard input.count <= Int(UInt32.max) else { return .failure(.tooBig) }
        input.withUnsafeBytes { raw in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: raw.bindMemory(to: UInt8.self).baseAddress)
            stream.pointee.avail_in = UInt32(raw.count)
            while failure == nil {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { buffer -> (Int32, Int) in
                    stream.pointee.next_out = buffer.baseAddress
                    stream.pointee.avail_out = UInt32(buffer.count)
                    let status = inflate(stream, Z_SYNC_FLUSH)
                    let produced = buffer.count - Int(stream.pointee.avail_out)
                    if output.count + produced > limit {
                        failure = .tooBig
                    } else if let base = buffer.baseAddress {
                        output.append(base, count: produced)
                    }
                    return (status, produced)
                }
                if status == Z_STREAM_END {
                    // A final block ends the window (the next message starts anew).
                    inflateReset(stream)
                    break
                }
                if status != Z_OK, status != Z_BUF_ERROR { failure = .corrupt }
                // Done when the input is used up and the output was not cut short.
                if stream.pointee.avail_in == 0, stream.pointee.avail_out > 0 { break }
                // No progress with input left: data zlib cannot use.
                if produced == 0, status == Z_BUF_ERROR { failure = failure ?? .corrupt }
            }
        }
        if let failure { return .failure(failure) }
        return .success(output)
    }
}
