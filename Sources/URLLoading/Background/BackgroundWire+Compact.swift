import Foundation

/// The body of a version-2 frame: the messages every task sends (a
/// download's `create`, its `finished`, progress, acknowledgements) as
/// fields in a fixed order, so that neither end builds and parses JSON for
/// them — JSON was a fifth of each process's work per task. Any other
/// message travels as its JSON after the tag `json`. Each end sends these
/// frames only to a peer that said it reads them (revision 3).
///
/// A body is a tag byte, then the message's fields: integers as
/// variable-length zigzag numbers (at most 10 bytes), text and bytes as a
/// length and that many bytes (text must be UTF-8), an optional value as a
/// byte 0 (absent) or 1 and the value, a `Double` as its 8 bytes. Nothing
/// may follow the last field. A malformed body is an error, never a trap.
enum CompactWire {
    private enum Tag: UInt8 {
        case json = 0
        case create, resume, suspend, cancel, acknowledge, progress, finished, eventsDone
    }

    static func encode(_ message: BackgroundMessage) throws -> Data {
        var writer = Writer()
        switch message {
        case .create(let spec):
            writer.tag(Tag.create.rawValue)
            try writer.spec(spec)
        case .resume(let task): writer.task(Tag.resume.rawValue, task)
        case .suspend(let task): writer.task(Tag.suspend.rawValue, task)
        case .cancel(let task): writer.task(Tag.cancel.rawValue, task)
        case .acknowledge(let task): writer.task(Tag.acknowledge.rawValue, task)
        case .progress(let task, let sent, let written, let expectedToSend, let expectedToWrite):
            writer.tag(Tag.progress.rawValue)
            for number in [Int64(task), sent, written, expectedToSend, expectedToWrite] { writer.int(number) }
        case .finished(let result):
            writer.tag(Tag.finished.rawValue)
            writer.result(result)
        case .eventsDone:
            writer.tag(Tag.eventsDone.rawValue)
        default:
            writer.tag(Tag.json.rawValue)
            writer.bytes.append(contentsOf: try JSONEncoder().encode(message))
        }
        return Data(writer.bytes)
    }

    static func decode(_ body: Data) throws(BackgroundWireError) -> BackgroundMessage {
        var reader = Reader(bytes: [UInt8](body))
        let message: BackgroundMessage
        switch Tag(rawValue: try reader.byte()) {
        case .json?:
            do {
                return try JSONDecoder().decode(BackgroundMessage.self, from: Data(reader.rest()))
            } catch {
                throw BackgroundWireError("a frame is not a message: \(error)")
            }
        case .create?: message = .create(try reader.spec())
        case .resume?: message = .resume(task: try reader.task())
        case .suspend?: message = .suspend(task: try reader.task())
        case .cancel?: message = .cancel(task: try reader.task())
        case .acknowledge?: message = .acknowledge(task: try reader.task())
        case .progress?:
            message = .progress(
                task: try reader.task(), sent: try reader.int(), written: try reader.int(), expectedToSend: try reader.int(),
                expectedToWrite: try reader.int())
        case .finished?: message = .finished(try reader.result())
        case .eventsDone?: message = .eventsDone
        case nil: throw BackgroundWireError("a compact frame of an unknown kind")
        }
        guard reader.isAtEnd else { throw BackgroundWireError("a compact frame with bytes after its last field") }
        return message
    }

    // MARK: Writing

    private struct Writer {
        var bytes: [UInt8] = []

        init() { bytes.reserveCapacity(256) }

        mutating func tag(_ tag: UInt8) { bytes.append(tag) }

        mutating func task(_ tag: UInt8, _ task: Int) {
            self.tag(tag)
            int(Int64(task))
        }

