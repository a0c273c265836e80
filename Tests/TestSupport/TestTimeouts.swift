/// Timeouts for tests that are not about timeouts.
public enum TestTimeouts {
    /// A session's request timeout (the idle clock) for a test whose
    /// transfer waits on the test itself: a body produced by the test's
    /// own Swift task, a response held at a gate until the test opens it.
    /// A loaded test process (the whole suite at once on two cores, under
    /// ThreadSanitizer) was seen to run none of its Swift tasks for over a
    /// minute, which the default of 60 s turns into a timeout of a transfer
    /// that behaved. A transfer that never moves still fails, by the
    /// test's time limit.
    public static let request: Double = 600
}
