/// A map from keys to values kept in three arrays (keys, values, and slots
/// probed in turn), for the maps a store fills while it opens and serves
/// its first lookups: its prepared statements, the rows a lookup used.
///
/// Why not `Dictionary`: the first dictionary of a key type in a process
/// makes the Swift runtime look up the key's `Hashable` conformance by
/// scanning every conformance record of every loaded library, 0.1–0.4 ms
/// each time, about a tenth of opening a cache and more than a whole
/// lookup. The type itself has no requirement on its key (its methods do),
/// so its callers hand it the conformance and the runtime never looks it up.
///
/// Keys are only added or updated, or all removed at once.
///
/// Public and inlinable, unlike the rest of this module: the toolchain does
/// not hand a `package` declaration's body to other modules, so URLLoading
/// would call this code unspecialised, with a run-time type look-up in each
/// call of a lookup or a store.
public struct KeyedTable<Key, Value> {
    @usableFromInline var keys: [Key] = []
    @usableFromInline var values: [Value] = []
    /// For each slot, an index into `keys`, or -1 when the slot is free. A
    /// power of two long and at most half full, so a probe always ends.
    @usableFromInline var slots: [Int] = []

    /// An empty table.
    @inlinable public init() {}

    /// How many keys the table holds.
    @inlinable public var count: Int { keys.count }

    /// Whether the table holds no key.
    @inlinable public var isEmpty: Bool { keys.isEmpty }

    /// Removes every key.
    @inlinable public mutating func removeAll() {
        self = KeyedTable()
    }
}

extension KeyedTable where Key: Hashable {
    /// The value for `key`, or nil.
    @inlinable public subscript(key: Key) -> Value? {
        guard let index = index(of: key) else { return nil }
        return values[index]
    }

    /// Sets `key`'s value: added, or replacing the one there.
    @inlinable public mutating func set(_ value: Value, for key: Key) {
        if let index = index(of: key) {
            values[index] = value
            return
        }
        keys.append(key)
        values.append(value)
        if keys.count * 2 > slots.count {
            rebuild(slotCount: Swift.max(16, slots.count * 2))
        } else {
            place(keys.count - 1)
        }
    }

    /// Sets `key`'s value to what `merge` makes of the one there (nil when
    /// there is none).
    @inlinable public mutating func merge(_ key: Key, _ merge: (Value?) -> Value) {
        if let index = index(of: key) {
            values[index] = merge(values[index])
        } else {
            set(merge(nil), for: key)
        }
    }

    @inlinable func index(of key: Key) -> Int? {
        guard !slots.isEmpty else { return nil }
        let mask = slots.count - 1
        var slot = key.hashValue & mask
        while true {
            let index = slots[slot]
            if index < 0 { return nil }
            if keys[index] == key { return index }
            slot = (slot + 1) & mask
        }
    }

    @inlinable mutating func place(_ index: Int) {
        let mask = slots.count - 1
        var slot = keys[index].hashValue & mask
        while slots[slot] >= 0 { slot = (slot + 1) & mask }
        slots[slot] = index
    }

    @inlinable mutating func rebuild(slotCount: Int) {
        slots = Array(repeating: -1, count: slotCount)
        for index in keys.indices { place(index) }
    }
}

extension KeyedTable: Sequence {
    /// The keys and their values, in the order the keys were added.
    public struct Iterator: IteratorProtocol {
        @usableFromInline let table: KeyedTable
        @usableFromInline var position = 0

        @inlinable init(_ table: KeyedTable) { self.table = table }

        /// The next key and its value, or nil after the last.
        @inlinable public mutating func next() -> (key: Key, value: Value)? {
            guard position < table.keys.count else { return nil }
            defer { position += 1 }
            return (table.keys[position], table.values[position])
        }
    }

    /// An iterator over the keys and their values.
    @inlinable public func makeIterator() -> Iterator { Iterator(self) }
}

extension KeyedTable: Sendable where Key: Sendable, Value: Sendable {}
