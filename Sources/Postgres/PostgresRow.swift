import CPostgres
package import Foundation

/// One row of a result in binary format, read by column index. A value of a
/// type the accessor does not read (or a null) reads as nil: a column the
/// code does not expect never traps.
package struct PostgresRow {
    let result: OpaquePointer
    let row: Int32

    /// Whether the column is null.
    package func isNull(_ column: Int32) -> Bool { PQgetisnull(result, row, column) == 1 }

    private func bytes(_ column: Int32) -> UnsafeRawBufferPointer? {
        guard PQgetisnull(result, row, column) == 0, let value = PQgetvalue(result, row, column) else { return nil }
        let length = Int(PQgetlength(result, row, column))
        return UnsafeRawBufferPointer(start: value, count: max(0, length))
    }

    private func bigEndian<T: FixedWidthInteger>(_ bytes: UnsafeRawBufferPointer, as type: T.Type) -> T? {
        guard bytes.count == MemoryLayout<T>.size else { return nil }
        var value: T = 0
        for byte in bytes { value = value << 8 | T(byte) }
        return value
    }

    /// An integer column (int2, int4, int8, oid).
    package func int64(_ column: Int32) -> Int64? {
        guard let bytes = bytes(column) else { return nil }
        switch PQftype(result, column) {
        case PostgresValue.TypeID.int8: return bigEndian(bytes, as: UInt64.self).map { Int64(bitPattern: $0) }
        case PostgresValue.TypeID.int4: return bigEndian(bytes, as: UInt32.self).map { Int64(Int32(bitPattern: $0)) }
        case PostgresValue.TypeID.int2: return bigEndian(bytes, as: UInt16.self).map { Int64(Int16(bitPattern: $0)) }
        case PostgresValue.TypeID.oid: return bigEndian(bytes, as: UInt32.self).map { Int64($0) }
        default: return nil
        }
    }

    /// An integer column that fits an `Int`.
    package func int(_ column: Int32) -> Int? { int64(column).flatMap { Int(exactly: $0) } }

    /// A float8 or float4 column (integers too).
    package func double(_ column: Int32) -> Double? {
        guard let bytes = bytes(column) else { return nil }
        switch PQftype(result, column) {
        case PostgresValue.TypeID.float8: return bigEndian(bytes, as: UInt64.self).map { Double(bitPattern: $0) }
        case PostgresValue.TypeID.float4: return bigEndian(bytes, as: UInt32.self).map { Double(Float(bitPattern: $0)) }
        default: return int64(column).map(Double.init)
        }
    }

    /// A bool column.
    package func bool(_ column: Int32) -> Bool? {
        guard PQftype(result, column) == PostgresValue.TypeID.bool, let bytes = bytes(column), bytes.count == 1 else { return nil }
        return bytes[0] != 0
    }

    /// A text, varchar or name column (invalid UTF-8 is repaired, never trusted).
    package func text(_ column: Int32) -> String? {
        let type = PQftype(result, column)
        guard type == PostgresValue.TypeID.text || type == PostgresValue.TypeID.varchar || type == PostgresValue.TypeID.name,
            let bytes = bytes(column)
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A bytea column.
    package func data(_ column: Int32) -> Data? {
        guard PQftype(result, column) == PostgresValue.TypeID.bytea, let bytes = bytes(column) else { return nil }
        return Data(bytes)
    }
}
