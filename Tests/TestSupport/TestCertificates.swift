import Foundation
import NIOSSL
import Locking

/// A certificate authority and identities made for the tests, with Debian's
/// `openssl` command, once per process, in a temporary directory.
///
/// The server identity is issued for `localhost` and `127.0.0.1`; the client
/// identity is for tests of client certificates. Nothing is committed: keys
/// are new every run and valid for a day.
public struct TestCertificates: Sendable {
    /// A certificate and its private key, as PEM files.
    public struct ServerIdentity: Sendable {
        public let certificatePath: String
        public let privateKeyPath: String
        /// Whether the server asks for and verifies a client certificate
        /// issued by `clientCAPath`.
        public let clientCAPath: String?
        /// Whether the server refuses every TLS version before 1.3.
        public var requiresTLS13 = false

        /// The same identity, requiring a client certificate from the test CA.
        public func requiringClientCertificate(issuedBy caPath: String) -> ServerIdentity {
            var identity = ServerIdentity(certificatePath: certificatePath, privateKeyPath: privateKeyPath, clientCAPath: caPath)
            identity.requiresTLS13 = requiresTLS13
            return identity
        }

        /// The same identity, speaking TLS 1.3 only.
        public func requiringTLS13() -> ServerIdentity {
            var identity = self
            identity.requiresTLS13 = true
            return identity
        }

        func makeServerContext() throws -> NIOSSLContext {
            let chain = try NIOSSLCertificate.fromPEMFile(certificatePath).map { NIOSSLCertificateSource.certificate($0) }
            let key = try NIOSSLPrivateKey(file: privateKeyPath, format: .pem)
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
            if let clientCAPath {
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .file(clientCAPath)
            }
            if requiresTLS13 { configuration.minimumTLSVersion = .tlsv13 }
            return try NIOSSLContext(configuration: configuration)
        }
    }

    /// The directory holding every file.
    public let directory: String
    /// The test CA's certificate, to give a client as its trust root.
    public let caCertificatePath: String
    /// The origin's identity, signed by the test CA.
    public let server: ServerIdentity
    /// A client identity signed by the test CA (certificate and key).
    public let clientCertificatePath: String
    public let clientPrivateKeyPath: String

    private static let made = Lock<Result<TestCertificates, TestOriginError>?>(nil)

    /// The process's certificates, made on first use.
    ///
    /// - Throws: `TestOriginError` when `openssl` fails (its output is in the message).
    public static func shared() throws -> TestCertificates {
        try made.withLock { made -> Result<TestCertificates, TestOriginError> in
            if let made { return made }
            let result = Result { () throws(TestOriginError) -> TestCertificates in try make() }
            made = result
            return result
        }.get()
    }

    /// The folder `make()` created, removed when the process exits: a
    /// `swift test` run by hand has no `TMPDIR` of its own that `tools/test`
    /// removes afterwards.
    private static let madeDirectory = Lock<String?>(nil)

    private static func make() throws(TestOriginError) -> TestCertificates {
        let directory = NSTemporaryDirectory() + "urlloading-test-ca-\(getpid())-\(UUID().uuidString.prefix(8))"
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw TestOriginError(message: "cannot create \(directory): \(error)")
        }
        madeDirectory.withLock { $0 = directory }
        atexit {
            if let directory = TestCertificates.madeDirectory.withLock({ $0 }) {
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
        func path(_ name: String) -> String { directory + "/" + name }
        let ext = path("server.ext")
        let serverExtensions = """
            basicConstraints=CA:FALSE
            keyUsage=digitalSignature,keyEncipherment
            extendedKeyUsage=serverAuth
            subjectAltName=DNS:localhost,IP:127.0.0.1
            """
        let clientExt = path("client.ext")
        let clientExtensions = """
            basicConstraints=CA:FALSE
            keyUsage=digitalSignature
            extendedKeyUsage=clientAuth
            """
        do {
            try serverExtensions.write(toFile: ext, atomically: true, encoding: .utf8)
            try clientExtensions.write(toFile: clientExt, atomically: true, encoding: .utf8)
        } catch {
            throw TestOriginError(message: "cannot write extension files: \(error)")
        }
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2",
                "-subj", "/CN=URLLoading Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("server.key"), "-out", path("server.csr"), "-subj", "/CN=localhost",
            ],
            [
                "x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("server.pem"), "-days", "1", "-extfile", ext,
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", path("client.key"), "-out", path("client.csr"), "-subj", "/CN=URLLoading Test Client",
            ],
            [
                "x509", "-req", "-in", path("client.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
                "-CAcreateserial", "-out", path("client.pem"), "-days", "1", "-extfile", clientExt,
            ],
        ]
        for arguments in steps {
            try run(openssl: arguments)
        }
        return TestCertificates(
            directory: directory, caCertificatePath: path("ca.pem"),
            server: ServerIdentity(certificatePath: path("server.pem"), privateKeyPath: path("server.key"), clientCAPath: nil),
            clientCertificatePath: path("client.pem"), clientPrivateKeyPath: path("client.key"))
    }

    private static func run(openssl arguments: [String]) throws(TestOriginError) {
        let result: ChildProcess.Result
        do {
            result = try ChildProcess.start(URL(fileURLWithPath: "/usr/bin/openssl"), arguments).waitBlocking()
        } catch {
            throw TestOriginError(message: "cannot run /usr/bin/openssl (install Debian's openssl package): \(error)")
        }
        guard result.status == 0 else {
            throw TestOriginError(
                message: "openssl \(arguments.prefix(2).joined(separator: " ")) failed: \(result.standardOutput)\(result.standardError)")
        }
    }
}
