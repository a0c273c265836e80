/// A bounded wait for a condition no event announces (a weak reference let
/// go on another thread, a request the origin logged): it looks every
/// millisecond and gives up after `timeout`, so a test that waits this way
/// fails with its own message instead of hanging or counting scheduler turns.
/// The default bound, 45 s, stays inside the suites' one-minute limits and
/// outlasts the stalls of up to ~30 s seen under the whole suite's load.
///
/// - Returns: Whether the condition held before the time ran out.
public func eventually(within timeout: Duration = .seconds(45), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout * Sanitizer.timeScale
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
