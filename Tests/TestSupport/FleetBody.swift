public import Foundation

/// The body the fleet tests' origin serves for `/fleet/<index>`: 24 KiB that
/// differ for every index, so a worker that got another key's body, or a
/// part of one, notices.
public enum FleetBody {
    public static func expected(_ index: Int) -> Data {
        var data = Data(capacity: 24 * 1024)
        let line = Array("fleet body \(index) ".utf8)
        while data.count < 24 * 1024 { data.append(contentsOf: line) }
        return data.prefix(24 * 1024)
    }
}
