import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import URLLoading
import URLLoadingOpenAPI

/// `urlloading-bench session <base-url> <curl-bench> <work> <sink>`: 1 KiB GETs
/// sequentially and 16 in flight, and a 100 MiB download, against one
/// loopback nginx; each contender in a process of its own so its CPU time
/// and peak RSS are its own.
enum SessionBenchmark {
    static let sequentialRequests = 3000
    static let concurrentRequests = 6000
    static let inFlight = 16
    /// Runs per contender of the 1 KiB and 100 MiB figures, in turns; the
    /// fastest counts (one run here varies by ±30% with the machine's other
    /// work, whichever contender it hits).
    static let runs = 3
    /// Rounds of the observed figures (each client with and without a
    /// tracer and metrics, back to back); the median of their ratios counts.
    static let observedRounds = 7
    /// Runs per contender of the 1 GiB figures (the best counts).
    static let bigTransferRuns = 5

    struct Figures {
        var elapsed: Double
        var cpu: Double
        var peakRSSKiB: Double
        var bytes: Double
    }

    static func parse(_ text: String) -> Figures {
        let parts = text.split(separator: " ").compactMap { Double($0) }
        guard parts.count == 4 else { fail("a child printed \(text)") }
        return Figures(elapsed: parts[0], cpu: parts[1], peakRSSKiB: parts[2], bytes: parts[3])
    }

