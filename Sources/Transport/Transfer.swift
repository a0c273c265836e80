import CCurl
import Foundation

/// One easy handle and what its callbacks need. Configured by the thread
/// that starts it, then handed to the loop thread and used there alone;
/// libcurl's callbacks get a retained reference as user data, released in
/// `close` after the handle is cleaned up (never an unretained `self`).
final class Transfer {
    let handle: UnsafeMutableRawPointer
    let observer: any TransferObserver
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: ErrorBuffer
    /// Set when this transfer is a plain GET (`PlainOptions`): what it
    /// leaves set on the handle.
    private var plain: PlainOptions?
    private var retained: Unmanaged<Transfer>?
    private var body: BodySource
    /// The request body's length; -1 when a stream's length is unknown.
    private let bodyLength: Int64
    /// libcurl's send buffer for bodies larger than it.
    static let uploadBufferSize = 1024 * 1024
    /// Body bytes handed to libcurl so far.
    private var bodyBytesRead: Int64 = 0
    private var trailersDelivered = false
    private var hasBody: Bool { if case .none = body { false } else { true } }

    /// The response head as it arrives, line by line.
    private(set) var head = ResponseHeadParser(maximumBytes: CurlMulti.maximumHeadBytes)
    private var headDelivered = false
    /// An https URL: its connection's TLS details go into the metrics.
    private var usesTLS = false
    private(set) var tlsVersion: String?
    private(set) var tlsCipherSuite: String?
    /// Whether CURLOPT_PROXY names a proxy.
    private(set) var viaProxy = false
    /// libcurl decodes the content codings it knows (`decodeContent`).
    private var decodesContent = false
    /// A connect-only transfer (no head is expected).
    private(set) var connectOnly = false
    private(set) var collectsCertificates = false
    var paused = false {
        didSet { activity &+= 1 }
    }
    /// Fail when nothing moves for this long while not paused by us.
    private(set) var idleSeconds: Double?
    /// The idle clock waits for the request's sending (see
    /// `TransferRequest.idleTimeoutCountsFromSend`); set once it was seen.
    private var idleClockWaitsForSend = false
    /// Counts what moved (head lines, body chunks, bytes sent, pauses):
    /// the callbacks only count, and `isIdle` reads the clock once per
    /// turn of the loop (a clock read per callback cost more than the
    /// callbacks' own work).
    private var activity: UInt64 = 0
    /// `activity` when `isIdle` last looked, and when it saw it change.
    private var seenActivity: UInt64 = 0
    private var lastActivity = DispatchTime.now().uptimeNanoseconds
    private var movedBytes: Int64 = 0
    /// The loop's count of head lines that arrived on any of its transfers
    /// (set when the loop adds this one); see `CurlLoop.ReceiveCounter`.
    var loopReceived: CurlLoop.ReceiveCounter?
    /// Set when a callback stops the transfer for a reason of ours.
    var failure: TransferError?

    private enum BodySource {
        case none
        case data(Data, offset: Int)
        /// The file, and where in it the body starts.
        case file(FileHandle, start: Int64)
        case pipe(BodyPipe)
    }

    /// What a plain GET sets on its handle beyond the options every
    /// transfer sets: a GET without a body, credentials, proxy, buffer size
    /// or TLS files of its own. A handle a plain GET finished on keeps its
    /// options for the next plain GET, which sets only what differs, and is
    /// not reset (reset copies libcurl's default CA paths again, and the
    /// constant options are set again after it: eight allocations a GET).
    /// Anything else resets the handle first, and so does a transfer that
    /// failed or changed an option while it ran (a body in a coding libcurl
    /// does not decode), so no option of one transfer is ever left for another.
    struct PlainOptions: Equatable {
        let decodesContent: Bool
    }

