import CSecret
import Foundation
import Locking

/// The desktop keyring through the freedesktop.org Secret Service (GNOME
/// Keyring, KeePassXC, KWallet) over libsecret, loaded when first needed:
/// one item per protection space and user, with the attributes host, port, protocol,
/// realm, method, proxy and user, the store the item belongs to (`store`,
/// the store's data directory, so that two applications' stores stay
/// apart) and `default` ("1" for the space's default credential); the
/// password is the secret, and the label one a person recognises
/// ("URLLoading: alice at https://example.com:443").
///
/// Every call is bounded in time (`timeout`): a locked collection that
/// would prompt, or a service that hangs, ends the call with an error
/// instead of blocking the caller. Passwords never appear in errors.
final class SecretServiceKeyring: Sendable {
    /// An item as the keyring holds it.
    struct Item: Equatable {
        var space: ProtectionSpace
        var user: String
        /// Nil when the item is locked.
        var password: String?
        var isDefault = false
    }

    /// Why a keyring call failed (the service's words, never a secret).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The bound on each call to the service.
    let timeout: TimeInterval
    /// The value of the `store` attribute of this keyring's items.
    let scope: String

    init(scope: String, timeout: TimeInterval = 5) {
        self.scope = scope
        self.timeout = min(max(timeout, 0.05), 300)
    }

    /// Why libsecret cannot be used (it is loaded at the first call that
    /// needs it, so a process that never asks for the keyring links none of
    /// it); nil once it is loaded.
    static var libraryMissing: String? {
        var message: UnsafePointer<CChar>?
        guard urlloading_secret_load(&message) == 0 else { return nil }
        return message.map { String(cString: $0) } ?? "libsecret cannot be loaded"
    }

    /// Whether a session bus is there, libsecret can be loaded, and a
    /// Secret Service answers on the bus (within the bound).
    static func available(environment: [String: String] = ProcessInfo.processInfo.environment, timeout: TimeInterval = 2) -> Bool {
        unavailability(environment: environment, timeout: timeout) == nil
    }

    /// Why the keyring cannot be used, nil when it can. No bus address
    /// means no call (libdbus would otherwise try to launch a bus) and
    /// libsecret is not even loaded.
    static func unavailability(environment: [String: String] = ProcessInfo.processInfo.environment, timeout: TimeInterval = 2) -> String? {
        let hasBus =
            environment["DBUS_SESSION_BUS_ADDRESS"].map { !$0.isEmpty }
            ?? environment["XDG_RUNTIME_DIR"].map { FileManager.default.fileExists(atPath: $0 + "/bus") } ?? false
        guard hasBus else { return "no Secret Service answers on a session bus" }
        if let missing = libraryMissing { return missing }
        let keyring = SecretServiceKeyring(scope: "", timeout: timeout)
        let answers = (try? keyring.bounded { cancellable, message in urlloading_secret_service_ping(cancellable, message) == 1 }) == true
        return answers ? nil : "no Secret Service answers on the session bus"
    }

    /// Stores (or replaces) the password of `user` in `space`: the item
    /// with the other `default` value goes first, so one item is left.
    func store(user: String, password: String, for space: ProtectionSpace, isDefault: Bool = false) throws(Failure) {
        let label = "URLLoading: \(user) at \(space.isProxy ? "proxy " : "")\(space.protocol)://\(space.host):\(space.port)\(space.realm.map { " (\($0))" } ?? "")"
        let other = attributePairs(space, user: user) + [("default", isDefault ? "0" : "1")]
        if try bounded({ cancellable, message in Self.withAttributes(other) { urlloading_secret_clear($0, cancellable, message) } }) < 0 {
            throw Failure(description: "the keyring did not replace the item")
        }
        let attributes = attributePairs(space, user: user) + [("default", isDefault ? "1" : "0")]
        let stored = try bounded { cancellable, message in
            Self.withAttributes(attributes) { urlloading_secret_store($0, label, password, cancellable, message) == 1 }
        }
        if !stored { throw Failure(description: "the keyring did not store the item") }
    }

    /// The password of `user` in `space`; nil when there is none.
    func password(user: String, for space: ProtectionSpace) throws(Failure) -> String? {
        let pairs = attributePairs(space, user: user)
        return try bounded { cancellable, message in
            Self.withAttributes(pairs) { attributes in
                guard let found = urlloading_secret_lookup(attributes, cancellable, message) else { return nil }
                defer { urlloading_secret_free_string(found) }
                return String(cString: found)
            }
        }
    }

    /// Removes the item of `user` in `space`; false when there was none.
    @discardableResult
    func remove(user: String, for space: ProtectionSpace) throws(Failure) -> Bool {
        let pairs = attributePairs(space, user: user)
        return try bounded { cancellable, message in
            Self.withAttributes(pairs) { urlloading_secret_clear($0, cancellable, message) == 1 }
        }
    }

    /// Removes every item of this store.
    func removeAll() throws(Failure) {
        let pairs = [("store", scope)]
        _ = try bounded { cancellable, message in Self.withAttributes(pairs) { urlloading_secret_clear($0, cancellable, message) } }
    }

    /// The items of this store (of one space when given), with the number
    /// of items the keyring holds locked: a locked collection shows only
    /// hashed attributes, so those cannot say whose they are.
    func items(in space: ProtectionSpace? = nil) throws(Failure) -> (items: [Item], locked: Int) {
        let query = space.map { attributePairs($0, user: "").filter { $0.0 != "user" } } ?? [("store", scope)]
        return try bounded { cancellable, message in
            let found = Self.withAttributes(query) { urlloading_secret_search($0, cancellable, message) }
            guard let list = found else { return ([], 0) }
            defer { urlloading_secret_items_free(list) }
            var items: [Item] = []
            var locked = 0
            var node: OpaquePointer? = list
            while let current = node {
                node = urlloading_secret_next(current)
                let secret = urlloading_secret_item_password(current, cancellable)
                defer { urlloading_secret_free_string(secret) }
                guard let secret else {
                    locked += 1
                    continue
                }
                guard let attributes = urlloading_secret_item_attributes(current) else { continue }
                defer { urlloading_secret_attributes_free(attributes) }
                // An item someone else made under our schema's name is left alone.
                if var item = Self.item(attributes) {
                    item.password = String(cString: secret)
                    items.append(item)
                }
            }
            return (items, locked)
        }
    }

