import CZlib
import Foundation
import Glibc
public import SettleCore
import SettleDigest

/// Why an input could not be read to its end. Rejects the file whole.
public struct ReadFailure: FileRejectionError, Sendable {
    public let code: FileRejection
    public let message: String
    /// Byte offset (compressed input) or line where it went wrong, when known.
    public let position: String

    public init(code: FileRejection, message: String, position: String = "") {
        self.code = code
        self.message = message
        self.position = position
    }
}

extension ReadFailure {
    /// The failure with its position in the file named so (`orders.csv.gz: byte 80`), as the
    /// manifest and the log name it, wherever it was found (audit 38 D5: a gzip failure found
    /// at the first bytes said `byte 80` alone).
    public func located(in file: String) -> ReadFailure {
        ReadFailure(code: code, message: message, position: position.isEmpty ? file : "\(file): \(position)")
    }
}

/// Streams the bytes of one input: a file or standard input, decompressed when gzip.
///
/// Buffers are reused (256 KiB in and out); nothing holds the whole input.
///
/// The bytes as read (compressed for gzip) can be tapped into the plan folder's spool
/// (``spool(into:)``): the spool is the input itself, written as it is read, never
/// re-compressed. Until the tap is decided (the format is known only from the first chunk),
/// what was read is kept, and the first gzip chunk is inflated on the caller's thread.
///
/// Threads: for gzip, once the first chunk is asked for, the file, zlib and the checksum are
/// used only by the inflating thread; the reader's thread sees them again after
/// ``finishReading()`` has joined it. That discipline is why this is `@unchecked Sendable`.
public final class ByteSource: @unchecked Sendable {
    public static let chunkSize = 256 * 1024

    private let descriptor: Int32
    private let ownsDescriptor: Bool
    private var raw: UnsafeMutableRawBufferPointer
    private var rawStart = 0
    private var rawEnd = 0
    private var rawEOF = false
    private var inflated: UnsafeMutableRawBufferPointer
    private var stream = z_stream()
    private var inflating = false
    private var memberOpen = false
    private let hasher: SHA256?
    /// SHA-256 of the input's bytes as stored (compressed for gzip); complete once read to the end.
    /// Empty for a source opened without hashing.
    public func sha256() -> String {
        finishReading()
        return hasher?.hexDigest() ?? ""
    }

    private enum Tap {
        /// Not decided yet: the bytes read so far are kept in `tapPending`.
        case undecided
        case into(SpoolWriter)
        case none
    }
    private var tap = Tap.undecided
    private var tapPending: [UInt8] = []
    /// Chunks handed out so far.
    private var chunks = 0

    /// Where the input's bytes as read go: every byte read so far and from now on is appended
    /// to `writer` (nil: nowhere). Call at most once, before the second chunk (a source that
    /// hands out a second chunk undecided taps nothing). For gzip the writer is then used by
    /// the inflating thread until ``finishReading()``.
    public func spool(into writer: SpoolWriter?) {
        guard case .undecided = tap else { return }
        if let writer {
            tapPending.withUnsafeBytes { writer.append($0) }
            tap = .into(writer)
        } else {
            tap = .none
        }
        tapPending = []
    }
    /// Bytes of the input file read by the thread that reads it (compressed bytes for gzip).
    private var rawBytesRead: UInt64 = 0
    /// Bytes of the input file read so far, as far as the chunks handed out go.
    public var bytesRead: UInt64 { prefetch == nil ? rawBytesRead : visibleBytesRead }
    private var visibleBytesRead: UInt64 = 0
    /// Decompressed bytes handed out so far.
    public private(set) var bytesProduced: UInt64 = 0
    /// Whether the input starts with the gzip magic bytes and is being decompressed.
    public private(set) var isGzip = false
    /// Total size of the file when known (not for pipes).
    public let fileSize: UInt64?