        mutating func int(_ value: Int64) {
            var zigzag = UInt64(bitPattern: (value << 1) ^ (value >> 63))
            while zigzag >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: zigzag) | 0x80)
                zigzag >>= 7
            }
            bytes.append(UInt8(zigzag))
        }

        mutating func flag(_ value: Bool) { bytes.append(value ? 1 : 0) }

        mutating func double(_ value: Double) {
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func text(_ value: String) { data(value.utf8) }

        mutating func data<Bytes: Collection>(_ value: Bytes) where Bytes.Element == UInt8 {
            int(Int64(value.count))
            bytes.append(contentsOf: value)
        }

        mutating func optional<Value>(_ value: Value?, _ write: (inout Writer, Value) -> Void) {
            flag(value != nil)
            if let value { write(&self, value) }
        }

        mutating func fields(_ fields: [[String]]) {
            int(Int64(fields.count))
            for field in fields {
                int(Int64(field.count))
                for part in field { text(part) }
            }
        }

        mutating func spec(_ spec: TaskSpec) throws {
            int(Int64(spec.task))
            flag(spec.kind == .upload)
            text(spec.request.url)
            text(spec.request.method)
            fields(spec.request.headers)
            double(spec.request.timeout)
            optional(spec.bodyFile) { $0.text($1) }
            optional(spec.bodyPassed) { $0.flag($1) }
            optional(spec.earliestBeginDate) { $0.double($1.timeIntervalSinceReferenceDate) }
            flag(spec.isDiscretionary)
            optional(spec.taskDescription) { $0.text($1) }
            // Rare and many-sided: as the JSON both ends read.
            let proxies = try spec.proxies.map { try JSONEncoder().encode($0) }
            optional(proxies) { $0.data($1) }
            optional(spec.trustRootsFile) { $0.text($1) }
            optional(spec.resumableUploadVersion) { $0.int(Int64($1)) }
            for version in [spec.tlsMinimumVersion, spec.tlsMaximumVersion] {
                optional(version) { writer, pair in
                    writer.int(Int64(pair.count))
                    for number in pair { writer.int(Int64(number)) }
                }
            }
            optional(spec.resumed) { $0.flag($1) }
        }

        mutating func result(_ result: TaskResult) {
            int(Int64(result.task))
            optional(result.file) { $0.text($1) }
            optional(result.response) { writer, response in
                writer.text(response.url)
                writer.int(Int64(response.status))
                writer.text(response.httpVersion)
                writer.fields(response.headers)
                writer.optional(response.reasonPhrase) { $0.text($1) }
            }
            optional(result.body) { $0.data($1) }
            optional(result.errorCode) { $0.text($1) }
            optional(result.errorMessage) { $0.text($1) }
            int(result.sent)
            int(result.written)
            optional(result.expectedToWrite) { $0.int($1) }
        }
    }

    // MARK: Reading

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var isAtEnd: Bool { index == bytes.count }

        mutating func rest() -> ArraySlice<UInt8> {
            defer { index = bytes.count }
            return bytes[index...]
        }

        mutating func byte() throws(BackgroundWireError) -> UInt8 {
            guard index < bytes.count else { throw BackgroundWireError("a compact frame that ends inside a field") }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func int() throws(BackgroundWireError) -> Int64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let next = try byte()
                // The tenth byte holds the 64th bit alone.
                guard shift < 63 || next <= 1 else { throw BackgroundWireError("a compact frame's number over 64 bits") }
                value |= UInt64(next & 0x7F) << shift
                if next < 0x80 { break }
                shift += 7
            }
            return Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
        }

        mutating func int() throws(BackgroundWireError) -> Int {
            let value: Int64 = try int()
            guard let number = Int(exactly: value) else { throw BackgroundWireError("a compact frame's number out of range") }
            return number
        }

        mutating func task() throws(BackgroundWireError) -> Int {
            let task: Int = try int()
            return task
        }

        mutating func flag() throws(BackgroundWireError) -> Bool {
            switch try byte() {
            case 0: return false
            case 1: return true
            default: throw BackgroundWireError("a compact frame's flag that is neither 0 nor 1")
            }
        }

        mutating func double() throws(BackgroundWireError) -> Double {
            var pattern: UInt64 = 0
            for shift in stride(from: 0, to: 64, by: 8) { pattern |= UInt64(try byte()) << UInt64(shift) }
            return Double(bitPattern: pattern)
        }

        /// A length, checked against what is left before anything is made of it.
        mutating func length() throws(BackgroundWireError) -> Int {
            let count: Int64 = try int()
            guard count >= 0, count <= Int64(bytes.count - index) else { throw BackgroundWireError("a compact frame's length of \(count)") }
            return Int(count)
        }

        mutating func data() throws(BackgroundWireError) -> ArraySlice<UInt8> {
            let count = try length()
            defer { index += count }
            return bytes[index..<(index + count)]
        }

        mutating func text() throws(BackgroundWireError) -> String {
            guard let text = String(validating: try data(), as: UTF8.self) else { throw BackgroundWireError("a compact frame's text that is not UTF-8") }
            return text
        }

        mutating func optional<Value>(_ read: (inout Reader) throws(BackgroundWireError) -> Value) throws(BackgroundWireError) -> Value? {
            try flag() ? try read(&self) : nil
        }

        mutating func fields() throws(BackgroundWireError) -> [[String]] {
            // Each field takes a byte at least: the count is bounded by the body.
            let count = try length()
            var fields: [[String]] = []
            fields.reserveCapacity(count)
            for _ in 0..<count {
                let parts = try length()
                var field: [String] = []
                for _ in 0..<parts { field.append(try text()) }
                fields.append(field)
            }
            return fields
        }

        mutating func spec() throws(BackgroundWireError) -> TaskSpec {
            let task = try self.task()
            let kind: TaskSpec.Kind = try flag() ? .upload : .download
            let request = RequestSpec(url: try text(), method: try text(), headers: try fields(), timeout: try double())
            let bodyFile = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let bodyPassed = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.flag() }
            let begin = try optional { (reader: inout Reader) throws(BackgroundWireError) in Date(timeIntervalSinceReferenceDate: try reader.double()) }
            let discretionary = try flag()
            let description = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let proxyJSON = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.data() }
            var proxies: ProxyRules?
            if let proxyJSON {
                do {
                    proxies = try JSONDecoder().decode(ProxyRules.self, from: Data(proxyJSON))
                } catch {
                    throw BackgroundWireError("a task's proxies that do not read: \(error)")
                }
            }
            let roots = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let uploadVersion = try optional { (reader: inout Reader) throws(BackgroundWireError) -> Int in try reader.int() }
            var versions: [[Int]?] = []
            for _ in 0..<2 {
                versions.append(
                    try optional { (reader: inout Reader) throws(BackgroundWireError) -> [Int] in
                        let count = try reader.length()
                        var pair: [Int] = []
                        for _ in 0..<count { pair.append(try reader.int()) }
                        return pair
                    })
            }
            var spec = TaskSpec(
                task: task, kind: kind, request: request, bodyFile: bodyFile, earliestBeginDate: begin, isDiscretionary: discretionary,
                taskDescription: description, proxies: proxies, trustRootsFile: roots, resumableUploadVersion: uploadVersion,
                tlsMinimumVersion: versions[0], tlsMaximumVersion: versions[1])
            spec.bodyPassed = bodyPassed
            spec.resumed = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.flag() }
            return spec
        }

        mutating func result() throws(BackgroundWireError) -> TaskResult {
            let task = try self.task()
            let file = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let response = try optional { (reader: inout Reader) throws(BackgroundWireError) -> ResponseSpec in
                ResponseSpec(
                    url: try reader.text(), status: try reader.int(), httpVersion: try reader.text(), headers: try reader.fields(),
                    reasonPhrase: try reader.optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() })
            }
            let body = try optional { (reader: inout Reader) throws(BackgroundWireError) in Data(try reader.data()) }
            let code = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let message = try optional { (reader: inout Reader) throws(BackgroundWireError) in try reader.text() }
            let sent: Int64 = try int()
            let written: Int64 = try int()
            let expected = try optional { (reader: inout Reader) throws(BackgroundWireError) -> Int64 in try reader.int() }
            return TaskResult(
                task: task, file: file, response: response, body: body, errorCode: code, errorMessage: message, sent: sent, written: written,
                expectedToWrite: expected)
        }
    }
}
