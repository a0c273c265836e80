import Foundation

/// The cookie-date algorithm of RFC 6265 §5.1.1 (unchanged in 6265bis):
/// lenient about order and separators, strict about ranges. Works on bytes,
/// never allocates per token.
enum CookieDate {
    /// Seconds since 1970 for a cookie-date, or nil when the algorithm fails.
    static func parse(_ text: some StringProtocol) -> Double? {
        var time: (Int, Int, Int)?
        var dayOfMonth: Int?
        var month: Int?
        var year: Int?
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count {
            while index < bytes.count, isDelimiter(bytes[index]) { index += 1 }
            let start = index
            while index < bytes.count, !isDelimiter(bytes[index]) { index += 1 }
            guard start < index else { break }
            let token = bytes[start..<index]
            if time == nil, let value = parseTime(token) {
                time = value
            } else if dayOfMonth == nil, let value = leadingDigits(token, min: 1, max: 2) {
                dayOfMonth = value
            } else if month == nil, let value = parseMonth(token) {
                month = value
            } else if year == nil, let value = leadingDigits(token, min: 2, max: 4) {
                year = value
            }
        }
        guard let (hour, minute, second) = time, let day = dayOfMonth, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, hour <= 23, minute <= 59, second <= 59 else { return nil }
        // A day that does not exist in the month (31 April) fails too.
        guard day <= HTTPDate.daysInMonth(year: year, month: month) else { return nil }
        return Double(HTTPDate.daysFromCivil(year: year, month: month, day: day)) * 86_400
            + Double(hour * 3600 + minute * 60 + second)
    }

    /// %x09 / %x20-2F / %x3B-40 / %x5B-60 / %x7B-7E
    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte)
            || (0x5B...0x60).contains(byte) || (0x7B...0x7E).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    /// `min*max DIGIT ( non-digit *OCTET )`: the number, when the token starts so.
    private static func leadingDigits(_ token: ArraySlice<UInt8>, min: Int, max: Int) -> Int? {
        var value = 0
        var count = 0
        for byte in token {
            guard isDigit(byte) else { break }
            count += 1
            if count > max { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return count >= min ? value : nil
    }

    /// `time-field ":" time-field ":" time-field [ non-digit *OCTET ]`.
    private static func parseTime(_ token: ArraySlice<UInt8>) -> (Int, Int, Int)? {
        var fields: [Int] = []
        var index = token.startIndex
        while fields.count < 3 {
            var value = 0
            var digits = 0
            while index < token.endIndex, isDigit(token[index]), digits < 3 {
                value = value * 10 + Int(token[index] - 0x30)
                digits += 1
                index += 1
            }
            guard (1...2).contains(digits) else { return nil }
            fields.append(value)
            if fields.count < 3 {
                guard index < token.endIndex, token[index] == UInt8(ascii: ":") else { return nil }
                index += 1
            }
        }
        // What follows the third field must not be a digit.
        if index < token.endIndex, isDigit(token[index]) { return nil }
        return (fields[0], fields[1], fields[2])
    }

    private static let months: [[UInt8]] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"].map { Array($0.utf8) }

    /// The first three bytes, case-insensitively, name a month.
    private static func parseMonth(_ token: ArraySlice<UInt8>) -> Int? {
        guard token.count >= 3 else { return nil }
        let prefix = token.prefix(3).map { $0 | 0x20 }
        return months.firstIndex(of: prefix).map { $0 + 1 }
    }
}