    /// - Parameter reusing: An idle handle from the loop's pool, or nil for
    ///   a new one: reusing spares allocations and libcurl's per-handle
    ///   set-up on every request.
    init(request: TransferRequest, observer: any TransferObserver, reusing idle: CurlLoop.IdleHandle? = nil) throws(TransferError) {
        guard let handle = idle?.pointer ?? curl_easy_init() else {
            throw .curl(CurlError(easy: CURLE_OUT_OF_MEMORY))
        }
        self.handle = handle
        self.observer = observer
        errorBuffer = idle?.errorBuffer ?? ErrorBuffer()
        errorBuffer.bytes[0] = 0
        plain = Self.plainOptions(request)
        // What is still set from a plain GET: kept for another, reset for anything else.
        let left = idle?.plain
        if left != nil, plain == nil { curl_easy_reset(handle) }
        switch request.body {
        case .none:
            body = .none
            bodyLength = 0
        case .data(let data):
            body = .data(data, offset: 0)
            bodyLength = Int64(data.count)
        case .file(let path, let offset, let length):
            guard let file = FileHandle(forReadingAtPath: path) else {
                curl_easy_cleanup(handle)
                throw .bodyUnreadable("cannot open the body file \(path)")
            }
            guard offset >= 0, offset == 0 || lseek(file.fileDescriptor, off_t(offset), SEEK_SET) == off_t(offset) else {
                try? file.close()
                curl_easy_cleanup(handle)
                throw .bodyUnreadable("cannot read the body file \(path) from byte \(offset)")
            }
            body = .file(file, start: offset)
            bodyLength = length
        case .stream(let pipe, let length):
            body = .pipe(pipe)
            bodyLength = length
        }
        if hasBody && (bodyLength < 0 || bodyLength > Int64(Self.uploadBufferSize)) {
            // A large body moves in fewer read callbacks and send calls
            // (libcurl's default is 64 KiB; 1 MiB measured fastest, 256 KiB no better than 64).
            _ = urlloading_easy_setopt_long(handle, CURLOPT_UPLOAD_BUFFERSIZE, Self.uploadBufferSize)
        }
        let me = Unmanaged.passRetained(self)
        retained = me
        do {
            try configure(request, userData: me.toOpaque(), left: plain == nil ? nil : left)
        } catch {
            close()
            throw error
        }
    }

    private func set(_ option: CURLoption, _ value: Int) throws(TransferError) {
        let code = urlloading_easy_setopt_long(handle, option, value)
        if code != CURLE_OK { throw .curl(CurlError(easy: code)) }
    }

    private func set(_ option: CURLoption, _ value: String) throws(TransferError) {
        // withCString lends a native string's own bytes; the implicit
        // conversion copies them into a new array first (libcurl copies them anyway).
        let code = value.withCString { urlloading_easy_setopt_string(handle, option, $0) }
        if code != CURLE_OK { throw .curl(CurlError(easy: code)) }
    }

    private func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Appends the line `name` `separator` `value` to the request's field
    /// list. The line is put together on the stack: libcurl copies it.
    private func appendHeader(_ name: String, _ separator: StaticString, _ value: String) throws(TransferError) {
        let length = name.utf8.count + separator.utf8CodeUnitCount + value.utf8.count
        let list = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { line -> UnsafeMutablePointer<curl_slist>? in
            var end = line.initialize(fromContentsOf: name.utf8)
            end = line[end...].initialize(fromContentsOf: UnsafeBufferPointer(start: separator.utf8Start, count: separator.utf8CodeUnitCount))
            end = line[end...].initialize(fromContentsOf: value.utf8)
            line[end] = 0
            return line.baseAddress.flatMap { curl_slist_append(headerList, UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) }
        }
        guard let list else { throw .curl(CurlError(easy: CURLE_OUT_OF_MEMORY)) }
        headerList = list
    }

    /// The request's `PlainOptions`, or nil when it is not a plain GET.
    static func plainOptions(_ request: TransferRequest) -> PlainOptions? {
        guard request.method == "GET", case .none = request.body, request.httpAuthentication == nil, request.proxy == nil,
            request.unixSocketPath == nil,
            request.receiveBufferSize == nil, !request.connectOnly, request.tls.isPlain
        else { return nil }
        return PlainOptions(decodesContent: request.decodeContent)
    }

