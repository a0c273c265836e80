import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import URLLoading

/// `urlloading-bench cookies`: the cost of the cookies for one request URL
/// with 3,000 cookies stored (100 sites of 30), ours (memory and SQLite
/// stores) against FoundationNetworking's HTTPCookieStorage, which is given
/// the same cookies through its own API.
enum CookieBenchmark {
    static let sites = 100
    static let perSite = 30
    static let lookups = 20_000
    static let foundationLookups = 500

    static func url(_ site: Int, _ page: Int) -> URL {
        // Force-unwrap: the string is built from numbers.
        URL(string: "https://www\(page % 3).site\(site).example/section\(page % 5)/page")!
    }

    /// The Set-Cookie values of one site: domain and host cookies on several paths.
    static func fields(_ site: Int) -> [String] {
        (0..<perSite).map { n in
            var field = "c\(n)=value-\(site)-\(n); Max-Age=86400"
            if n % 2 == 0 { field += "; Domain=site\(site).example" }
            if n % 3 == 0 { field += "; Path=/section\(n % 5)" }
            return field
        }
    }

    static func fill(_ store: CookieStore) {
        for site in 0..<sites { store.setCookies(fields(site), for: url(site, 0), mainDocumentURL: nil, policy: .always) }
    }

    static func run() {
        let memory = CookieStore()
        fill(memory)
        let directory = URL(fileURLWithPath: scratchDirectory("cookies-ours"))
        guard let persistent = try? CookieStore(directory: directory) else { fail("cannot open the cookie store in \(directory.path)") }
        fill(persistent)
        guard memory.allCookies.count == sites * perSite, persistent.allCookies.count == sites * perSite else {
            fail("expected \(sites * perSite) cookies, have \(memory.allCookies.count) and \(persistent.allCookies.count)")
        }

        // Foundation's store, kept away from the user's files.
        setenv("XDG_DATA_HOME", scratchDirectory("cookies-foundation"), 1)
        let foundation = HTTPCookieStorage.shared
        foundation.cookieAcceptPolicy = .always
        for site in 0..<sites {
            let target = url(site, 0)
            let headers = ["Set-Cookie": fields(site).joined(separator: ", ")]
            foundation.setCookies(HTTPCookie.cookies(withResponseHeaderFields: headers, for: target), for: target, mainDocumentURL: nil)
        }
        let foundationCount = foundation.cookies?.count ?? 0

        // The request URLs exist before the clock starts: only the stores are timed.
        let targets = (0..<lookups).map { url($0 % sites, $0) }
        var sink = 0
        func timeOurs(_ store: CookieStore) -> Double {
            median(
                (0..<5).map { _ in
                    microsecondsPerOperation(lookups) {
                        for target in targets { sink &+= store.cookies(for: target, mainDocumentURL: nil).count }
                    }
                })
        }
        let oursMemory = timeOurs(memory)
        let oursPersistent = timeOurs(persistent)
        let theirs = median(
            (0..<3).map { _ in
                microsecondsPerOperation(foundationLookups) {
                    for target in targets.prefix(foundationLookups) { sink &+= foundation.cookies(for: target)?.count ?? 0 }
                }
            })
        // Both stores answer the same question: the same number of cookies per URL.
        let probe = url(7, 4)
        let oursProbe = memory.cookies(for: probe, mainDocumentURL: nil).count
        let theirsProbe = foundation.cookies(for: probe)?.count ?? -1

        print("cookies(for:) with \(sites * perSite) stored cookies (Foundation holds \(foundationCount); for \(probe.absoluteString): ours \(oursProbe), Foundation \(theirsProbe))")
        print("  ours, memory store      \(formatted(oursMemory)) µs")
        print("  ours, SQLite store      \(formatted(oursPersistent)) µs")
        print("  FoundationNetworking    \(formatted(theirs)) µs")
        print("bench cookies lookup: \(ratio(oursPersistent, theirs))x foundation")
        print("bench cookies lookup-memory: \(ratio(oursMemory, theirs))x foundation")
        if sink == 42 { print("") }
    }

    static func ratio(_ ours: Double, _ reference: Double) -> String {
        String(format: ours / reference < 0.01 ? "%.4f" : "%.3f", ours / reference)
    }
}
