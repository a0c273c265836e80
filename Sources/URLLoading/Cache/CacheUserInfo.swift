package import Foundation

/// A cached response's userInfo as the tiers keep it: property-list values
/// (string keys; strings, data, dates, integers, floating-point numbers,
/// Booleans, and arrays and string-keyed dictionaries of them) in the
/// library's own encoding, so that an entry stays a Sendable value, a hit
/// decodes it only when a `CachedResponse` is handed out, and a crafted
/// cache file is read by code that checks every length and count.
/// (Foundation's property-list parser is not used: a crafted binary list
/// crashes it.)
package struct CacheUserInfo: Sendable, Equatable {
    /// The encoded values; empty for no userInfo.
    package let encoded: Data

    /// No userInfo.
    package static let none = CacheUserInfo(encoded: Data())

    /// What the encoding starts with, telling it from the string pairs of
    /// entries written before userInfo took other values.
    private static let magic: [UInt8] = Array("URLLoading userInfo 1\n".utf8)
    /// How deep arrays and dictionaries may nest.
    private static let depthLimit = 32

    private init(encoded: Data) {
        self.encoded = encoded
    }

    /// `dictionary` in the tiers' form; nil when it is not a property list
    /// (a key that is not a string, a value of another type). Empty or nil
    /// is `.none`.
    package init?(_ dictionary: [AnyHashable: Any]?) {
        guard let dictionary, !dictionary.isEmpty else {
            self = .none
            return
        }
        var bytes = Self.magic
        guard Self.encodeMap(dictionary.map { ($0.key, $0.value) }, into: &bytes, depth: 0) else { return nil }
        self.init(encoded: Data(bytes))
    }

    /// String keys and values, as the tools give them.
    package init(strings: [String: String]) {
        self = CacheUserInfo(strings) ?? .none
    }

    /// What a store's column held: the encoding, or the string pairs of an
    /// entry written before userInfo took other values. Anything else (a
    /// damaged or crafted value) is no userInfo.
    package init(stored: Data) {
        if stored.starts(with: Self.magic) {
            self = Self.decode(stored) == nil ? .none : CacheUserInfo(encoded: stored)
        } else if let strings = FieldCoding.decodeDictionary(stored) {
            self.init(strings: strings)
        } else {
            self = .none
        }
    }

    /// Whether there is no userInfo.
    package var isEmpty: Bool { encoded.isEmpty }

    /// The dictionary, decoded; nil for none.
    package var dictionary: [AnyHashable: Any]? {
        guard !encoded.isEmpty, let map = Self.decode(encoded) else { return nil }
        return Dictionary(map.map { (AnyHashable($0.key), $0.value) }) { first, _ in first }
    }

    /// The keys, sorted (what `cachetool show` lists).
    package var keys: [String] {
        guard !encoded.isEmpty, let map = Self.decode(encoded) else { return [] }
        return map.keys.sorted()
    }

    /// The same values, whatever order the keys were written in.
    package static func == (a: CacheUserInfo, b: CacheUserInfo) -> Bool {
        if a.encoded == b.encoded { return true }
        guard let first = a.dictionary, let second = b.dictionary else { return false }
        return NSDictionary(dictionary: first).isEqual(to: second)
    }

    // MARK: Encoding

    private enum Tag: UInt8 {
        case string = 0x73  // s: length, UTF-8
        case data = 0x64  // d: length, bytes
        case date = 0x74  // t: seconds since 1970, IEEE 754 bits
        case integer = 0x69  // i: two's complement, 8 bytes
        case double = 0x66  // f: IEEE 754 bits
        case boolean = 0x62  // b: one byte, 0 or 1
        case array = 0x61  // a: count, values
        case map = 0x6D  // m: count, (string, value) pairs
    }

    private static func append(_ number: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: number >> UInt64(shift))) }
    }

    private static func appendString(_ string: String, to bytes: inout [UInt8]) {
        append(UInt64(string.utf8.count), to: &bytes)
        bytes.append(contentsOf: string.utf8)
    }

    private static func encodeMap(_ pairs: [(AnyHashable, Any)], into bytes: inout [UInt8], depth: Int) -> Bool {
        guard depth < depthLimit else { return false }
        bytes.append(Tag.map.rawValue)
        append(UInt64(pairs.count), to: &bytes)
        for (key, value) in pairs {
            guard let name = key.base as? String else { return false }
            appendString(name, to: &bytes)
            guard encode(value, into: &bytes, depth: depth + 1) else { return false }
        }
        return true
    }

    private static func encode(_ value: Any, into bytes: inout [UInt8], depth: Int) -> Bool {
        guard depth < depthLimit else { return false }
        // An NSNumber casts to Int, Double and Bool alike on Linux: ask its
        // class first, then the C type it holds.
        if type(of: value) is NSNumber.Type, let number = value as? NSNumber {
            return encode(number: number, into: &bytes)
        }
        switch value {
        case let string as String:
            bytes.append(Tag.string.rawValue)
            appendString(string, to: &bytes)
        case let data as Data:
            bytes.append(Tag.data.rawValue)
            append(UInt64(data.count), to: &bytes)
            bytes.append(contentsOf: data)
        case let date as Date:
            bytes.append(Tag.date.rawValue)
            append(date.timeIntervalSince1970.bitPattern, to: &bytes)
        case let boolean as Bool:
            bytes.append(Tag.boolean.rawValue)
            bytes.append(boolean ? 1 : 0)
        case let integer as any BinaryInteger:
            guard let exact = Int64(exactly: integer) else { return false }
            bytes.append(Tag.integer.rawValue)
            append(UInt64(bitPattern: exact), to: &bytes)
        case let real as any BinaryFloatingPoint:
            bytes.append(Tag.double.rawValue)
            append(Double(real).bitPattern, to: &bytes)
        case let array as [Any]:
            bytes.append(Tag.array.rawValue)
            append(UInt64(array.count), to: &bytes)
            for element in array where !encode(element, into: &bytes, depth: depth + 1) { return false }
        case let map as [String: Any]:
            return encodeMap(map.map { (AnyHashable($0.key), $0.value) }, into: &bytes, depth: depth)
        case let map as [AnyHashable: Any]:
            return encodeMap(map.map { ($0.key, $0.value) }, into: &bytes, depth: depth)
        default:
            return false
        }
        return true
    }

    /// An `NSNumber` by the C type it holds: a Boolean, a floating-point
    /// number or an integer.
    private static func encode(number: NSNumber, into bytes: inout [UInt8]) -> Bool {
        switch String(cString: number.objCType) {
        case "c", "B":
            bytes.append(Tag.boolean.rawValue)
            bytes.append(number.boolValue ? 1 : 0)
        case "f", "d":
            bytes.append(Tag.double.rawValue)
            append(number.doubleValue.bitPattern, to: &bytes)
        case "Q", "L", "I":
            // Unsigned: kept only where it fits a signed 64-bit integer.
            guard let exact = Int64(exactly: number.uint64Value) else { return false }
            bytes.append(Tag.integer.rawValue)
            append(UInt64(bitPattern: exact), to: &bytes)
        default:
            bytes.append(Tag.integer.rawValue)
            append(UInt64(bitPattern: number.int64Value), to: &bytes)
        }
        return true
    }

    // MARK: Decoding

    /// A reader that checks every length and count against what is left.
    private struct Reader {
        let bytes: [UInt8]
        var index: Int

        mutating func byte() -> UInt8? {
            guard index < bytes.count else { return nil }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func number() -> UInt64? {
            guard bytes.count - index >= 8 else { return nil }
            var value: UInt64 = 0
            for offset in 0..<8 { value |= UInt64(bytes[index + offset]) << UInt64(offset * 8) }
            index += 8
            return value
        }

        /// A count or length no larger than the bytes left (each item takes
        /// at least one byte), so a crafted count cannot make work or memory.
        mutating func count() -> Int? {
            guard let value = number(), value <= UInt64(bytes.count - index) else { return nil }
            return Int(value)
        }

        mutating func slice() -> ArraySlice<UInt8>? {
            guard let length = count() else { return nil }
            defer { index += length }
            return bytes[index..<(index + length)]
        }

        mutating func string() -> String? {
            slice().flatMap { String(validating: $0, as: UTF8.self) }
        }

        mutating func value(depth: Int) -> Any? {
            guard depth < CacheUserInfo.depthLimit, let raw = byte(), let tag = Tag(rawValue: raw) else { return nil }
            switch tag {
            case .string: return string()
            case .data: return slice().map { Data($0) }
            case .date: return number().map { Date(timeIntervalSince1970: Double(bitPattern: $0)) }
            case .integer: return number().map { Int(Int64(bitPattern: $0)) }
            case .double: return number().map { Double(bitPattern: $0) }
            case .boolean:
                guard let flag = byte(), flag <= 1 else { return nil }
                return flag == 1
            case .array:
                guard let count = count() else { return nil }
                var array: [Any] = []
                for _ in 0..<count {
                    guard let element = value(depth: depth + 1) else { return nil }
                    array.append(element)
                }
                return array
            case .map:
                return map(depth: depth)
            }
        }

        mutating func map(depth: Int) -> [String: Any]? {
            guard let count = count() else { return nil }
            var map: [String: Any] = [:]
            for _ in 0..<count {
                guard let key = string(), let element = value(depth: depth + 1) else { return nil }
                map[key] = element
            }
            return map
        }
    }

    /// The top-level dictionary of an encoding, or nil when any part of it
    /// is damaged or anything follows it.
    private static func decode(_ data: Data) -> [String: Any]? {
        var reader = Reader(bytes: Array(data), index: magic.count)
        guard data.count >= magic.count, reader.byte() == Tag.map.rawValue, let map = reader.map(depth: 0), reader.index == reader.bytes.count
        else { return nil }
        return map
    }
}