    /// - Parameter left: What a plain GET left set on the handle (this
    ///   transfer is a plain GET too); nil on a new or reset handle.
    private func configure(_ request: TransferRequest, userData: UnsafeMutableRawPointer, left: PlainOptions?) throws(TransferError) {
        try set(CURLOPT_URL, request.url)
        if left == nil {
            try set(CURLOPT_NOSIGNAL, 1)
            // The session follows redirects itself, so cookies, cache and delegates see every hop.
            try set(CURLOPT_FOLLOWLOCATION, 0)
            try set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
            try set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
            try set(CURLOPT_TCP_KEEPALIVE, 1)
            try set(CURLOPT_PROTOCOLS_STR, "http,https")
        }
        // Waiting for a connection that may multiplex only makes sense where
        // HTTP/2 can happen (TLS): over plain http a new request would wait
        // for the first response on the host's first connection.
        usesTLS = ResponseHeadParser.asciiCaseInsensitiveEqual(String(request.url.prefix(6)), "https:")
        if usesTLS || left != nil { try set(CURLOPT_PIPEWAIT, usesTLS ? 1 : 0) }
        if request.decodeContent != (left?.decodesContent ?? false) {
            let code = urlloading_easy_setopt_string(handle, CURLOPT_ACCEPT_ENCODING, request.decodeContent ? "" : nil)
            if code != CURLE_OK { throw .curl(CurlError(easy: code)) }
        }
        if let size = request.receiveBufferSize { try set(CURLOPT_BUFFERSIZE, size) }
        switch request.httpAuthentication {
        case .ntlm(let user, let password):
            try set(CURLOPT_HTTPAUTH, Int(urlloading_auth_ntlm))
            try set(CURLOPT_USERNAME, user)
            try set(CURLOPT_PASSWORD, password)
        case .negotiate(let user, let password):
            try set(CURLOPT_HTTPAUTH, Int(urlloading_auth_negotiate))
            try set(CURLOPT_USERNAME, user)
            try set(CURLOPT_PASSWORD, password)
        case nil:
            break
        }
        if request.connectOnly {
            connectOnly = true
            try set(CURLOPT_CONNECT_ONLY, 1)
        }
        decodesContent = request.decodeContent
        // 0 is libcurl's default: a plain GET's handle may carry another's value.
        if let connect = request.connectTimeout {
            try set(CURLOPT_CONNECTTIMEOUT_MS, max(1, milliseconds(connect)))
        } else if left != nil {
            try set(CURLOPT_CONNECTTIMEOUT_MS, 0)
        }
        // The idle timeout is the loop's (see `idleSeconds`): libcurl's low-speed
        // limit would also count the pauses of a reader that applies back-pressure.
        idleSeconds = request.idleTimeout.map { Double(milliseconds($0)) / 1000 }
        idleClockWaitsForSend = request.idleTimeoutCountsFromSend
        if let total = request.totalTimeout {
            try set(CURLOPT_TIMEOUT_MS, max(1, milliseconds(total)))
        } else if left != nil {
            try set(CURLOPT_TIMEOUT_MS, 0)
        }
        if let proxy = request.proxy {
            viaProxy = true
            try set(CURLOPT_PROXY, proxy)
            // The configuration's proxy is meant for every host: no_proxy from the environment does not apply.
            try set(CURLOPT_NOPROXY, "")
            // An https proxy's certificate is checked against the same trust roots as the servers'.
            if let caFile = request.tls.caFile { try set(CURLOPT_PROXY_CAINFO, caFile) }
        } else if left == nil {
            try set(CURLOPT_PROXY, "")
        }
        if let socket = request.unixSocketPath { try set(CURLOPT_UNIX_SOCKET_PATH, socket) }
        try configureTLS(request.tls)

        switch request.method {
        case "GET": try set(CURLOPT_HTTPGET, 1)
        case "HEAD": try set(CURLOPT_NOBODY, 1)
        default:
            if case .none = request.body {
                try set(CURLOPT_CUSTOMREQUEST, request.method)
            } else if request.method == "PUT" {
                // libcurl's upload path: no form Content-Type of its own.
                try set(CURLOPT_UPLOAD, 1)
                _ = urlloading_easy_setopt_off_t(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(bodyLength))
            } else {
                try set(CURLOPT_POST, 1)
                _ = urlloading_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bodyLength))
                if request.method != "POST" { try set(CURLOPT_CUSTOMREQUEST, request.method) }
            }
        }

        for field in request.headers {
            // "Name;" sends an empty value; "Name:" would remove curl's own field.
            try appendHeader(field.name, field.value.isEmpty ? ";" : ": ", field.value)
        }
        if hasBody, !request.headers.contains(where: { $0.name.caseInsensitiveCompare("Content-Type") == .orderedSame }) {
            // libcurl's POST adds "application/x-www-form-urlencoded": a body
            // goes out with the Content-Type its caller set, or none.
            try appendHeader("Content-Type", ":", "")
        }
        if hasBody, !request.headers.contains(where: { $0.name.caseInsensitiveCompare("Expect") == .orderedSame }) {
            // libcurl asks a large body's server for `100 Continue` and waits
            // a second for it; many servers never send one. As Apple's
            // session: no Expect unless the caller sets one.
            try appendHeader("Expect", ":", "")
        }
        if headerList != nil || left != nil { _ = urlloading_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList) }

        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer.bytes)
        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_PRIVATE, userData)
        _ = urlloading_easy_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, Transfer.headerCallback)
        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_HEADERDATA, userData)
        _ = urlloading_easy_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, Transfer.writeCallback)
        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, userData)
        _ = urlloading_easy_setopt_read_callback(handle, CURLOPT_READFUNCTION, Transfer.readCallback)
        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_READDATA, userData)
        // libcurl rewinds the body to send it again on a fresh connection
        // when a reused one turned out dead.
        _ = urlloading_easy_setopt_seek_callback(handle, CURLOPT_SEEKFUNCTION, Transfer.seekCallback)
        _ = urlloading_easy_setopt_pointer(handle, CURLOPT_SEEKDATA, userData)
        if hasBody {
            // Reports the body's bytes as they go; without a body there is
            // nothing to report, and the write callback counts activity.
            _ = urlloading_easy_setopt_xferinfo_callback(handle, CURLOPT_XFERINFOFUNCTION, Transfer.progressCallback)
            _ = urlloading_easy_setopt_pointer(handle, CURLOPT_XFERINFODATA, userData)
            try set(CURLOPT_NOPROGRESS, 0)
        }
    }

    private func configureTLS(_ tls: TransferRequest.TLS) throws(TransferError) {
        if let caFile = tls.caFile { try set(CURLOPT_CAINFO, caFile) }
        try set(CURLOPT_SSL_VERIFYPEER, tls.verifyPeer ? 1 : 0)
        try set(CURLOPT_SSL_VERIFYHOST, tls.verifyPeer ? 2 : 0)
        var version = Int(CURL_SSLVERSION_DEFAULT)
        switch tls.minimumVersion.map({ $0.0 * 10 + $0.1 }) {
        case 10: version = Int(CURL_SSLVERSION_TLSv1_0)
        case 11: version = Int(CURL_SSLVERSION_TLSv1_1)
        case 12: version = Int(CURL_SSLVERSION_TLSv1_2)
        case 13: version = Int(CURL_SSLVERSION_TLSv1_3)
        default: break
        }
        switch tls.maximumVersion.map({ $0.0 * 10 + $0.1 }) {
        case 10: version |= Int(CURL_SSLVERSION_MAX_TLSv1_0)
        case 11: version |= Int(CURL_SSLVERSION_MAX_TLSv1_1)
        case 12: version |= Int(CURL_SSLVERSION_MAX_TLSv1_2)
        case 13: version |= Int(CURL_SSLVERSION_MAX_TLSv1_3)
        default: break
        }
        try set(CURLOPT_SSLVERSION, version)
        if let certificate = tls.clientCertificateFile { try set(CURLOPT_SSLCERT, certificate) }
        if let key = tls.clientKeyFile { try set(CURLOPT_SSLKEY, key) }
        if let passphrase = tls.clientKeyPassphrase { try set(CURLOPT_KEYPASSWD, passphrase) }
        if let pin = tls.pinnedPublicKey { try set(CURLOPT_PINNEDPUBLICKEY, pin) }
        if tls.collectsCertificates {
            collectsCertificates = true
            try set(CURLOPT_CERTINFO, 1)
        }
    }

    /// Cleans up the handle and releases the callbacks' reference. After
    /// this, libcurl calls no callback of this transfer: the handle is off
    /// the multi handle and cleaned up.
    func close() {
        curl_easy_cleanup(handle)
        release()
    }

    /// Keeps the handle (off the multi handle) for another transfer and
    /// releases the callbacks' reference: reset to libcurl's defaults, or,
    /// after a plain GET that `succeeded`, with that GET's options left and
    /// every pointer to this transfer (its user data, its header list)
    /// cleared.
    func close(keepingHandle succeeded: Bool) -> CurlLoop.IdleHandle {
        let left = succeeded ? plain : nil
        if left != nil {
            _ = urlloading_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nil)
            for option in [CURLOPT_PRIVATE, CURLOPT_HEADERDATA, CURLOPT_WRITEDATA, CURLOPT_READDATA, CURLOPT_SEEKDATA] {
                _ = urlloading_easy_setopt_pointer(handle, option, nil)
            }
        } else {
            curl_easy_reset(handle)
        }
        release()
        return CurlLoop.IdleHandle(pointer: handle, errorBuffer: errorBuffer, plain: left)
    }

    private func release() {
        curl_slist_free_all(headerList)
        headerList = nil
        switch body {
        case .file(let file, _): try? file.close()
        case .pipe(let pipe): pipe.close()
        case .none, .data: break
        }
        body = .none
        retained?.release()
        retained = nil
    }

    var errorDetail: String { errorBuffer.text }

    // MARK: Callbacks (on the loop thread, inside curl_multi_perform)

    private static func transfer(_ user: UnsafeMutableRawPointer?) -> Transfer? {
        user.map { Unmanaged<Transfer>.fromOpaque($0).takeUnretainedValue() }
    }

    private static let headerCallback: curl_write_callback = { data, size, count, user in
        guard let transfer = transfer(user), let data else { return 0 }
        let length = size * count
        return transfer.headerLine(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
    }

    private static let writeCallback: curl_write_callback = { data, size, count, user in
        guard let transfer = transfer(user), let data else { return 0 }
        let length = size * count
        transfer.activity &+= 1
        guard transfer.headDelivered || transfer.deliverHead() else { return 0 }
        if transfer.observer.transferDidReceive(UnsafeRawBufferPointer(start: data, count: length)) {
            return length
        }
        transfer.paused = true
        return Int(CURL_WRITEFUNC_PAUSE)
    }

    private static let readCallback: curl_read_callback = { buffer, size, count, user in
        guard let transfer = transfer(user), let buffer else { return Int(CURL_READFUNC_ABORT) }
        let read = transfer.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
        if read > 0 && read <= size * count { transfer.bodyBytesRead += Int64(read) }
        return read
    }

    private static let seekCallback: curl_seek_callback = { user, offset, origin in
        guard let transfer = transfer(user), origin == SEEK_SET else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
        return transfer.seekBody(to: Int64(offset)) ? Int32(CURL_SEEKFUNC_OK) : Int32(CURL_SEEKFUNC_CANTSEEK)
    }

    private static let progressCallback: curl_xferinfo_callback = { user, _, downloaded, _, uploaded in
        guard let transfer = transfer(user) else { return 0 }
        let moved = Int64(downloaded) + Int64(uploaded)
        if moved != transfer.movedBytes {
            transfer.movedBytes = moved
            transfer.activity &+= 1
            if uploaded > 0 && transfer.hasBody {
                // libcurl counts a chunked body's framing too; the body's own
                // bytes are at most what the read callback handed over.
                let sent = min(Int64(uploaded), transfer.bodyBytesRead)
                transfer.observer.transferDidSendBody(sent: sent, total: transfer.bodyLength)
            }
        }
        return 0
    }

    /// Whether the idle timeout passed at `now` (nanoseconds). Called
    /// once per turn of the loop, so activity is timed to within a turn
    /// (the loop turns at least every 250 ms).
    func isIdle(at now: UInt64) -> Bool {
        guard let idleSeconds else { return false }
        if activity != seenActivity {
            seenActivity = activity
            lastActivity = now
            // Something moved: the request went (or its body is going).
            idleClockWaitsForSend = false
            return false
        }
        guard !paused else { return false }
        guard Double(now &- lastActivity) / 1e9 > idleSeconds else { return false }
        if idleClockWaitsForSend {
            // Read only once the timeout would pass: nothing was sent while
            // the transfer waited for a connection or connected.
            var sent = 0
            guard urlloading_easy_getinfo_long(handle, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK, sent > 0 else {
                lastActivity = now
                return false
            }
            // Sent at some point since the last look: counted from now.
            idleClockWaitsForSend = false
            lastActivity = now
            return false
        }
        return true
    }

    /// One line of the head; false stops the transfer.
    private func headerLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        activity &+= 1
        loopReceived?.count &+= 1
        switch head.line(bytes) {
        case .none, .endOfHead:
            return true
        case .endOfTrailers:
            deliverTrailers()
            return true
        case .interimHead(let interim):
            observer.transferDidReceiveInterimHead(interim)
            return true
        case .undecodableCoding:
            // libcurl fails a body in a coding it does not know; browsers
            // deliver it as it came, and so do we. libcurl reads this option
            // per body chunk, so turning it off here passes the body through
            // its (content and non-chunked transfer) decoders untouched.
            decodesContent = false
            try? set(CURLOPT_HTTP_CONTENT_DECODING, 0)
            plain = nil  // an option outside a plain GET's: the handle is reset after
            return true
        case .failed(let error):
            failure = error
            return false
        }
    }

    /// Hands a chunked body's trailers to the observer once, after the head:
    /// at the transfer's end (libcurl passes no blank line after them).
    func deliverTrailers() {
        guard !trailersDelivered, !head.trailers.isEmpty, deliverHead() else { return }
        trailersDelivered = true
        observer.transferDidReceiveTrailers(head.trailers)
    }

    /// Hands the final head to the observer once.
    @discardableResult
    func deliverHead() -> Bool {
        guard !headDelivered else { return true }
        guard let final = head.finalHead else {
            failure = .badResponse("no final status line")
            return false
        }
        headDelivered = true
        // While the connection is certainly open (see urlloading_tls_detail).
        if usesTLS {
            tlsVersion = urlloading_tls_detail(handle, 0).map { String(cString: $0) }
            tlsCipherSuite = urlloading_tls_detail(handle, 1).map { String(cString: $0) }
        }
        observer.transferDidReceiveHead(final)
        return true
    }

    /// Moves the body's read position (a stream cannot go back).
    private func seekBody(to offset: Int64) -> Bool {
        switch body {
        case .none:
            return offset == 0
        case .data(let data, _):
            guard offset >= 0, offset <= Int64(data.count) else { return false }
            body = .data(data, offset: Int(offset))
        case .file(let file, let start):
            guard offset >= 0, lseek(file.fileDescriptor, off_t(start + offset), SEEK_SET) == off_t(start + offset) else { return false }
        case .pipe:
            return false
        }
        bodyBytesRead = offset
        return true
    }

    private func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        switch body {
        case .none:
            return 0
        case .data(let data, let offset):
            let count = min(buffer.count, data.count - offset)
            guard count > 0 else { return 0 }
            data.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<(offset + count)]))
            }
            body = .data(data, offset: offset + count)
            return count
        case .file(let file, _):
            // Straight into libcurl's buffer: FileHandle.read(upToCount:)
            // reads 4 KiB per system call and copies through a Data. Never
            // past the body's length: the file may go on after it.
            let wanted = Int(clamping: max(0, min(Int64(buffer.count), bodyLength - bodyBytesRead)))
            while true {
                let count = read(file.fileDescriptor, buffer.baseAddress, wanted)
                if count >= 0 { return count }
                if errno == EINTR { continue }
                failure = .bodyUnreadable("reading the body file failed: \(String(cString: strerror(errno)))")
                return Int(CURL_READFUNC_ABORT)
            }
        case .pipe(let pipe):
            switch pipe.read(into: buffer) {
            case .bytes(let count): return count
            case .end: return 0
            // The producer is behind: the pipe's handler unpauses the transfer.
            case .wouldBlock: return Int(CURL_READFUNC_PAUSE)
            case .failed(let reason):
                failure = .bodyUnreadable("reading the body stream failed: \(reason)")
                return Int(CURL_READFUNC_ABORT)
            }
        }
    }
}

/// The memory a handle's CURLOPT_ERRORBUFFER names. libcurl keeps the
/// pointer and writes into it during later calls, so it must stay where it
/// is for as long as the transfer lives: a pointer made from an array with
/// `&` is valid only for the one call it is passed to.
final class ErrorBuffer {
    let bytes: UnsafeMutablePointer<CChar>
    private static let size = Int(CURL_ERROR_SIZE) + 1

    init() {
        bytes = .allocate(capacity: Self.size)
        bytes.initialize(repeating: 0, count: Self.size)
    }

    deinit { bytes.deallocate() }

    /// What libcurl wrote (it ends its message with a NUL; the last byte is
    /// never written, so the text ends within the buffer).
    var text: String { String(cString: bytes) }
}
