import Foundation

/// Nanoseconds on the monotonic clock.
func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Microseconds per operation of `body`, which runs `count` operations.
func microsecondsPerOperation(_ count: Int, _ body: () -> Void) -> Double {
    let start = now()
    body()
    return Double(now() - start) / 1000 / Double(count)
}

/// The median of several runs.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

/// Runs this executable in a new process and reads the number it prints.
func runChild(_ arguments: [String]) -> Double {
    let output = runChildText(arguments)
    guard let value = Double(output) else { fail("child \(arguments) printed \(output)") }
    return value
}

/// This process's scratch folder under the temporary directory; `main`
/// removes it when the bench ends, by success or by `fail`.
let scratchRoot = NSTemporaryDirectory() + "urlloading-bench-\(getpid())"

func removeScratch() {
    try? FileManager.default.removeItem(atPath: scratchRoot)
}

/// A fresh, empty folder `name` in this process's scratch folder.
func scratchDirectory(_ name: String) -> String {
    let path = scratchRoot + "/" + name
    try? FileManager.default.removeItem(atPath: path)
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func formatted(_ value: Double) -> String {
    value >= 100 ? String(format: "%.0f", value) : value >= 10 ? String(format: "%.1f", value) : String(format: "%.2f", value)
}
