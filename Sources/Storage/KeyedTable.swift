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
package struct KeyedTable<Key, Value> {
    private var keys: [Key] = []
    private var values: [Value] = []
    /// For each slot, an index into `keys`, or -1 when the slot is free. A
    /// power of two long and at most half full, so a probe always ends.
    private var slots: [Int] = []

    /// An empty table.
    package init() {}

    /// How many keys the table holds.
    package var count: Int { keys.count }

    /// Whether the table holds no key.
    package var isEmpty: Bool { keys.isEmpty }

    /// Removes every key.
    package mutating func removeAll() {
        self = KeyedTable()
    }
}

extension KeyedTable where Key: Hashable {
    /// The value for `key`, or nil.
    package subscript(key: Key) -> Value? {
        guard let index = index(of: key) else { return nil }
        return values[index]
    }

    /// Sets `key`'s value: added, or replacing the one there.
    package mutating func set(_ value: Value, for key: Key) {
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
    package mutating func merge(_ key: Key, _ merge: (Value?) -> Value) {
        if let index = index(of: key) {
            values[index] = merge(values[index])
        } else {
            set(merge(nil), for: key)
        }
    }

    private func index(of key: Key) -> Int? {
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

    private mutating func place(_ index: Int) {
        let mask = slots.count - 1
        var slot = keys[index].hashValue & mask
        while slots[slot] >= 0 { slot = (slot + 1) & mask }
        slots[slot] = index
    }

    private mutating func rebuild(slotCount: Int) {
        slots = Array(repeating: -1, count: slotCount)
        for index in keys.indices { place(index) }
    }
}

extension KeyedTable: Sequence {
    /// The keys and their values, in the order the keys were added.
    package struct Iterator: IteratorProtocol {
        private let table: KeyedTable
        private var position = 0

        fileprivate init(_ table: KeyedTable) { self.table = table }

        package mutating func next() -> (key: Key, value: Value)? {
            guard position < table.keys.count else { return nil }
            defer { position += 1 }
            return (table.keys[position], table.values[position])
        }
    }

    package func makeIterator() -> Iterator { Iterator(self) }
}

extension KeyedTable: Sendable where Key: Sendable, Value: Sendable {}
