import Dispatch
import Locking
import Testing
@testable import URLLoading

/// Items from many threads written in batches by one of them.
@Suite struct WriteCombinerTests {
    @Test("While one thread writes, others hand their items over and return at once; the writer then writes them in one batch, in order, each once")
    func batches() {
        let combiner = WriteCombiner<Int>()
        let written = Lock<[[Int]]>([])
        let inFirstWrite = DispatchSemaphore(value: 0)
        let finishFirstWrite = DispatchSemaphore(value: 0)
        let writerDone = DispatchSemaphore(value: 0)
        @Sendable func write(_ batch: [Int]) {
            let first = written.withLock { written in
                written.append(batch)
                return written.count == 1
            }
            if first {
                inFirstWrite.signal()
                _ = finishFirstWrite.wait(timeout: .now() + 10)
            }
        }
        DispatchQueue.global().async {
            combiner.add(1, write: write)
            writerDone.signal()
        }
        #expect(inFirstWrite.wait(timeout: .now() + 10) == .success)
        // The first thread is inside its write: these return without writing.
        for item in 2...5 { combiner.add(item, write: write) }
        #expect(written.withLock { $0 } == [[1]])
        finishFirstWrite.signal()
        #expect(writerDone.wait(timeout: .now() + 10) == .success)
        #expect(written.withLock { $0 } == [[1], [2, 3, 4, 5]])
        // Nothing under way: the next item is written by its own thread at once.
        combiner.add(6, write: write)
        #expect(written.withLock { $0 } == [[1], [2, 3, 4, 5], [6]])
    }
}
