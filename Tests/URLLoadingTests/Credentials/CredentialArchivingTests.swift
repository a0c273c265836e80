import Foundation
import Testing
@testable import URLLoading

/// `NSKeyedArchiver` and `NSKeyedUnarchiver` with credentials, as code
/// written for Apple's `URLCredential` (which adopts `NSSecureCoding`) uses them.
@Suite struct CredentialArchivingTests {
    private static func archive(_ root: Any) throws -> Data {
        try NSKeyedArchiver.archivedData(withRootObject: root, requiringSecureCoding: true)
    }

    private static func unarchive(_ data: Data) throws -> Credential? {
        try NSKeyedUnarchiver.unarchivedObject(ofClass: ArchivedCredential.self, from: data)?.credential
    }

    private static func contains(_ data: Data, _ text: String) -> Bool {
        data.range(of: Data(text.utf8)) != nil
    }

    @Test("A credential archives with secure coding and comes back; a session's password stays out of the bytes unless asked for")
    func roundTrips() throws {
        let permanent = Credential(user: "ann", password: "kept-secret", persistence: .permanent)
        let permanentData = try Self.archive(permanent)
        #expect(try Self.unarchive(permanentData) == permanent, "a permanent credential is written down whole")

        let session = Credential(user: "bob", password: "session-secret", persistence: .forSession)
        let sessionData = try Self.archive(session)
        #expect(!Self.contains(sessionData, "session-secret"), "a for-session password must not reach plain bytes")
        let back = try #require(try Self.unarchive(sessionData))
        #expect(back.user == "bob" && back.password == "" && back.persistence == .forSession)

        let asked = try Self.archive(ArchivedCredential(session, includingSecret: true))
        #expect(try Self.unarchive(asked) == session)

        let identity = Credential(certificatePath: "/etc/c.pem", privateKeyPath: "/etc/k.pem", passphrase: "phrase", persistence: .none)
        let identityData = try Self.archive(identity)
        #expect(!Self.contains(identityData, "phrase"))
        #expect(try Self.unarchive(identityData) == Credential(certificatePath: "/etc/c.pem", privateKeyPath: "/etc/k.pem", persistence: .none))
        #expect(try Self.unarchive(Self.archive(Credential.serverTrust)) == .serverTrust)
        #expect("\(ArchivedCredential(session, includingSecret: true))".contains("session-secret") == false)
    }

    /// An archive of `credential` whose object table `change` edited, as
    /// a crafted file would be.
    private static func crafted(_ change: (inout [Any]) -> Void) throws -> Data {
        let archive = try archive(Credential(user: "ann", password: "pw", persistence: .permanent))
        var plist = try #require(try PropertyListSerialization.propertyList(from: archive, options: [], format: nil) as? [String: Any])
        var objects = try #require(plist["$objects"] as? [Any])
        change(&objects)
        plist["$objects"] = objects
        return try PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0)
    }

    @Test("A crafted archive (an unknown kind or persistence, a missing user) is an error, never a trap")
    func craftedArchivesFail() throws {
        func replacing(_ old: String, with new: String) -> (inout [Any]) -> Void {
            { objects in objects = objects.map { ($0 as? String) == old ? new : $0 } }
        }
        let removingUser: (inout [Any]) -> Void = { objects in
            objects = objects.map { object in
                guard var fields = object as? [String: Any], fields["user"] != nil else { return object }
                fields["user"] = nil
                return fields
            }
        }
        #expect(try Self.unarchive(Self.crafted { _ in }) == Credential(user: "ann", password: "pw", persistence: .permanent))
        for change in [replacing("password", with: "certificate"), replacing("permanent", with: "forever"), removingUser] {
            #expect(throws: (any Error).self) { try Self.unarchive(Self.crafted(change)) }
        }
    }
}
