/// An ordered list of HTTP header fields, kept as received: names keep their
/// case, repeated fields stay separate lines. Lookups compare names
/// ASCII-case-insensitively.
///
/// The library's decisions (cache, cookies, authentication) read these;
/// Foundation's `HTTPURLResponse` is built once, when handed to the user.
package struct HeaderFields: Sendable, Equatable, Hashable, Sequence, ExpressibleByArrayLiteral {
    /// One field line.
    package struct Field: Sendable, Equatable, Hashable {
        package var name: String
        package var value: String
        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    package private(set) var fields: [Field]

    package init(_ fields: [Field] = []) {
        self.fields = fields
    }

    package init(arrayLiteral elements: (String, String)...) {
        self.fields = elements.map { Field($0.0, $0.1) }
    }

    /// From a dictionary (as `URLRequest.allHTTPHeaderFields` gives).
    package init(_ dictionary: [String: String]) {
        // Most requests a cache lookup sees have no fields of their own.
        self.fields = dictionary.isEmpty ? [] : dictionary.sorted { $0.key < $1.key }.map { Field($0.key, $0.value) }
    }

    package func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// Exact: `map` and `Array(_:)` make their array at its size at once.
    package var underestimatedCount: Int { fields.count }

    package var count: Int { fields.count }
    package var isEmpty: Bool { fields.isEmpty }

    /// The first line's value for `name`, or nil.
    package subscript(_ name: String) -> String? {
        fields.first { Self.namesEqual($0.name, name) }?.value
    }

    /// The values of every line named `name`, in order.
    package func values(_ name: String) -> [String] {
        fields.compactMap { Self.namesEqual($0.name, name) ? $0.value : nil }
    }

    /// The lines named `name` combined into one value with ", " (RFC 9110
    /// §5.3), or nil when there are none.
    package func combined(_ name: String) -> String? {
        let values = values(name)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether any line is named `name`.
    package func contains(_ name: String) -> Bool {
        fields.contains { Self.namesEqual($0.name, name) }
    }

    /// Appends a line.
    package mutating func append(_ name: String, _ value: String) {
        fields.append(Field(name, value))
    }

    /// Removes every line named `name`.
    package mutating func remove(_ name: String) {
        fields.removeAll { Self.namesEqual($0.name, name) }
    }

    /// Replaces every line named `name` with one line `value`, at the place
    /// of the first one (or at the end).
    package mutating func set(_ name: String, _ value: String) {
        if let index = fields.firstIndex(where: { Self.namesEqual($0.name, name) }) {
            fields[index].value = value
            var seen = false
            fields.removeAll { field in
                guard Self.namesEqual(field.name, name) else { return false }
                defer { seen = true }
                return seen
            }
        } else {
            fields.append(Field(name, value))
        }
    }

    /// Removes lines for which `predicate` is true.
    package mutating func removeAll(where predicate: (Field) -> Bool) {
        fields.removeAll(where: predicate)
    }

    /// A field name that equals and hashes ignoring ASCII case.
    package struct CaseInsensitiveName: Hashable {
        package let name: String
        package init(_ name: String) { self.name = name }
        package static func == (a: Self, b: Self) -> Bool { namesEqual(a.name, b.name) }
        package func hash(into hasher: inout Hasher) {
            // Eight lowercased bytes per combine: a byte each cost more
            // than the rest of building a response's fields.
            var word: UInt64 = 0, count = 0
            for byte in name.utf8 {
                let lower = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
                word = word << 8 | UInt64(lower)
                count += 1
                if count & 7 == 0 { hasher.combine(word); word = 0 }
            }
            hasher.combine(word)
            hasher.combine(count)
        }
    }

    /// ASCII case-insensitive equality of field names, without allocating.
    package static func namesEqual(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { x in
            b.withUTF8 { y in
                guard x.count == y.count else { return false }
                for i in 0..<x.count where x[i] != y[i] {
                    let l = x[i] | 0x20, r = y[i] | 0x20
                    guard l == r, l >= UInt8(ascii: "a"), l <= UInt8(ascii: "z") else { return false }
                }
                return true
            }
        }
    }
}