    /// Opens a path (`-` is standard input) and sniffs gzip magic bytes.
    /// `hashing`: keep the SHA-256 of the bytes read (``sha256()``).
    public init(path: String, hashing: Bool = true) throws(ReadFailure) {
        hasher = hashing ? SHA256() : nil
        if path == "-" {
            descriptor = 0
            ownsDescriptor = false
        } else {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw ReadFailure(
                    code: .unreadable, message: "cannot open \(path): \(String(cString: strerror(errno)))")
            }
            descriptor = fd
            ownsDescriptor = true
        }
        var info = stat()
        if fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
            fileSize = UInt64(info.st_size)
        } else {
            fileSize = nil
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            if ownsDescriptor { close(descriptor) }
            throw ReadFailure(code: .unreadable, message: "\(path) is a folder, not a file")
        }
        raw = .allocate(byteCount: ByteSource.chunkSize, alignment: 16)
        inflated = .allocate(byteCount: ByteSource.chunkSize, alignment: 16)
        try fillRaw()
        if rawEnd - rawStart < 2, !rawEOF { try fillRaw() }
        let magic = rawEnd - rawStart >= 2 && raw[rawStart] == 0x1f && raw[rawStart + 1] == 0x8b
        isGzip = magic
    }

    deinit {
        prefetch?.pool.forEach { $0.deallocate() }
        if inflating { inflateEnd(&stream) }
        raw.deallocate()
        inflated.deallocate()
        if ownsDescriptor { close(descriptor) }
    }

    private var peeked: UnsafeRawBufferPointer? = nil
    private var hasPeeked = false

    /// The first chunk, without consuming it: the next ``next()`` returns it again.
    /// Used to tell XML from CSV by content.
    public func peek() throws(ReadFailure) -> UnsafeRawBufferPointer? {
        if !hasPeeked {
            peeked = try produce()
            hasPeeked = true
        }
        return peeked
    }

    /// The next chunk of decompressed bytes, valid until the next call; nil at the end.
    public func next() throws(ReadFailure) -> UnsafeRawBufferPointer? {
        if hasPeeked {
            hasPeeked = false
            let chunk = peeked
            peeked = nil
            return chunk
        }
        return try produce()
    }

    private func produce() throws(ReadFailure) -> UnsafeRawBufferPointer? {
        if chunks > 0, case .undecided = tap { spool(into: nil) }
        let chunk = try produceChunk()
        if chunk != nil { chunks += 1 }
        return chunk
    }

    private func produceChunk() throws(ReadFailure) -> UnsafeRawBufferPointer? {
        if !isGzip {
            if rawStart < rawEnd {
                // The first chunk tells XML from CSV: one that holds only a BOM (or part of
                // one) and blanks is read on until it holds more (a pipe's first write may be
                // just that: audit 57 F2), as far as the buffer goes.
                while chunks == 0, !rawEOF, rawEnd < raw.count,
                    InputFormat.undecided(UnsafeRawBufferPointer(rebasing: raw[rawStart..<rawEnd]))
                {
                    try fillRaw()
                }
                let chunk = UnsafeRawBufferPointer(rebasing: raw[rawStart..<rawEnd])
                rawStart = rawEnd
                bytesProduced += UInt64(chunk.count)
                return chunk
            }
            if rawEOF { return nil }
            rawStart = 0
            rawEnd = 0
            try fillRaw()
            return rawEnd > 0 ? try produceChunk() : nil
        }
        if prefetch == nil, case .undecided = tap {
            // The format is not known yet: inflate on this thread, so nothing is read
            // elsewhere before the tap is decided.
            guard var chunk = try inflateNext() else { return nil }
            // The first chunk tells XML from CSV: a first member that holds only a BOM (or
            // part of one) and blanks is followed by the next ones until it holds more
            // (audit 57 F2: such a file was read as CSV and rejected whole), as far as the
            // buffer goes.
            while chunks == 0, InputFormat.undecided(chunk), chunk.count < inflated.count,
                let more = try inflateNext(after: chunk.count)
            {
                chunk = more
            }
            bytesProduced += UInt64(chunk.count)
            return chunk
        }
        return try prefetched()
    }

    // MARK: - Inflating on the second core

    /// gzip inputs are inflated on their own thread, a few chunks ahead of the parser, so
    /// decompression and parsing use both cores.
    private final class Prefetch: @unchecked Sendable {
        static let depth = 4
        let pool: [UnsafeMutableRawBufferPointer] = (0..<depth).map { _ in
            .allocate(byteCount: ByteSource.chunkSize, alignment: 16)
        }
        let lock = NSLock()
        // Guarded by `lock`.
        var ready: [(index: Int, count: Int, bytesRead: UInt64)] = []
        var freeIndices = Array(0..<depth)
        var ended = false
        var failure: ReadFailure?
        var finalBytesRead: UInt64 = 0
        var cancelled = false
        // Counting: chunks ready to read, buffers free to fill; `exited` once the thread is done.
        // All start at 0 (libdispatch traps when a semaphore is freed below its initial value).
        let filled = DispatchSemaphore(value: 0)
        let free = DispatchSemaphore(value: 0)
        let exited = DispatchSemaphore(value: 0)

        init() {
            for _ in 0..<Prefetch.depth { free.signal() }
        }
    }

    private var prefetch: Prefetch?
    private var heldIndex: Int?
    private var prefetchDone = false
    private var joined = false

    private func prefetched() throws(ReadFailure) -> UnsafeRawBufferPointer? {
        if prefetch == nil { startPrefetch() }
        let state = prefetch!
        if let held = heldIndex {
            state.lock.withLock { state.freeIndices.append(held) }
            state.free.signal()
            heldIndex = nil
        }
        if prefetchDone { return nil }
        state.filled.wait()
        let item = state.lock.withLock { state.ready.isEmpty ? nil : state.ready.removeFirst() }
        guard let item else {
            prefetchDone = true
            let (failure, total) = state.lock.withLock { (state.failure, state.finalBytesRead) }
            visibleBytesRead = total
            if let failure { throw failure }
            return nil
        }
        heldIndex = item.index
        visibleBytesRead = item.bytesRead
        bytesProduced += UInt64(item.count)
        return UnsafeRawBufferPointer(rebasing: state.pool[item.index][0..<item.count])
    }

    private func startPrefetch() {
        let state = Prefetch()
        prefetch = state
        let thread = Thread { [self] in
            while true {
                state.free.wait()
                if state.lock.withLock({ state.cancelled }) { break }
                let chunk: UnsafeRawBufferPointer?
                do throws(ReadFailure) {
                    chunk = try self.inflateNext()
                } catch {
                    state.lock.withLock {
                        state.failure = error
                        state.ended = true
                        state.finalBytesRead = self.rawBytesRead
                    }
                    state.filled.signal()
                    break
                }
                guard let chunk else {
                    state.lock.withLock {
                        state.ended = true
                        state.finalBytesRead = self.rawBytesRead
                    }
                    state.filled.signal()
                    break
                }
                let index = state.lock.withLock { state.freeIndices.removeLast() }
                state.pool[index].baseAddress!.copyMemory(from: chunk.baseAddress!, byteCount: chunk.count)
                state.lock.withLock { state.ready.append((index, chunk.count, self.rawBytesRead)) }
                state.filled.signal()
            }
            state.exited.signal()
        }
        thread.start()
    }

    /// Stops the inflating thread (when a reader stopped early) and waits for it, so the
    /// checksum and byte counts are final. Idempotent.
    public func finishReading() {
        guard let state = prefetch, !joined else { return }
        joined = true
        state.lock.withLock { state.cancelled = true }
        state.free.signal()
        state.exited.wait()
        visibleBytesRead = rawBytesRead
    }

    /// For a file rejected before its end: reads the rest of a regular file into the checksum
    /// (not into the spool), so that the size and SHA-256 the manifest gives are the file's,
    /// not those of the part read (audit 60 F3). A pipe or a device is not read on (it may not
    /// end): its figures stay those of the bytes read.
    public func hashRest() {
        finishReading()
        guard fileSize != nil, let hasher, !rawEOF else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ByteSource.chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(descriptor, buffer.baseAddress!, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            rawBytesRead += UInt64(count)
        }
        rawEOF = true
        visibleBytesRead = rawBytesRead
    }

    private func fillRaw() throws(ReadFailure) {
        if rawStart == rawEnd {
            rawStart = 0
            rawEnd = 0
        }
        while rawEnd < raw.count {
            let count = read(descriptor, raw.baseAddress! + rawEnd, raw.count - rawEnd)
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadFailure(
                    code: .unreadable, message: "read failed: \(String(cString: strerror(errno)))",
                    position: "byte \(rawBytesRead)")
            }
            if count == 0 {
                rawEOF = true
                return
            }
            let bytes = UnsafeRawBufferPointer(rebasing: raw[rawEnd..<rawEnd + count])
            hasher?.update(bytes)
            switch tap {
            case .into(let writer): writer.append(bytes)
            case .undecided: tapPending.append(contentsOf: bytes)
            case .none: break
            }
            rawEnd += count
            rawBytesRead += UInt64(count)
            if rawEnd - rawStart >= 2 { return }
        }
    }

    /// The next inflated bytes, in `inflated` after its first `kept` bytes (which stay, and
    /// start the chunk returned).
    private func inflateNext(after kept: Int = 0) throws(ReadFailure) -> UnsafeRawBufferPointer? {
        while true {
            if rawStart == rawEnd {
                if rawEOF {
                    if memberOpen {
                        throw ReadFailure(
                            code: .gzipTruncated,
                            message: "the gzip stream ends in the middle of a member (truncated file)",
                            position: "byte \(rawBytesRead)")
                    }
                    return nil
                }
                try fillRaw()
                continue
            }
            if !memberOpen {
                // A new member must start with the magic bytes; anything else after a
                // complete member is trailing garbage.
                if rawEnd - rawStart < 2, !rawEOF {
                    try fillRaw()
                    continue
                }
                guard rawEnd - rawStart >= 2, raw[rawStart] == 0x1f, raw[rawStart + 1] == 0x8b else {
                    // Zero padding after the last member is common (tape blocks); tolerate it.
                    if (rawStart..<rawEnd).allSatisfy({ raw[$0] == 0 }) {
                        rawStart = rawEnd
                        continue
                    }
                    throw ReadFailure(
                        code: .gzipCorrupt, message: "bytes after the gzip stream are not a gzip member",
                        position: "byte \(rawBytesRead - UInt64(rawEnd - rawStart))")
                }
                if !inflating {
                    stream = z_stream()
                    guard settle_inflate_init_gzip(&stream) == Z_OK else {
                        throw ReadFailure(code: .unreadable, message: "zlib could not start")
                    }
                    inflating = true
                } else {
                    inflateReset(&stream)
                }
                memberOpen = true
            }
            stream.next_in = raw.baseAddress!.assumingMemoryBound(to: Bytef.self) + rawStart
            stream.avail_in = uInt(rawEnd - rawStart)
            stream.next_out = inflated.baseAddress!.assumingMemoryBound(to: Bytef.self) + kept
            stream.avail_out = uInt(inflated.count - kept)
            let status = inflate(&stream, Z_NO_FLUSH)
            let consumed = (rawEnd - rawStart) - Int(stream.avail_in)
            rawStart += consumed
            let produced = inflated.count - kept - Int(stream.avail_out)
            switch status {
            case Z_OK, Z_BUF_ERROR:
                break
            case Z_STREAM_END:
                memberOpen = false
            default:
                let detail = stream.msg.map { String(cString: $0) } ?? "invalid data"
                let code: FileRejection = .gzipCorrupt
                throw ReadFailure(
                    code: code, message: "gzip data is corrupt: \(detail)",
                    position: "byte \(rawBytesRead - UInt64(rawEnd - rawStart))")
            }
            if produced > 0 {
                return UnsafeRawBufferPointer(rebasing: inflated[0..<kept + produced])
            }
            if status == Z_BUF_ERROR, rawStart == rawEnd, rawEOF {
                throw ReadFailure(
                    code: .gzipTruncated,
                    message: "the gzip stream ends in the middle of a member (truncated file)",
                    position: "byte \(rawBytesRead)")
            }
        }
    }
}

/// The format of an input, told from its content.
public enum InputFormat: String, Sendable {
    case csv, xml

    /// Where the content starts: the first byte after an optional UTF-8 BOM and blanks; nil
    /// while `bytes` hold nothing else (a BOM, or its first bytes, and blanks).
    static func contentStart(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        var index = 0
        while index < min(3, bytes.count), bytes[index] == bom[index] { index += 1 }
        if index > 0, index < 3 { return index == bytes.count ? nil : 0 }
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        return index < bytes.count ? index : nil
    }

    /// Whether `bytes` hold nothing but an optional UTF-8 BOM (or its first bytes) and
    /// blanks: the format cannot be told from them yet.
    public static func undecided(_ bytes: UnsafeRawBufferPointer) -> Bool { contentStart(bytes) == nil }

    /// XML when the first non-blank character after an optional UTF-8 BOM is `<`.
    public static func detect(_ first: UnsafeRawBufferPointer?) -> InputFormat {
        guard let first, let start = contentStart(first) else { return .csv }
        return first[start] == UInt8(ascii: "<") ? .xml : .csv
    }
}
