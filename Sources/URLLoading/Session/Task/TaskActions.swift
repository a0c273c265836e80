extension SessionTask.StateMachine {
    /// What one event asks of the task, in order. No event asks more than
    /// two things (cancel the old transfer and start the next, or cancel it
    /// and complete), so they are kept inline: an array of one would cost
    /// an allocation for each event of every request.
    struct Actions: RandomAccessCollection, Equatable, ExpressibleByArrayLiteral {
        private var leading: (Action?, Action?) = (nil, nil)
        /// A third and later action (no event asks for one today).
        private var more: [Action] = []

        init() {}

        init(_ action: Action) {
            leading.0 = action
        }

        init(arrayLiteral actions: Action...) {
            for action in actions { append(action) }
        }

        mutating func append(_ action: Action) {
            if leading.0 == nil {
                leading.0 = action
            } else if leading.1 == nil {
                leading.1 = action
            } else {
                more.append(action)
            }
        }

        var startIndex: Int { 0 }
        var endIndex: Int { leading.0 == nil ? 0 : leading.1 == nil ? 1 : 2 + more.count }

        subscript(position: Int) -> Action {
            switch position {
            case 0: guard let action = leading.0 else { preconditionFailure("no action at 0") }; return action
            case 1: guard let action = leading.1 else { preconditionFailure("no action at 1") }; return action
            default: return more[position - 2]
            }
        }

        static func == (a: Actions, b: Actions) -> Bool {
            a.leading.0 == b.leading.0 && a.leading.1 == b.leading.1 && a.more == b.more
        }
    }
}
