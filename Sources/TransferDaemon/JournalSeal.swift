import CCrypto
import Foundation
@_spi(Tools) package import URLLoading
#if canImport(Glibc)
import Glibc
#endif

/// Keeps the journal's secrets out of plain text: the
/// values of `Authorization`, `Proxy-Authorization`, `Cookie` and
/// `Set-Cookie` fields, and a URL holding a password or a secret query
/// value, are stored sealed with AES-256-GCM under a key of their own in a
/// 0600 file beside the journal. A copy of the journal alone (a backup, a
/// bug report, `strings`) shows none of them; the user's own processes,
/// which may read the key, can.
package struct JournalSeal: Sendable {
    /// What every sealed value starts with (then base64 of nonce, ciphertext, tag).
    static let prefix = "sealed:v1:"
    static let keyLength = 32
    static let nonceLength = 12
    static let tagLength = 16

    private let key: [UInt8]

    /// Reads the key at `path`, or makes a new one there when `create` and
    /// there is none (random, 0600, never replacing a file).
    ///
    /// - Throws: `BackgroundWireError` when the key cannot be read or made, or
    ///   the file is not a private regular file of this user holding a key.
    package init(keyPath path: String, create: Bool) throws(BackgroundWireError) {
        let descriptor = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if descriptor < 0, errno == ENOENT, create {
            key = try Self.makeKey(path)
            return
        }
        guard descriptor >= 0 else { throw BackgroundWireError("cannot open the journal's key \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else {
            throw BackgroundWireError("the journal's key \(path) is not a private file of this user (0600): remove it")
        }
        var bytes = [UInt8](repeating: 0, count: Self.keyLength + 1)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        guard count == Self.keyLength else { throw BackgroundWireError("the journal's key \(path) is damaged (\(count) bytes)") }
        key = Array(bytes.prefix(Self.keyLength))
    }

    private static func makeKey(_ path: String) throws(BackgroundWireError) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: keyLength)
        guard RAND_bytes(&key, Int32(keyLength)) == 1 else { throw BackgroundWireError("no random numbers for the journal's key") }
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BackgroundWireError("cannot create the journal's key \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(descriptor) }
        let written = key.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        guard written == keyLength, fsync(descriptor) == 0 else {
            unlink(path)
            throw BackgroundWireError("cannot write the journal's key \(path): \(String(cString: strerror(errno)))")
        }
        return key
    }

    /// Whether `text` is a sealed value.
    static func isSealed(_ text: String) -> Bool { text.hasPrefix(prefix) }

    /// `text` sealed under the key.
    package func seal(_ text: String) throws(BackgroundWireError) -> String {
        var nonce = [UInt8](repeating: 0, count: Self.nonceLength)
        guard RAND_bytes(&nonce, Int32(Self.nonceLength)) == 1 else { throw BackgroundWireError("no random numbers to seal a value") }
        let plain = Array(text.utf8)
        guard let context = EVP_CIPHER_CTX_new() else { throw BackgroundWireError("OpenSSL could not make a cipher context") }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plain.count + Self.tagLength)
        var tag = [UInt8](repeating: 0, count: Self.tagLength)
        var length: Int32 = 0
        var final: Int32 = 0
        let ok =
            EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1
            && EVP_EncryptUpdate(context, &output, &length, plain, Int32(plain.count)) == 1
            && output.withUnsafeMutableBufferPointer { buffer in
                EVP_EncryptFinal_ex(context, buffer.baseAddress.map { $0 + Int(length) }, &final) == 1
            }
            && ccrypto_gcm_get_tag(context, Int32(Self.tagLength), &tag) == 1
        guard ok else { throw BackgroundWireError("OpenSSL could not seal a value") }
        let sealed = nonce + output.prefix(Int(length + final)) + tag
        return Self.prefix + Data(sealed).base64EncodedString()
    }

    /// The text of a sealed value; a value that is not sealed comes back
    /// as it is; nil when it was sealed under another key or damaged.
    package func unseal(_ text: String) -> String? {
        guard Self.isSealed(text) else { return text }
        guard let data = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))), data.count >= Self.nonceLength + Self.tagLength else {
            return nil
        }
        let bytes = [UInt8](data)
        let nonce = Array(bytes.prefix(Self.nonceLength))
        let tag = Array(bytes.suffix(Self.tagLength))
        let cipher = Array(bytes[Self.nonceLength..<(bytes.count - Self.tagLength)])
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: cipher.count + Self.tagLength)
        var length: Int32 = 0
        var final: Int32 = 0
        var expected = tag
        let ok =
            EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key, nonce) == 1
            && EVP_DecryptUpdate(context, &output, &length, cipher, Int32(cipher.count)) == 1
            && ccrypto_gcm_set_tag(context, Int32(Self.tagLength), &expected) == 1
            && output.withUnsafeMutableBufferPointer { buffer in
                EVP_DecryptFinal_ex(context, buffer.baseAddress.map { $0 + Int(length) }, &final) == 1
            }
        guard ok else { return nil }
        return String(decoding: output.prefix(Int(length + final)), as: UTF8.self)
    }
}

