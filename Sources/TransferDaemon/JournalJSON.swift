import URLLoading

/// JSON text of what the journal writes for nearly every task, without
/// Foundation's encoder (which builds a tree of values first, and was a
/// tenth of transferd's work per task for a response head alone). What it
/// writes is read back with `JSONDecoder`, as any other column.
enum JournalJSON {
    /// A response head as `ResponseSpec`'s `Codable` form.
    static func response(_ response: ResponseSpec) -> String {
        var text = "{\"url\":"
        text.reserveCapacity(128 + response.headers.count * 48)
        append(response.url, to: &text)
        text += ",\"status\":\(response.status),\"httpVersion\":"
        append(response.httpVersion, to: &text)
        text += ",\"headers\":["
        for (index, field) in response.headers.enumerated() {
            text += index == 0 ? "[" : ",["
            for (position, part) in field.enumerated() {
                if position > 0 { text += "," }
                append(part, to: &text)
            }
            text += "]"
        }
        text += "]"
        if let reason = response.reasonPhrase {
            text += ",\"reasonPhrase\":"
            append(reason, to: &text)
        }
        text += "}"
        return text
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
