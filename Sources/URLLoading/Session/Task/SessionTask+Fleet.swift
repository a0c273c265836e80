extension SessionTask {
    /// This task may fetch its key across the fleet (another worker stored
    /// the response meanwhile, died, or nobody held it): the hop starts
    /// again from the cache's lookup, without waiting in this process again.
    /// A claim granted after the task ended is let go at once.
    func fleetClaimGranted(_ claim: any FleetClaim, for hop: Hop) {
        let actions = locked.withLock { $0.machine.isCurrent(hop) ? $0.machine.fleetClaimGranted(claim) : nil }
        guard let actions else {
            claim.release()
            return
        }
        perform(actions)
    }

    /// The task's response is stored (or will not be): the workers waiting
    /// for its key across the fleet go first, then the tasks of this session.
    /// The claim was taken from the task at its end (`StateMachine.endLead`).
    func letWaitersGo(_ ledKey: String?, claim: (any FleetClaim)?, session: Session) {
        claim?.release()
        if let ledKey { session.leaveInFlight(key: ledKey) }
    }
}