extension JournalSeal {
    /// Header fields whose values are sealed in the journal.
    static let secretFields: Set<String> = ["authorization", "proxy-authorization", "cookie", "set-cookie"]

    /// Whether a URL holds a password or a secret query value (the cache's rule for showing URLs).
    static func holdsSecret(_ url: String) -> Bool {
        CachedURL.displayed(url) != url
    }

    /// A request with its secrets sealed.
    func sealed(_ spec: TaskSpec) throws(BackgroundWireError) -> TaskSpec {
        var copy = spec
        copy.request.headers = try sealed(spec.request.headers)
        if Self.holdsSecret(spec.request.url) { copy.request.url = try seal(spec.request.url) }
        if var proxies = spec.proxies {
            // A proxy with user information (`user:password@host`, with or without a scheme).
            for path in Self.proxyPaths {
                if let text = proxies[keyPath: path], text.contains("@") { proxies[keyPath: path] = try seal(text) }
            }
            copy.proxies = proxies
        }
        return copy
    }

    /// The proxies of a task's rules, each a URL that may carry credentials.
    private static var proxyPaths: [WritableKeyPath<ProxyRules, String?>] { [\.http, \.https, \.all] }

    /// A response head with its cookies sealed.
    func sealed(_ response: ResponseSpec) throws(BackgroundWireError) -> ResponseSpec {
        var copy = response
        copy.headers = try sealed(response.headers)
        if Self.holdsSecret(response.url) { copy.url = try seal(response.url) }
        return copy
    }

    private func sealed(_ headers: [[String]]) throws(BackgroundWireError) -> [[String]] {
        var result: [[String]] = []
        result.reserveCapacity(headers.count)
        for pair in headers {
            if pair.count == 2, Self.secretFields.contains(pair[0].lowercased()) {
                result.append([pair[0], try seal(pair[1])])
            } else {
                result.append(pair)
            }
        }
        return result
    }

    /// The request as it was; fields that cannot be unsealed (the key was
    /// lost or replaced) are left out, and named in `lost`.
    func unsealed(_ spec: TaskSpec, lost: inout [String]) -> TaskSpec {
        var copy = spec
        copy.request.headers = unsealed(spec.request.headers, lost: &lost)
        if JournalSeal.isSealed(spec.request.url) {
            if let url = unseal(spec.request.url) {
                copy.request.url = url
            } else {
                lost.append("the URL")
            }
        }
        if var proxies = spec.proxies {
            for path in Self.proxyPaths {
                guard let text = proxies[keyPath: path], JournalSeal.isSealed(text) else { continue }
                // Without its credentials the proxy would refuse the transfer: left out, and said.
                proxies[keyPath: path] = unseal(text)
                if proxies[keyPath: path] == nil { lost.append("a proxy") }
            }
            copy.proxies = proxies
        }
        return copy
    }

    func unsealed(_ response: ResponseSpec, lost: inout [String]) -> ResponseSpec {
        var copy = response
        copy.headers = unsealed(response.headers, lost: &lost)
        if JournalSeal.isSealed(response.url) { copy.url = unseal(response.url) ?? "" }
        return copy
    }

    private func unsealed(_ headers: [[String]], lost: inout [String]) -> [[String]] {
        headers.compactMap { pair in
            guard pair.count == 2, JournalSeal.isSealed(pair[1]) else { return pair }
            guard let value = unseal(pair[1]) else {
                lost.append(pair[0])
                return nil
            }
            return [pair[0], value]
        }
    }
}
