/// A bounded wait for a condition no event announces (a weak reference let
/// go on another thread, a request the origin logged): it looks after 1 ms,
/// then less often, up to every 16 ms (hundreds of tests wait at once under
/// the whole suite, and each look takes a turn of Swift's cooperative
/// threads the code under test may need), and gives up after `timeout`, so
/// a test that waits this way fails with its own message instead of hanging
/// or counting scheduler turns.
/// The default bound, 45 s, stays inside the suites' one-minute limits and
/// outlasts the stalls of up to ~30 s seen under the whole suite's load.
///
/// - Returns: Whether the condition held before the time ran out.
public func eventually(within timeout: Duration = .seconds(45), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout * Sanitizer.timeScale
    var pause = Duration.milliseconds(1)
    while !condition() {
        guard ContinuousClock.now < deadline else { return false }
        try? await Task.sleep(for: pause)
        pause = min(pause * 2, .milliseconds(16))
    }
    return true
}