    // MARK: Plumbing

    /// Runs `call` on a thread of its own with a cancellable that a timer
    /// cancels after `timeout`; a message the call left becomes the error.
    /// libsecret does not always return when cancelled (a call waiting on
    /// a prompt of a service that went away waits for its answer forever):
    /// a call still running a second after its cancel is left to its
    /// thread, and every later call of the process fails at once.
    private func bounded<T: Sendable>(
        _ call: @escaping @Sendable (OpaquePointer?, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> T
    ) throws(Failure) -> T {
        if let reason = Self.libraryMissing { throw Failure(description: reason) }
        if let stuck = Self.stuckCall.withLock({ $0 }) { throw Failure(description: stuck) }
        guard let cancellable = urlloading_cancellable_new() else { throw Failure(description: "GLib could not make a cancellable") }
        let handle = CancellableHandle(cancellable)
        let timer = DispatchWorkItem { handle.cancel() }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
        let outcome = CallOutcome<T>()
        Thread.detachNewThread {
            var message: UnsafeMutablePointer<CChar>?
            let result = call(handle.pointer, &message)
            handle.release()
            let text = message.map { String(cString: $0) }
            urlloading_secret_free_string(message)
            outcome.finish(result, message: text)
        }
        let ended = outcome.wait(until: .now() + timeout + Self.cancelGrace)
        timer.cancel()
        guard let (result, text) = ended else {
            let stuck = "the keyring did not answer within \(timeout) s, nor end its call when cancelled; it is not asked again in this process"
            Self.stuckCall.withLock { $0 = stuck }
            throw Failure(description: stuck)
        }
        if let text {
            throw Failure(description: handle.wasCancelled ? "the keyring did not answer within \(timeout) s (\(text))" : text)
        }
        return result
    }

    /// How long a cancelled call may take to return before it is left running.
    private static let cancelGrace: TimeInterval = 1
    /// Why calls fail at once: an earlier call never returned.
    private static let stuckCall = Lock<String?>(nil)

    private static func withAttributes<T>(_ pairs: [(String, String)], _ body: (OpaquePointer?) -> T) -> T {
        let attributes = urlloading_secret_attributes()
        defer { urlloading_secret_attributes_free(attributes) }
        for (name, value) in pairs { urlloading_secret_attribute_set(attributes, name, value) }
        return body(attributes)
    }

    /// The attributes that name an item, whichever its `default`.
    func attributePairs(_ space: ProtectionSpace, user: String) -> [(String, String)] {
        [
            ("host", space.host), ("port", "\(space.port)"), ("protocol", space.protocol), ("realm", space.realm ?? ""),
            ("method", space.authenticationMethod.rawValue), ("proxy", space.isProxy ? "1" : "0"), ("user", user), ("store", scope),
        ]
    }

    /// An item from its attributes; nil when they do not describe one (an
    /// item someone else made under our schema name, a port out of range).
    private static func item(_ attributes: OpaquePointer) -> Item? {
        func value(_ name: String) -> String? { urlloading_secret_attribute_get(attributes, name).map { String(cString: $0) } }
        guard value("xdg:schema") == "org.urlloading.Credential", let host = value("host"), !host.isEmpty, let portText = value("port"), portText.utf8.count <= 5, let port = Int(portText),
            (1...65535).contains(port), let scheme = value("protocol"), let user = value("user")
        else { return nil }
        let realm = value("realm").flatMap { $0.isEmpty ? nil : $0 }
        let method = ProtectionSpace.AuthenticationMethod(rawValue: value("method") ?? "default")
        let space = ProtectionSpace(host: host, port: port, protocol: scheme, realm: realm, authenticationMethod: method, isProxy: value("proxy") == "1")
        return Item(space: space, user: user, isDefault: value("default") == "1")
    }
}

/// The end of a call running on its own thread, awaited with a bound.
private final class CallOutcome<T: Sendable>: Sendable {
    private let ended = DispatchSemaphore(value: 0)
    private let value = Lock<(result: T, message: String?)?>(nil)

    func finish(_ result: T, message: String?) {
        value.withLock { $0 = (result, message) }
        ended.signal()
    }

    /// The call's result and message; nil when it had not ended by `deadline`.
    func wait(until deadline: DispatchTime) -> (T, String?)? {
        guard ended.wait(timeout: deadline) == .success else { return nil }
        return value.withLock { $0 }
    }
}

/// A GCancellable shared with the timer that may cancel it.
private final class CancellableHandle: @unchecked Sendable {
    // GCancellable is thread-safe (GLib's documentation); the lock guards
    // only the release against a late timer.
    private let lock = NSLock()
    /// The cancellable, for the call only (valid until `release`).
    let pointer: OpaquePointer
    private var released = false
    private var cancelled = false
    /// Whether the timer cancelled the call.
    var wasCancelled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return cancelled
    }

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    func cancel() {
        lock.lock()
        defer { lock.unlock() }
        guard !released else { return }
        cancelled = true
        urlloading_cancellable_cancel(pointer)
    }

    func release() {
        lock.lock()
        defer { lock.unlock() }
        if !released { urlloading_cancellable_free(pointer) }
        released = true
    }
}
