package import Foundation

/// A statement parameter, sent in PostgreSQL's binary format with its type.
package enum PostgresValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case text(String)
    case bytes(Data)
    /// An `int8[]` (for `= ANY($1)`).
    case intArray([Int64])

    /// PostgreSQL's type OIDs (pg_type.dat).
    package enum TypeID {
        package static let bool: UInt32 = 16
        package static let bytea: UInt32 = 17
        package static let int8: UInt32 = 20
        package static let int2: UInt32 = 21
        package static let int4: UInt32 = 23
        package static let text: UInt32 = 25
        package static let oid: UInt32 = 26
        package static let float4: UInt32 = 700
        package static let float8: UInt32 = 701
        package static let varchar: UInt32 = 1043
        package static let name: UInt32 = 19
        package static let int8Array: UInt32 = 1016
    }

    /// The type OID sent with the value (0 lets the server infer a null's).
    var typeID: UInt32 {
        switch self {
        case .null: 0
        case .bool: TypeID.bool
        case .int: TypeID.int8
        case .double: TypeID.float8
        case .text: TypeID.text
        case .bytes: TypeID.bytea
        case .intArray: TypeID.int8Array
        }
    }

    /// The binary encoding; nil for null.
    var encoded: [UInt8]? {
        switch self {
        case .null: return nil
        case .bool(let value): return [value ? 1 : 0]
        case .int(let value): return withUnsafeBytes(of: value.bigEndian) { Array($0) }
        case .double(let value): return withUnsafeBytes(of: value.bitPattern.bigEndian) { Array($0) }
        case .text(let value): return Array(value.utf8)
        case .bytes(let value): return Array(value)
        case .intArray(let values):
            // ndim, has-null flag, element type, then the one dimension's length and lower bound.
            var bytes: [UInt8] = []
            bytes.reserveCapacity(20 + values.count * 12)
            func append(_ value: Int32) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
            append(1)
            append(0)
            append(Int32(TypeID.int8))
            append(Int32(clamping: values.count))
            append(1)
            for value in values {
                append(8)
                withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
            }
            return bytes
        }
    }
}