    /// Runs a C reference program and reads the figures it prints.
    static func reference(_ executable: String, _ arguments: [String]) -> Figures {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { fail("cannot run \(executable): \(error)") }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { fail("\(executable) \(arguments) failed") }
        return parse(output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// - Parameters:
    ///   - work: The directory nginx serves from (`www/`).
    ///   - sink: Where big transfers write (nginx's upload root; tmpfs if possible).
    ///   - wsBench: The libwebsockets client (`c/ws-bench.c`, built).
    static func run(base: String, curlBench: String, work: String, sink: String, wsBench: String) {
        let small = base + "/1k", large = base + "/100m"
        func c(_ arguments: [String]) -> Figures { reference(curlBench, arguments) }
        func child(_ contender: String, _ mode: String, _ url: String, _ count: Int, _ inFlight: Int) -> Figures {
            parse(runChildText(["session-child", contender, mode, url, "\(count)", "\(inFlight)"]))
        }
        var table: [(figure: String, reference: String, ratio: Double)] = []
        var lines: [String] = []
        let contenders = ["ours", "foundation", "async-http-client"]
        // AsyncHTTPClient with what `data(from:)` returns besides the body:
        // an HTTPURLResponse built from its head (FoundationNetworking's
        // initializer costs ~1 µs per field), the deliverable a user of
        // URLSession ported to it would make. Informational: the speed
        // targets are against plain async-http-client.
        let getContenders = contenders + ["async-http-client+response"]

        /// Runs every contender `runs` times in turns; keeps each one's fastest run.
        func best(
            _ reference: () -> Figures, among names: [String] = contenders, _ contender: (String) -> Figures
        ) -> [String: Figures] {
            var results: [String: Figures] = [:]
            func keep(_ name: String, _ figures: Figures) {
                if results[name].map({ figures.elapsed < $0.elapsed }) ?? true { results[name] = figures }
            }
            for _ in 0..<Self.runs {
                keep("libcurl-c", reference())
                for name in names { keep(name, contender(name)) }
            }
            return results
        }

        // The C client's get-16 run, kept for the response-init figure below.
        var cGet16: Figures?
        for (figure, count, inFlight) in [("get-seq", sequentialRequests, 1), ("get-16", concurrentRequests, inFlight)] {
            let results = best({ c(["get", small, "\(count)", "\(inFlight)"]) }, among: getContenders) { child($0, "get", small, count, inFlight) }
            guard let ours = results["ours"], let reference = results["libcurl-c"] else { continue }
            if figure == "get-16" { cGet16 = reference }
            lines.append(
                "\(figure): "
                    + (["ours", "libcurl-c"] + getContenders.dropFirst()).map { name in
                        let figures = results[name] ?? reference
                        return "\(name) \(Int(Double(count) / figures.elapsed)) req/s, \(formatted(figures.cpu / Double(count) * 1e6)) µs CPU/req"
                    }.joined(separator: "; "))
            for name in ["libcurl-c"] + getContenders.dropFirst() {
                guard let other = results[name] else { continue }
                table.append((figure, name, ours.elapsed / other.elapsed))
                table.append((figure + "-cpu", name, ours.cpu / other.cpu))
            }
        }

        // swift-http-types' HTTPRequest in, HTTPResponse out, against
        // AsyncHTTPClient's own API (HTTPClientResponse): on this path
        // neither builds Foundation's response. Then a generated client's
        // call (no generated code: the transport's `send`, as the client
        // makes it) through each transport, the body collected as the
        // client's `Data(collecting:)` would.
        let againstAsyncHTTPClient: [(figure: String, count: Int, inFlight: Int, ours: String, theirs: String, reference: String)] = [
            ("types-get-seq", sequentialRequests, 1, "types-get", "get", "async-http-client"),
            ("types-get-16", concurrentRequests, inFlight, "types-get", "get", "async-http-client"),
            ("openapi-get-16", concurrentRequests, inFlight, "openapi-get", "openapi-get", "openapi-async-http-client"),
        ]
        for run in againstAsyncHTTPClient {
            let results = best({ c(["get", small, "\(run.count)", "\(run.inFlight)"]) }, among: ["ours", "async-http-client"]) { name in
                child(name, name == "ours" ? run.ours : run.theirs, small, run.count, run.inFlight)
            }
            guard let ours = results["ours"], let other = results["async-http-client"] else { continue }
            let (oursLabel, theirsLabel) =
                run.ours == "openapi-get" ? ("SessionTransport", "AsyncHTTPClientTransport") : ("data(for: HTTPRequest)", "execute")
            lines.append(
                "\(run.figure): ours (\(oursLabel)) \(Int(Double(run.count) / ours.elapsed)) req/s, \(formatted(ours.cpu / Double(run.count) * 1e6)) µs CPU/req; "
                    + "async-http-client (\(theirsLabel)) \(Int(Double(run.count) / other.elapsed)) req/s, \(formatted(other.cpu / Double(run.count) * 1e6)) µs CPU/req")
            table.append((run.figure, run.reference, ours.elapsed / other.elapsed))
            table.append((run.figure + "-cpu", run.reference, ours.cpu / other.cpu))
        }

        // Observed: a tracer and a metrics backend bootstrapped in the
        // process (Observers.swift), against ours without them, and
        // AsyncHTTPClient with its tracing on against it without. What
        // being observed adds is a few percent, less than one run's noise:
        // each round runs the four back to back, and each figure is the
        // median of the rounds' ratios (the fastest run of each, as
        // elsewhere, can pair runs minutes apart).
        do {
            struct Round {
                var plain: Figures
                var observed: Figures
                var theirsPlain: Figures
                var theirsObserved: Figures
            }
            let rounds = (0..<Self.observedRounds).map { _ in
                Round(
                    plain: child("ours", "get", small, concurrentRequests, inFlight),
                    observed: child("ours", "observed-get", small, concurrentRequests, inFlight),
                    theirsPlain: child("async-http-client", "get", small, concurrentRequests, inFlight),
                    theirsObserved: child("async-http-client", "observed-get", small, concurrentRequests, inFlight))
            }
            func ratios(_ over: KeyPath<Round, Figures>, _ under: KeyPath<Round, Figures>) -> (time: Double, cpu: Double) {
                (
                    median(rounds.map { $0[keyPath: over].elapsed / $0[keyPath: under].elapsed }),
                    median(rounds.map { $0[keyPath: over].cpu / $0[keyPath: under].cpu })
                )
            }
            func rate(_ all: KeyPath<Round, Figures>) -> String {
                let elapsed = median(rounds.map { $0[keyPath: all].elapsed }), cpu = median(rounds.map { $0[keyPath: all].cpu })
                return "\(Int(Double(concurrentRequests) / elapsed)) req/s, \(formatted(cpu / Double(concurrentRequests) * 1e6)) µs CPU/req"
            }
            let ours = ratios(\.observed, \.plain), theirs = ratios(\.theirsObserved, \.theirsPlain)
            let against = ratios(\.observed, \.theirsObserved)
            lines.append(
                "observed-get-16 (a tracer and metrics bootstrapped; medians of \(rounds.count) rounds): ours \(rate(\.observed)), "
                    + "without them \(rate(\.plain)): \(formatted(ours.time))x (CPU \(formatted(ours.cpu))x); "
                    + "async-http-client tracing \(rate(\.theirsObserved)), without \(rate(\.theirsPlain)): "
                    + "\(formatted(theirs.time))x (CPU \(formatted(theirs.cpu))x); rounds' time ratios, ours "
                    + rounds.map { formatted($0.observed.elapsed / $0.plain.elapsed) }.joined(separator: " "))
            table.append(("observed-get-16", "ours-unobserved", ours.time))
            table.append(("observed-get-16-cpu", "ours-unobserved", ours.cpu))
            table.append(("observed-get-16", "async-http-client-traced", against.time))
            table.append(("observed-get-16-cpu", "async-http-client-traced", against.cpu))
            table.append(("async-http-client-traced", "async-http-client", theirs.time))
            table.append(("async-http-client-traced-cpu", "async-http-client", theirs.cpu))
        }

        // The floor under get-16-cpu: the response object data(from:) must
        // return, built alone, against the C client's whole GET.
        let responseInit = (0..<Self.runs).map { _ in child("response-init", "get", small, concurrentRequests, 1) }.min { $0.cpu < $1.cpu }
        if let cGet16, let responseInit, responseInit.bytes > 0 {
            let fields = Int(responseInit.bytes) / concurrentRequests
            lines.append(
                "response-init: HTTPURLResponse of nginx's \(fields) fields \(formatted(responseInit.cpu / Double(concurrentRequests) * 1e6)) µs CPU each; "
                    + "libcurl-c's whole GET at \(inFlight) in flight \(formatted(cGet16.cpu / Double(concurrentRequests) * 1e6)) µs CPU")
            table.append(("response-init-cpu", "libcurl-c-get-16", responseInit.cpu / cGet16.cpu))
        }

        // The manager over the same session settings: what its
        // serializers, handler and async wrapping add to each request.
        var plain: Figures?
        var managed: Figures?
        for _ in 0..<Self.runs {
            let p = child("ours", "get", small, sequentialRequests, 1)
            if plain.map({ p.elapsed < $0.elapsed }) ?? true { plain = p }
            let m = child("manager", "get", small, sequentialRequests, 1)
            if managed.map({ m.elapsed < $0.elapsed }) ?? true { managed = m }
        }
        if let plain, let managed {
            lines.append(
                "manager-get-seq: manager \(Int(Double(sequentialRequests) / managed.elapsed)) req/s, \(formatted(managed.cpu / Double(sequentialRequests) * 1e6)) µs CPU/req; "
                    + "session \(Int(Double(sequentialRequests) / plain.elapsed)) req/s, \(formatted(plain.cpu / Double(sequentialRequests) * 1e6)) µs CPU/req")
            table.append(("manager-get-seq", "ours-get-seq", managed.elapsed / plain.elapsed))
            table.append(("manager-get-seq-cpu", "ours-get-seq", managed.cpu / plain.cpu))
        }

        ResumeBenchmark.run(base: base, into: &table, lines: &lines)

        let downloads = best({ c(["download", large]) }, { child($0, "download", large, 1, 1) })
        let oursTask = child("ours", "download-task", large, 1, 1)
        if let ours = downloads["ours"] {
            for name in ["libcurl-c", "foundation", "async-http-client"] {
                guard let other = downloads[name] else { continue }
                table.append(("download-100m", name, ours.elapsed / other.elapsed))
            }
        }
        lines.append(
            "download-100m: "
                + ["ours", "libcurl-c", "foundation", "async-http-client"].compactMap { name in
                    guard let figures = downloads[name] else { return nil }
                    return "\(name) \(formatted(figures.bytes / figures.elapsed / 1_048_576)) MiB/s, peak RSS \(Int(figures.peakRSSKiB / 1024)) MiB"
                }.joined(separator: "; "))
        lines.append("download task (to a file): \(formatted(oursTask.bytes / oursTask.elapsed / 1_048_576)) MiB/s, peak RSS \(Int(oursTask.peakRSSKiB / 1024)) MiB")

        bigTransfers(base: base, work: work, sink: sink, c: c, into: &table, lines: &lines)
        WebSocketBenchmark.run(wsBench: wsBench, into: &table, lines: &lines)
        WebSocketIdleBenchmark.run(lines: &lines)
        UploadBenchmark.run(work: work, into: &table, lines: &lines)
        ResumableUploadBenchmark.run(work: work, into: &table, lines: &lines)

        print("urlloading-bench session: against nginx on loopback\n")
        lines.forEach { print($0) }
        print("")
        for row in table {
            print("bench session \(row.figure): \(String(format: "%.2f", row.ratio))x \(row.reference)")
        }
    }

    /// 1 GiB to a file and from a file: our download and upload tasks
    /// against the C program and curl's CLI, each writing to (or reading
    /// from) a file in `sink` (tmpfs where the machine has one, so that one
    /// contender's disk write-back does not slow the next); nginx stores
    /// uploads there with WebDAV PUT. Each contender runs `bigTransferRuns`
    /// times, in turns, and its best time counts: one run of a gigabyte
    /// varies by ±40% here with the machine's other work.
    static func bigTransfers(
        base: String, work: String, sink: String, c: (([String]) -> Figures),
        into table: inout [(figure: String, reference: String, ratio: Double)], lines: inout [String]
    ) {
        let download = base + "/1g", received = sink + "/received", source = work + "/www/1g"
        // Every upload replaces the same file: gigabytes piling up in the
        // sink slowed nginx down by seconds per upload.
        let uploadTarget = base + "/upload/1g"
        func cli(_ arguments: [String]) -> Double {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            process.arguments = ["-sS", "--fail"] + arguments
            let start = now()
            do { try process.run() } catch { fail("cannot run curl: \(error)") }
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { fail("curl \(arguments) failed") }
            return Double(now() - start) / 1e9
        }
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = sink  // where our download task's file goes
        for (figure, mode) in [("download-1g", "download-task"), ("upload-1g", "upload-task")] {
            let upload = mode == "upload-task"
            var best: [String: Figures] = [:]
            func keep(_ name: String, _ figures: Figures) {
                if best[name].map({ figures.elapsed < $0.elapsed }) ?? true { best[name] = figures }
            }
            for _ in 0..<Self.bigTransferRuns {
                keep("libcurl-c", c(upload ? ["upload", uploadTarget, source] : ["download-file", download, received]))
                let seconds = cli(upload ? ["-T", source, "-o", "/dev/null", uploadTarget] : ["-o", received, download])
                keep("curl-cli", Figures(elapsed: seconds, cpu: 0, peakRSSKiB: 0, bytes: 1_073_741_824))
                keep(
                    "ours",
                    parse(
                        runChildText(
                            ["session-child", "ours", mode, upload ? uploadTarget : download, "1", "1", source],
                            environment: environment)))
                try? FileManager.default.removeItem(atPath: received)
            }
            guard let ours = best["ours"], let reference = best["libcurl-c"], let curlCLI = best["curl-cli"] else { continue }
            table.append((figure, "libcurl-c", ours.elapsed / reference.elapsed))
            table.append((figure, "curl-cli", ours.elapsed / curlCLI.elapsed))
            lines.append(
                "\(figure) (best of \(Self.bigTransferRuns)): ours \(formatted(1024 / ours.elapsed)) MiB/s, peak RSS \(Int(ours.peakRSSKiB / 1024)) MiB; "
                    + "libcurl-c \(formatted(1024 / reference.elapsed)) MiB/s, peak RSS \(Int(reference.peakRSSKiB / 1024)) MiB; "
                    + "curl-cli \(formatted(1024 / curlCLI.elapsed)) MiB/s")
        }
    }

    // MARK: Children

    static func rusage() -> (cpu: Double, rssKiB: Double) {
        var usage = Glibc.rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let cpu =
            Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return (cpu, peakRSSKiB())
    }

    /// Peak RSS in KiB from VmHWM: getrusage's ru_maxrss survives execve,
    /// so a child would report its parent's peak if that was larger.
    static func peakRSSKiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return -1 }
        return Double(line.split(separator: " ").dropFirst().first ?? "") ?? -1
    }

