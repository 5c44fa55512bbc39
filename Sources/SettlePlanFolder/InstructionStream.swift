import CDirectIO
import Foundation
public import SettleApply
public import SettleCore
import SettleDigest

/// `instructions.jsonl` read in chunks, one instruction at a time, so that `apply` holds
/// the instructions in flight and not the plan (a full-size plan lists millions).
///
/// One descriptor serves every pass (the seal, the facts, sending): a file put in its
/// place by name is not read, and a file changed in place (size or modification time) is
/// refused when a pass starts again or ends. Every instruction it yields has just been
/// checked against its own content (``Instruction/inconsistency``) and its request against
/// its facts (`RequestParams.mismatch`), on every pass.
public final class InstructionStream: InstructionSource {
    /// The bytes read from the file at a time.
    static let chunkSize = 1 << 20
    /// The longest line accepted: a longer one is not an instruction settle wrote.
    static let longestLine = 64 << 20

    let path: String
    private let descriptor: Int32
    private let identity: [Int]
    private var buffer: [UInt8] = []
    /// What one read fills, before it joins `buffer`.
    private lazy var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
    private var start = 0
    private var offset: off_t = 0
    private var atEnd = false
    private var lineNumber = 0
    /// Set from the sealed manifest by ``PlanFolder/open(_:)``.
    public internal(set) var overview = PlanOverview()

    /// Opens the file; nil when it cannot be opened.
    public init?(path: String) {
        let descriptor = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        self.path = path
        self.descriptor = descriptor
        identity = Self.identity(descriptor)
    }

    deinit { Glibc.close(descriptor) }

    public func rewind() throws(ApplyError) {
        try checkUnchanged()
        buffer = []
        start = 0
        offset = 0
        atEnd = false
        lineNumber = 0
    }

    public func next() throws(ApplyError) -> Instruction? {
        while let line = try nextLine() {
            lineNumber += 1
            let decoded: Instruction?
            do {
                decoded = try Instruction.decode(line: line, number: lineNumber)
            } catch {
                throw .planInvalid(line: lineNumber, message: error.cause ?? error.message)
            }
            guard let instruction = decoded else { continue }
            if let problem = instruction.inconsistency ?? RequestParams.mismatch(instruction) {
                throw .planInvalid(line: lineNumber, message: "instruction \(instruction.id) \(problem)")
            }
            return instruction
        }
        return nil
    }

    /// The SHA-256 of the file, read through the same descriptor (`pread`, so it may run
    /// on another thread while a pass reads); nil when a read fails.
    ///
    /// Read past the page cache where the file system allows it (``DirectReads``): the plan
    /// wrote the folder past it too, so its pages are not there to be found, and on the
    /// benchmark machine bringing a full-size folder into the cache cost more than reading it.
    public func sha256() -> String? {
        if case .read(let digest) = DirectReads.sha256(of: descriptor) { return digest }
        var chunk = [UInt8](repeating: 0, count: Self.chunkSize)
        return chunk.withUnsafeMutableBytes { DirectReads.sha256(reading: descriptor, into: $0).digest }
    }

    // MARK: - Lines

    private func nextLine() throws(ApplyError) -> ArraySlice<UInt8>? {
        while true {
            if let newline = newline(from: start) {
                let line = buffer[start..<newline]
                start = newline + 1
                return line
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                start = buffer.count
                return line
            }
            guard buffer.count - start <= Self.longestLine else {
                throw .planInvalid(line: lineNumber + 1, message: "longer than \(Self.longestLine) bytes")
            }
            try readChunk()
        }
    }

    private func newline(from position: Int) -> Int? {
        guard position < buffer.count else { return nil }
        return buffer.withUnsafeBytes { raw -> Int? in
            guard let found = memchr(raw.baseAddress! + position, 0x0A, raw.count - position) else { return nil }
            return raw.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }

    /// Drops the lines already read and appends the next chunk of the file.
    private func readChunk() throws(ApplyError) {
        if start > 0 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        var count = 0
        repeat {
            count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, offset) }
        } while count < 0 && errno == EINTR
        guard count >= 0 else {
            throw .planInvalid(line: lineNumber + 1, message: "cannot be read: \(String(cString: strerror(errno)))")
        }
        buffer.append(contentsOf: chunk[..<count])
        offset += off_t(count)
        if count == 0 {
            atEnd = true
            try checkUnchanged()
        }
    }

    private func checkUnchanged() throws(ApplyError) {
        guard Self.identity(descriptor) == identity else {
            throw .planInvalid(line: lineNumber, message: "changed while apply was reading it")
        }
    }

    /// Size and modification time: what changes when the file is written in place.
    private static func identity(_ descriptor: Int32) -> [Int] {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return [] }
        return [Int(info.st_size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec, Int(info.st_ino)]
    }
}

/// A whole file read with O_DIRECT, through a second open description of a descriptor's file
/// (`/proc/self/fd/N`: the same file, even if another was put in its place by name since),
/// in aligned 4 MiB reads that skip the page cache.
enum DirectReads {
    /// The bytes of one read, and the alignment of its buffer and offset.
    static let size = 4 << 20
    static let alignment = 4096

