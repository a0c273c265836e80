import Foundation

/// `~/.netrc` (the format curl, ftp and git read): `machine`, `login`,
/// `password` tokens; `default` entries and `macdef` blocks are skipped.
enum Netrc {
    struct Entry: Equatable { var machine: String; var login: String; var password: String }

    static func parse(_ text: String) -> [Entry] {
        var entries: [Entry] = []
        var current: (machine: String?, login: String?, password: String?)?
        func flush() {
            if let entry = current, let machine = entry.machine, let login = entry.login {
                entries.append(Entry(machine: machine.lowercased(), login: login, password: entry.password ?? ""))
            }
            current = nil
        }
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        var tokens: [Substring] = []
        while let line = lines.popFirst() {
            if line.hasPrefix("macdef") || line.contains(where: { $0 == "\0" }) {
                // A macro runs to the next empty line.
                while let next = lines.popFirst(), !next.trimmingCharacters(in: .whitespaces).isEmpty {}
                continue
            }
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("#") { continue }
            tokens += line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
        }
        var index = 0
        while index < tokens.count {
            let token = tokens[index]
            let value = index + 1 < tokens.count ? String(tokens[index + 1]) : nil
            switch token {
            case "machine":
                flush()
                current = (value, nil, nil)
                index += 2
            case "default":
                flush()
                current = (nil, nil, nil)
                index += 1
            case "login":
                current?.login = value
                index += 2
            case "password":
                current?.password = value
                index += 2
            case "account", "port":
                index += 2
            default:
                index += 1
            }
        }
        flush()
        return entries
    }
}
