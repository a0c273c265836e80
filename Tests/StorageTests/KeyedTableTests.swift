import Foundation
import Testing
import TestSupport
@testable import Storage

/// The table a store's first moments use in place of `Dictionary`: the same
/// answers as a dictionary, whatever the keys' hashes.
@Suite struct KeyedTableTests {
    /// A key whose hash is chosen by the test: equal hashes put keys in one
    /// probe chain.
    struct Key: Hashable {
        let id: Int
        let hash: Int
        static func == (a: Key, b: Key) -> Bool { a.id == b.id }
        func hash(into hasher: inout Hasher) { hasher.combine(hash) }
    }

    /// A deterministic sequence of numbers, so a failure can be replayed.
    struct Numbers {
        var state: UInt64
        mutating func next(below bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    @Test(arguments: [1, 7, 1_000_000])
    func answersAsADictionaryDoes(hashes: Int) {
        var numbers = Numbers(state: UInt64(hashes))
        var table = KeyedTable<Key, Int>()
        var model: [Key: Int] = [:]
        for step in 0..<4_000 {
            let id = numbers.next(below: 600)
            let key = Key(id: id, hash: id % hashes)
            if step % 3 == 0 {
                table.merge(key) { ($0 ?? 0) + step }
                model[key, default: 0] += step
            } else {
                table.set(step, for: key)
                model[key] = step
            }
            let probe = numbers.next(below: 700)
            let probeKey = Key(id: probe, hash: probe % hashes)
            #expect(table[probeKey] == model[probeKey], "key \(probe) after step \(step)")
        }
        #expect(table.count == model.count)
        // A key held twice would show as a count above the dictionary's, not as a trap here.
        #expect(Dictionary(table.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first }) == model)
    }

    @Test func iteratesInTheOrderKeysWereAddedAndEmptiesWhole() {
        var table = KeyedTable<String, Int>()
        #expect(table.isEmpty)
        for (index, word) in ["c", "a", "b", "a"].enumerated() { table.set(index, for: word) }
        #expect(table.map(\.key) == ["c", "a", "b"])
        #expect(table.map(\.value) == [0, 3, 2])
        table.removeAll()
        #expect(table.isEmpty && table.count == 0 && table["a"] == nil)
        table.set(9, for: "a")
        #expect(table["a"] == 9 && table.count == 1)
    }

    @Test func aConnectionPreparesEachStatementOnce() throws {
        let directory = TemporaryDirectory()
        let connection = try Connection(path: directory.path("a.sqlite"), busyTimeout: .seconds(5))
        let texts = (0..<100).map { "SELECT \($0)" }
        let first = try texts.map { (text: String) throws(SQLiteError) in try connection.cachedStatement(text) }
        let again = try texts.map { (text: String) throws(SQLiteError) in try connection.cachedStatement(text) }
        #expect(zip(first, again).allSatisfy { $0 === $1 })
        #expect(Set(first.map(ObjectIdentifier.init)).count == 100)
        #expect(try connection.scalarInt("SELECT 42") == 42)
    }
}
