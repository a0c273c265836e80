import Transport
import URLLoading

/// What the daemon reads of a response head it keeps, whichever way the
/// transfer ran (a task of the session or the transport directly).
extension ResponseSpec {
    /// The head as the journal keeps it: fields in the order sent, the
    /// server's reason phrase.
    init(_ head: ResponseHead, url: String) {
        self.init(url: url, status: head.status, httpVersion: "HTTP/1.1", headers: head.headers.map { [$0.name, $0.value] }, reasonPhrase: head.reasonPhrase)
    }

    /// A field's value as Foundation's response gives it: the lines of that
    /// name, in any case, joined with ", "; nil when there is none.
    func field(_ name: String) -> String? {
        var value: String?
        for pair in headers where pair.count == 2 && HeaderFields.namesEqual(pair[0], name) {
            value = value.map { $0 + ", " + pair[1] } ?? pair[1]
        }
        return value
    }

    /// Content-Length, or -1 when absent or not a length (several lines
    /// must agree; a huge number is not taken at its word).
    var contentLength: Int64 {
        field("Content-Length").flatMap(FieldNumber.length) ?? -1
    }
}
