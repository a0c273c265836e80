extension SessionTask.StateMachine {
    /// What one event asks the task to do after it releases its lock: at
    /// most two actions (a transfer to cancel, then what comes next), kept
    /// inline. Every event of every task returns one, and an array would
    /// put each on the heap.
    struct Actions: RandomAccessCollection, ExpressibleByArrayLiteral, Equatable {
        private var first: Action?
        private var second: Action?

        init() {}

        init(_ action: Action) {
            first = action
        }

        /// For tests: the machine itself never makes the variadic array.
        init(arrayLiteral elements: Action...) {
            for element in elements { append(element) }
        }

        /// Adds `action` after the others. A third one is a bug of the
        /// machine's: it is kept as the second, which then says so.
        mutating func append(_ action: Action) {
            if first == nil {
                first = action
            } else if second == nil {
                second = action
            } else {
                second = .impossible("a third action (\(action)) after \(String(describing: first)) and \(String(describing: second))")
            }
        }

        var startIndex: Int { 0 }
        var endIndex: Int { first == nil ? 0 : (second == nil ? 1 : 2) }

        subscript(position: Int) -> Action {
            switch position {
            case 0: if let first { return first }
            case 1: if let second { return second }
            default: break
            }
            preconditionFailure("action \(position) of \(count)")
        }
    }
}
