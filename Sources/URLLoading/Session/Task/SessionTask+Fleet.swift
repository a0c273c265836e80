extension SessionTask {
    /// This task may fetch its key across the fleet (another worker stored
    /// the response meanwhile, died, or nobody held it): the hop starts
    /// again from the cache's lookup, without waiting in this process again.
    /// A claim granted after the task ended is let go at once.
    func fleetClaimGranted(_ claim: any FleetClaim, for hop: Hop) {
        let adopted = locked.withLock { inner -> Bool in
            guard !inner.fleetClaimEnded else { return false }
            inner.fleetClaim = claim
            return true
        }
        guard adopted else {
            claim.release()
            return
        }
        waitEnded(for: hop) { $0.machine.markCoalesced() }
    }

    /// The task's response is stored (or will not be): the workers waiting
    /// for its key across the fleet go first, then the tasks of this session.
    /// The claim was taken from the task at its end (`fleetClaimEnded`).
    func letWaitersGo(_ ledKey: String?, claim: (any FleetClaim)?, session: Session) {
        claim?.release()
        if let ledKey { session.leaveInFlight(key: ledKey) }
    }
}
