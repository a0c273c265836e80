import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Locking

/// The memory tier: stored responses by primary key (each key holding its
/// Vary variants), evicting the least recently used keys when their byte
/// cost passes the capacity.
final class MemoryTier: Sendable {
    /// A stored response as the tier holds it: one immutable object, so a
    /// hit retains one reference, with what a hit asks of it worked out once.
    final class Entry: Sendable {
        let response: StoredResponse
        /// Whether the request's fields select this entry or another
        /// variant (Vary, or the credentials it was stored for); when not,
        /// any request for the key takes it.
        let selectsByRequest: Bool
        /// What `cachedResponse(for:)` hands out, once built.
        private let handedOut = Lock<CachedResponse?>(nil)

        init(_ response: StoredResponse) {
            self.response = response
            selectsByRequest =
                response.entry.responseHeaders.contains("Vary")
                || response.entry.requestHeaders.contains(StoredResponse.credentialsField)
        }

        /// What `cachedResponse(for:)` hands out: built on the first hand-out,
        /// the same `HTTPURLResponse` and body after (as Apple's URLCache
        /// hands out the objects it holds); building the response costs
        /// several microseconds, most of a memory hit.
        func cachedResponse() -> CachedResponse? {
            if let built = handedOut.withLock({ $0 }) { return built }
            // Built outside the lock: two first hand-outs at once build two and keep the first.
            guard let http = response.httpResponse(), let data = try? response.wholeBody() else { return nil }
            let made = CachedResponse(response: http, data: data, storedUserInfo: response.userInfo, storagePolicy: response.storagePolicy)
            return handedOut.withLock { kept in
                if let kept { return kept }
                kept = made
                return made
            }
        }
    }

    private let state: Lock<LRU>

    init(capacity: Int) {
        state = Lock(LRU(capacity: max(0, capacity)))
    }

    var capacity: Int {
        get { state.withLock { $0.capacity } }
        set {
            state.withLock {
                $0.capacity = max(0, newValue); $0.evictToCapacity()
            }
        }
    }

    var usage: Int { state.withLock { $0.usage } }
    var count: Int { state.withLock { $0.index.count } }

    /// The variants stored under `key`, marking them most recently used.
    func entries(for key: String) -> [Entry] {
        state.withLock { $0.get(key) ?? [] }
    }

    /// The variants stored under `key`, marking them most recently used.
    func variants(for key: String) -> [StoredResponse] {
        entries(for: key).map(\.response)
    }

    /// Whether the 5% rule lets a response of `cost` bytes in.
    func admits(_ cost: Int) -> Bool {
        state.withLock { $0.admits(cost) }
    }

    /// Stores `response`, replacing the variant with the same secondary key.
    /// Returns false when the 5% rule keeps it out.
    @discardableResult
    func store(_ response: StoredResponse) -> Bool {
        store(Entry(response))
    }

    /// Stores `entry`, as `store(_:)` its response.
    @discardableResult
    func store(_ entry: Entry) -> Bool {
        let response = entry.response
        return state.withLock { lru in
            guard lru.admits(response.cost) else {
                lru.remove(response.key)
                return false
            }
            var variants = lru.get(response.key) ?? []
            variants.removeAll { $0.response.variant == response.variant }
            variants.append(entry)
            lru.set(response.key, variants)
            return true
        }
    }

    func remove(key: String) {
        state.withLock { $0.remove(key) }
    }

    func remove(key: String, variant: String) {
        state.withLock { lru in
            guard var variants = lru.get(key) else { return }
            variants.removeAll { $0.response.variant == variant }
            if variants.isEmpty { lru.remove(key) } else { lru.set(key, variants) }
        }
    }

    func removeAll() {
        state.withLock { $0.removeAll() }
    }

    /// Removes the entries stored at or after `date` (seconds since 1970).
    func removeStored(since date: Double) {
        state.withLock { lru in
            for key in Array(lru.index.keys) {
                guard let variants = lru.peek(key) else { continue }
                let kept = variants.filter { $0.response.storedAt < date }
                if kept.isEmpty { lru.remove(key) } else if kept.count != variants.count { lru.set(key, kept) }
            }
        }
    }

    /// A least-recently-used map with byte costs: a doubly linked list over
    /// an array of slots, so every operation is O(1) and eviction never scans.
    struct LRU {
        struct Slot {
            var key: String
            var variants: [Entry]
            var cost: Int
            var newer: Int
            var older: Int
        }

        var capacity: Int
        private(set) var usage = 0
        private(set) var index: [String: Int] = [:]
        private var slots: [Slot] = []
        private var free: [Int] = []
        private var newest = -1
        private var oldest = -1

        init(capacity: Int) { self.capacity = capacity }

        /// The 5% rule: a response is kept only if it is no larger than 5%
        /// of the capacity; a capacity of 0 keeps nothing.
        func admits(_ cost: Int) -> Bool { capacity > 0 && cost <= capacity / 20 }

        // An empty tier (a capacity of 0, or nothing stored yet) answers
        // without hashing the key: every disk hit asks it first.
        mutating func get(_ key: String) -> [Entry]? {
            guard !index.isEmpty, let slot = index[key] else { return nil }
            moveToNewest(slot)
            return slots[slot].variants
        }

        func peek(_ key: String) -> [Entry]? {
            index[key].map { slots[$0].variants }
        }

        mutating func set(_ key: String, _ variants: [Entry]) {
            let cost = variants.reduce(0) { $0 + $1.response.cost }
            if let slot = index[key] {
                usage += cost - slots[slot].cost
                slots[slot].variants = variants
                slots[slot].cost = cost
                moveToNewest(slot)
            } else {
                let node = Slot(key: key, variants: variants, cost: cost, newer: -1, older: newest)
                let slot: Int
                if let reused = free.popLast() {
                    slots[reused] = node
                    slot = reused
                } else {
                    slots.append(node)
                    slot = slots.count - 1
                }
                if newest >= 0 { slots[newest].newer = slot }
                newest = slot
                if oldest < 0 { oldest = slot }
                index[key] = slot
                usage += cost
            }
            evictToCapacity()
        }

        mutating func remove(_ key: String) {
            guard !index.isEmpty, let slot = index.removeValue(forKey: key) else { return }
            unlink(slot)
            usage -= slots[slot].cost
            slots[slot].variants = []
            slots[slot].cost = 0
            free.append(slot)
        }

        mutating func removeAll() {
            self = LRU(capacity: capacity)
        }

        mutating func evictToCapacity() {
            while usage > capacity, oldest >= 0 {
                remove(slots[oldest].key)
            }
        }

        private mutating func unlink(_ slot: Int) {
            let (newer, older) = (slots[slot].newer, slots[slot].older)
            if newer >= 0 { slots[newer].older = older } else { newest = older }
            if older >= 0 { slots[older].newer = newer } else { oldest = newer }
            slots[slot].newer = -1
            slots[slot].older = -1
        }

        private mutating func moveToNewest(_ slot: Int) {
            guard slot != newest else { return }
            unlink(slot)
            slots[slot].older = newest
            if newest >= 0 { slots[newest].newer = slot }
            newest = slot
            if oldest < 0 { oldest = slot }
        }
    }
}
