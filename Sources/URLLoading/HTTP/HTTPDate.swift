/// HTTP dates (RFC 9110 §5.6.7): parsing of the three formats recipients
/// must accept, and formatting as IMF-fixdate. Times are seconds since
/// 1970-01-01T00:00:00Z.
///
/// Parsing is strict about the grammar (a value that fits none of the three
/// formats is invalid: RFC 9111 then treats an `Expires` as in the past) but
/// accepts names in any letter case, as browsers do. It never traps on any
/// input.
package enum HTTPDate {
    private static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    private static let longDayNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    private static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Parses an IMF-fixdate, RFC 850 or asctime date.
    ///
    /// - Parameters:
    ///   - text: The field value; surrounding whitespace is ignored.
    ///   - now: Used for RFC 850's two-digit years (RFC 9110: a year that
    ///     appears more than 50 years in the future is in the past century).
    /// - Returns: Seconds since the epoch, or nil when invalid.
    package static func parse(_ text: String, now: Double? = nil) -> Double? {
        var bytes = Array(text.utf8)
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes.removeLast() }
        let start = bytes.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? bytes.endIndex
        var scanner = Scanner(bytes: bytes[start...])
        if let value = parseIMF(&scanner) { return value }
        scanner = Scanner(bytes: bytes[start...])
        if let value = parseRFC850(&scanner, now: now) { return value }
        scanner = Scanner(bytes: bytes[start...])
        return parseAsctime(&scanner)
    }

    /// Formats as IMF-fixdate, for example `Sun, 06 Nov 1994 08:49:37 GMT`.
    package static func format(_ seconds: Double) -> String {
        let whole = Int64(seconds.rounded(.down))
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let secondOfDay = Int(whole - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int(((days % 7) + 11) % 7)  // 1970-01-01 was a Thursday
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = String(year)
        let paddedYear = String(repeating: "0", count: max(0, 4 - yearText.count)) + yearText
        return "\(dayNames[weekday].capitalized), \(two(day)) \(monthNames[month - 1].capitalized) \(paddedYear) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    // MARK: The three formats

    /// `Sun, 06 Nov 1994 08:49:37 GMT`
    private static func parseIMF(_ s: inout Scanner) -> Double? {
        guard s.name(in: dayNames) != nil, s.literal(","), s.literal(" "),
            let day = s.digits(exactly: 2), s.literal(" "),
            let month = s.name(in: monthNames), s.literal(" "),
            let year = s.digits(exactly: 4), s.literal(" "),
            let time = s.time(), s.literal(" "), s.caseInsensitive("gmt"), s.atEnd
        else { return nil }
        return make(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`
    private static func parseRFC850(_ s: inout Scanner, now: Double?) -> Double? {
        guard s.name(in: longDayNames) != nil, s.literal(","), s.literal(" "),
            let day = s.digits(exactly: 2), s.literal("-"),
            let month = s.name(in: monthNames), s.literal("-"),
            let shortYear = s.digits(exactly: 2), s.literal(" "),
            let time = s.time(), s.literal(" "), s.caseInsensitive("gmt"), s.atEnd
        else { return nil }
        // The century: the latest year ending in these digits that is not
        // more than 50 years in the future.
        let currentYear = civil(fromDays: Int64(((now ?? 1_735_689_600) / 86_400).rounded(.down))).year
        var year = currentYear - currentYear % 100 + shortYear
        if year > currentYear + 50 { year -= 100 }
        return make(year: year, month: month + 1, day: day, time: time)
    }

    /// `Sun Nov  6 08:49:37 1994`
    private static func parseAsctime(_ s: inout Scanner) -> Double? {
        guard s.name(in: dayNames) != nil, s.literal(" "),
            let month = s.name(in: monthNames), s.literal(" ")
        else { return nil }
        let day: Int
        if s.literal(" "), let single = s.digits(exactly: 1) {
            day = single
        } else if let double = s.digits(exactly: 2) {
            day = double
        } else {
            return nil
        }
        guard s.literal(" "), let time = s.time(), s.literal(" "),
            let year = s.digits(exactly: 4), s.atEnd
        else { return nil }
        return make(year: year, month: month + 1, day: day, time: time)
    }

    private static func make(year: Int, month: Int, day: Int, time: (Int, Int, Int)) -> Double? {
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            (0...23).contains(time.0), (0...59).contains(time.1), (0...60).contains(time.2)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        // A leap second is read as the last second of its minute.
        let seconds = min(time.2, 59)
        return Double(days * 86_400 + Int64(time.0 * 3600 + time.1 * 60 + seconds))
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
    /// algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// A cursor over ASCII bytes.
    private struct Scanner {
        var bytes: ArraySlice<UInt8>

        var atEnd: Bool { bytes.isEmpty }

        mutating func literal(_ text: StaticString) -> Bool {
            let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
            guard bytes.count >= expected.count, zip(bytes, expected).allSatisfy({ $0 == $1 }) else { return false }
            bytes = bytes.dropFirst(expected.count)
            return true
        }

        mutating func caseInsensitive(_ lowercase: String) -> Bool {
            let expected = Array(lowercase.utf8)
            guard bytes.count >= expected.count,
                zip(bytes, expected).allSatisfy({ ($0 | 0x20) == $1 && $0 >= 0x41 })
            else { return false }
            bytes = bytes.dropFirst(expected.count)
            return true
        }

        /// Index into `names` of the (lowercase) name at the cursor.
        mutating func name(in names: [String]) -> Int? {
            // No name in one list is a prefix of another in the same list.
            for (index, name) in names.enumerated() {
                var copy = self
                if copy.caseInsensitive(name) {
                    self = copy
                    return index
                }
            }
            return nil
        }

        mutating func digits(exactly count: Int) -> Int? {
            guard bytes.count >= count else { return nil }
            var value = 0
            for byte in bytes.prefix(count) {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            bytes = bytes.dropFirst(count)
            return value
        }

        mutating func time() -> (Int, Int, Int)? {
            guard let h = digits(exactly: 2), literal(":"), let m = digits(exactly: 2), literal(":"),
                let s = digits(exactly: 2)
            else { return nil }
            return (h, m, s)
        }
    }
}
