import Foundation
import URLLoading

/// JSON text of what the journal writes for nearly every task, without
/// Foundation's encoder (which builds a tree of values first, and was a
/// tenth of transferd's work per task for a response head alone, and 3% for
/// a task's request). What it writes is read back with `JSONDecoder`, as any
/// other column, in the shape the types' `Codable` conformances give.
enum JournalJSON {
    /// A task as `TaskSpec`'s `Codable` form (absent optionals left out,
    /// dates as seconds since 2001, as `JSONEncoder` writes them).
    ///
    /// - Throws: `EncodingError` for a time that is not a finite number
    ///   (as `JSONEncoder` does), or from encoding the proxy rules.
    static func spec(_ spec: TaskSpec) throws -> String {
        var text = "{\"task\":\(spec.task),\"kind\":"
        text.reserveCapacity(256 + spec.request.url.utf8.count + spec.request.headers.count * 48)
        append(spec.kind.rawValue, to: &text)
        text += ",\"request\":{\"url\":"
        append(spec.request.url, to: &text)
        text += ",\"method\":"
        append(spec.request.method, to: &text)
        text += ",\"headers\":"
        append(spec.request.headers, to: &text)
        text += ",\"timeout\":"
        try append(spec.request.timeout, to: &text)
        text += "}"
        if let file = spec.bodyFile {
            text += ",\"bodyFile\":"
            append(file, to: &text)
        }
        if let passed = spec.bodyPassed { text += ",\"bodyPassed\":\(passed)" }
        if let date = spec.earliestBeginDate {
            text += ",\"earliestBeginDate\":"
            try append(date.timeIntervalSinceReferenceDate, to: &text)
        }
        text += ",\"isDiscretionary\":\(spec.isDiscretionary)"
        if let description = spec.taskDescription {
            text += ",\"taskDescription\":"
            append(description, to: &text)
        }
        if let proxies = spec.proxies {
            // Rare, and of many shapes: Foundation's encoder writes these.
            text += ",\"proxies\":" + String(decoding: try JSONEncoder().encode(proxies), as: UTF8.self)
        }
        if let file = spec.trustRootsFile {
            text += ",\"trustRootsFile\":"
            append(file, to: &text)
        }
        if let version = spec.resumableUploadVersion { text += ",\"resumableUploadVersion\":\(version)" }
        if let version = spec.tlsMinimumVersion { text += ",\"tlsMinimumVersion\":[\(version.map(String.init).joined(separator: ","))]" }
        if let version = spec.tlsMaximumVersion { text += ",\"tlsMaximumVersion\":[\(version.map(String.init).joined(separator: ","))]" }
        if let resumed = spec.resumed { text += ",\"resumed\":\(resumed)" }
        text += "}"
        return text
    }

    /// A response head as `ResponseSpec`'s `Codable` form.
    static func response(_ response: ResponseSpec) -> String {
        var text = "{\"url\":"
        text.reserveCapacity(128 + response.headers.count * 48)
        append(response.url, to: &text)
        text += ",\"status\":\(response.status),\"httpVersion\":"
        append(response.httpVersion, to: &text)
        text += ",\"headers\":"
        append(response.headers, to: &text)
        if let reason = response.reasonPhrase {
            text += ",\"reasonPhrase\":"
            append(reason, to: &text)
        }
        text += "}"
        return text
    }

    /// Header fields as arrays of strings.
    static func append(_ fields: [[String]], to text: inout String) {
        text += "["
        for (index, field) in fields.enumerated() {
            text += index == 0 ? "[" : ",["
            for (position, part) in field.enumerated() {
                if position > 0 { text += "," }
                append(part, to: &text)
            }
            text += "]"
        }
        text += "]"
    }

    /// A number as JSON writes it (Swift's shortest form that reads back
    /// exactly); JSON has no infinity or NaN.
    static func append(_ value: Double, to text: inout String) throws {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, EncodingError.Context(codingPath: [], debugDescription: "\(value) is not a JSON number"))
        }
        text += value.description
    }

    /// `value` as a JSON string (RFC 8259 §7): quotation mark, reverse
    /// solidus and control characters escaped, everything else as it is.
    static func append(_ value: String, to text: inout String) {
        text += "\""
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) {
            text += value
        } else {
            for scalar in value.unicodeScalars {
                switch scalar {
                case "\"": text += "\\\""
                case "\\": text += "\\\\"
                case "\n": text += "\\n"
                case "\r": text += "\\r"
                case "\t": text += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: text.unicodeScalars.append(scalar)
                }
            }
        }
        text += "\""
    }
}
