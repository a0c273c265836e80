extension SessionTask {
    /// This task may fetch its key across the fleet (another worker stored
    /// the response meanwhile, died, or nobody held it): the hop starts
    /// again from the cache's lookup, without waiting in this process again.
    /// A claim granted after the task ended is let go at once.
    func fleetClaimGranted(_ claim: any FleetClaim) {
        let adopted = locked.withLock { inner -> Bool in
            guard !inner.fleetClaimEnded else { return false }
            inner.fleetClaim = claim
            return true
        }
        guard adopted else {
            claim.release()
            return
        }
        perform(
            locked.withLock { inner in
                inner.machine.markCoalesced()
                return inner.machine.proceedHop(0)
            })
    }

    /// The task's response is stored (or will not be): the workers waiting
    /// for its key across the fleet go first, then the tasks of this session.
    func letWaitersGo(_ ledKey: String?, session: Session) {
        let claim = locked.withLock { inner -> (any FleetClaim)? in
            inner.fleetClaimEnded = true
            defer { inner.fleetClaim = nil }
            return inner.fleetClaim
        }
        claim?.release()
        if let ledKey { session.leaveInFlight(key: ledKey) }
    }
}