    /// Runs `count` requests with `inFlight` workers; returns elapsed seconds.
    ///
    /// - Parameter warmUp: Open connections before the clock starts (the
    ///   GET figures); a gigabyte's transfer is timed from a cold start, as
    ///   the C program's and curl's are.
    static func timed(
        _ count: Int, _ inFlight: Int, warmUp: Bool = true,
        _ one: @escaping @Sendable () async throws -> Int
    ) async -> (Double, Double, Int) {
        if warmUp { for _ in 0..<inFlight { _ = try? await one() } }
        let before = rusage().cpu
        let start = now()
        let bytes = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<inFlight {
                group.addTask {
                    var total = 0
                    for _ in stride(from: worker, to: count, by: inFlight) {
                        do { total += try await one() } catch { fail("request failed: \(error)") }
                    }
                    return total
                }
            }
            return await group.reduce(0, +)
        }
        return (Double(now() - start) / 1e9, rusage().cpu - before, bytes)
    }

    /// - Parameter path: The file an upload sends.
    static func child(contender: String, mode: String, url: String, count: Int, inFlight: Int, path: String? = nil) async -> String {
        guard let target = URL(string: url) else { fail("bad URL \(url)") }
        let result: (Double, Double, Int)
        if mode == "observed-get" { bootstrapObservers() }
        switch contender {
        case "ours":
            // Caches off for every contender: these figures are the network
            // path (nginx's Last-Modified would otherwise make heuristic
            // cache hits of most GETs); `tools/bench cache` measures the cache.
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCache = nil
            let session = Session(configuration: configuration)
            switch mode {
            case "upload-task", "upload-task-expect":
                guard let path else { fail("upload-task needs a file") }
                result = await timed(1, 1, warmUp: false) {
                    var request = URLRequest(url: target)
                    request.httpMethod = "PUT"
                    if mode == "upload-task-expect" { request.setValue("100-continue", forHTTPHeaderField: "Expect") }
                    let (_, response) = try await session.upload(for: request, fromFile: URL(fileURLWithPath: path))
                    guard let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) else {
                        fail("upload answered \(response)")
                    }
                    return (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                }
            case "download-task":
                result = await timed(count, inFlight, warmUp: false) {
                    let (file, _) = try await session.download(for: URLRequest(url: target))
                    let size = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
                    try? FileManager.default.removeItem(at: file)
                    return size
                }
            case "openapi-get":
                result = await openAPIGets(SessionTransport(session: session), url: target, count: count, inFlight: inFlight)
            case "types-get":
                // swift-http-types' call: the response is made from the head, no HTTPURLResponse.
                let request = HTTPRequest(method: .get, url: target)
                result = await timed(count, inFlight) { try await session.data(for: request).0.count }
            default:
                result = await timed(count, inFlight) { try await session.data(from: target).0.count }
            }
        case "response-init":
            // FoundationNetworking's HTTPURLResponse initializer alone, on
            // the head nginx sent for `url` (one GET first), `count` times:
            // what every data(from:) pays and AsyncHTTPClient's API does not.
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCache = nil
            guard let (_, first) = try? await Session(configuration: configuration).data(from: target),
                let head = first as? HTTPURLResponse
            else { fail("no response from \(url)") }
            var fields: [String: String] = [:]
            for (name, value) in head.allHeaderFields {
                if let name = name as? String, let value = value as? String { fields[name] = value }
            }
            let before = rusage().cpu
            let start = now()
            var built = 0
            for _ in 0..<count where HTTPURLResponse(url: target, statusCode: head.statusCode, httpVersion: "HTTP/1.1", headerFields: fields) != nil {
                built += 1
            }
            // The fourth figure counts the fields handed over, from which
            // the parent reads how many the head had.
            result = (Double(now() - start) / 1e9, rusage().cpu - before, built * fields.count)
        case "ours-delegate":
            // The plain session with a delegate that implements nothing: what having one costs.
            final class Empty: SessionDataDelegate {}
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCache = nil
            let session = Session(configuration: configuration, delegate: Empty(), delegateQueue: nil)
            result = await timed(count, inFlight) { try await session.data(from: target).0.count }
        case "manager":
            let configuration = SessionConfiguration.ephemeral
            configuration.urlCache = nil
            let manager = HTTPSessionManager(configuration: configuration)
            let serializer = DataResponseSerializer()
            result = await timed(count, inFlight) { try await manager.perform(URLRequest(url: target), serializer: serializer).data.count }
        case "foundation":
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            let session = URLSession(configuration: configuration)
            result = await timed(count, inFlight) { try await session.data(from: target).0.count }
        case "async-http-client" where mode == "openapi-get":
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            result = await openAPIGets(AsyncHTTPClientTransport(configuration: .init(client: client)), url: target, count: count, inFlight: inFlight)
            try? await client.shutdown()
        default:
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            let withResponse = contender == "async-http-client+response"
            // The body collected in memory, as a data task (ours and
            // Foundation's) returns it; the C program, the ceiling, drops it.
            result = await timed(count, inFlight) {
                let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
                let body = try await response.body.collect(upTo: Int.max).readableBytes
                if withResponse {
                    var fields: [String: String] = [:]
                    for (name, value) in response.headers {
                        if let earlier = fields[name] { fields[name] = earlier + ", " + value } else { fields[name] = value }
                    }
                    let version = "HTTP/\(response.version.major).\(response.version.minor)"
                    guard HTTPURLResponse(url: target, statusCode: Int(response.status.code), httpVersion: version, headerFields: fields) != nil else {
                        fail("no HTTPURLResponse for \(url)")
                    }
                }
                return body
            }
            try? await client.shutdown()
        }
        return "\(result.0) \(result.1) \(rusage().rssKiB) \(result.2)"
    }
}

extension SessionBenchmark {
    /// `count` GETs of `url` through `transport` as a generated client
    /// sends them: a path-only request and the base URL.
    static func openAPIGets(_ transport: some ClientTransport, url: URL, count: Int, inFlight: Int) async -> (Double, Double, Int) {
        guard var base = URLComponents(url: url, resolvingAgainstBaseURL: false) else { fail("bad URL \(url)") }
        let path = base.percentEncodedPath
        base.percentEncodedPath = ""
        guard let baseURL = base.url else { fail("bad URL \(url)") }
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: path)
        return await timed(count, inFlight) {
            let (response, body) = try await transport.send(request, body: nil, baseURL: baseURL, operationID: "get")
            guard response.status == .ok, let body else { fail("openapi-get answered \(response.status)") }
            return try await Data(collecting: body, upTo: .max).count
        }
    }
}

/// Runs this executable in a new process and returns what it prints.
func runChildText(_ arguments: [String], environment: [String: String]? = nil) -> String {
    let process = Process()
    if let environment { process.environment = environment }
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    do { try process.run() } catch { fail("cannot start a child: \(error)") }
    let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else { fail("child \(arguments) failed: \(output)") }
    return output.trimmingCharacters(in: .whitespacesAndNewlines)
}