    enum Outcome {
        /// The file was read (the digest nil: a read failed).
        case read(String?)
        /// The file cannot be read this way (no `/proc`, a file system without O_DIRECT):
        /// the caller reads it through the page cache.
        case unavailable
    }

    /// The SHA-256 of the file open at `descriptor`.
    static func sha256(of descriptor: Int32) -> Outcome {
        let direct = open("/proc/self/fd/\(descriptor)", O_RDONLY | O_CLOEXEC | settle_o_direct())
        guard direct >= 0 else { return .unavailable }
        defer { close(direct) }
        var memory: UnsafeMutableRawPointer? = nil
        guard posix_memalign(&memory, alignment, size) == 0, let memory else { return .unavailable }
        defer { free(memory) }
        let read = sha256(reading: direct, into: UnsafeMutableRawBufferPointer(start: memory, count: size))
        // Refused before a byte was read: this file system takes no direct reads.
        return read.refusedAtStart ? .unavailable : .read(read.digest)
    }

    /// The SHA-256 of everything `descriptor` reads from its start (`pread`, chunk by chunk
    /// through `buffer`); the digest nil when a read failed, `refusedAtStart` when the first
    /// read was refused (EINVAL) before a byte was read.
    static func sha256(reading descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer)
        -> (digest: String?, refusedAtStart: Bool)
    {
        let hasher = SHA256()
        var position: off_t = 0
        while true {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, position)
            if count < 0 {
                if errno == EINTR { continue }
                return (nil, errno == EINVAL && position == 0)
            }
            if count == 0 { break }
            hasher.update(UnsafeRawBufferPointer(start: buffer.baseAddress, count: count))
            position += off_t(count)
        }
        return (hasher.hexDigest(), false)
    }
}

/// The checks `apply` makes before its first request that read whole files, run on both
/// cores, the longest first: the SHA-256 of every sealed file, read in chunks, never whole
/// in memory. (Each instruction's own check runs as it is read: ``InstructionStream/next()``.)
enum PlanChecks {
    /// The first problem found, as a refusal (exit 65), or nil.
    static func run(folder: String, sealed: [(name: String, sha256: String)], instructions: InstructionStream)
        -> SettleError?
    {
        func path(_ name: String) -> String { (folder as NSString).appendingPathComponent(name) }
        var jobs: [@Sendable () -> SettleError?] = []
        let stream = UncheckedBox(instructions)
        let sizes = sealed.map { entry -> Int in
            var info = stat()
            return stat(path(entry.name), &info) == 0 ? Int(info.st_size) : 0
        }
        for index in sealed.indices.sorted(by: { sizes[$0] > sizes[$1] }) {
            let (name, expected) = sealed[index]
            let file = path(name)
            jobs.append {
                let actual = name == "instructions.jsonl" ? stream.value.sha256() : fileSHA256(file)
                guard let actual else {
                    return SettleError(
                        .planChanged, "\(folder)/\(name) is missing; nothing was sent (plan again)",
                        at: .init(file: file))
                }
                guard actual == expected else {
                    return SettleError(
                        .planChanged, "\(folder)/\(name) changed since settle wrote it; nothing was sent (plan again)",
                        at: .init(file: file))
                }
                return nil
            }
        }
        return ParallelJobs.run(jobs, threads: 2).compactMap { $0 ?? nil }.first
    }

    /// The SHA-256 of a file read in chunks; nil when it cannot be read.
    static func fileSHA256(_ path: String) -> String? {
        guard let stream = InstructionStream(path: path) else { return nil }
        return stream.sha256()
    }
}

/// Runs closures on a few threads (the calling one included), each result in its slot.
enum ParallelJobs {
    static func run<T: Sendable>(_ jobs: [@Sendable () -> T], threads: Int) -> [T?] {
        let state = JobState<T>(count: jobs.count)
        let work: @Sendable () -> Void = {
            while let index = state.take() { state.put(index, jobs[index]()) }
        }
        let helpers = max(0, min(threads, jobs.count) - 1)
        let done = DispatchGroup()
        for _ in 0..<helpers {
            done.enter()
            Thread.detachNewThread {
                work()
                done.leave()
            }
        }
        work()
        done.wait()
        return state.results
    }

    private final class JobState<T: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var nextIndex = 0
        private let count: Int
        private var slots: [T?]

        init(count: Int) {
            self.count = count
            slots = Array(repeating: nil, count: count)
        }

        func take() -> Int? {
            lock.withLock {
                guard nextIndex < count else { return nil }
                nextIndex += 1
                return nextIndex - 1
            }
        }

        func put(_ index: Int, _ value: T) { lock.withLock { slots[index] = value } }
        var results: [T?] { lock.withLock { slots } }
    }
}

/// Hands a value to another thread that uses it while the owner waits (``ParallelJobs``).
private final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
