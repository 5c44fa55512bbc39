import CZlib
import Dispatch
import Glibc

/// Where bytes go: a file descriptor, raw or gzip.
///
/// gzip is written the way pigz does it, so both cores work: the text is cut into fixed
/// 4 MiB chunks, each chunk is raw-deflated on its own (primed with the 32 KiB of text before
/// it as dictionary, ended with a sync flush, the last one with Z_FINISH), and the pieces are
/// written in order between one gzip header and trailer (CRC-32 combined). One gzip member;
/// the bytes depend only on the text and the level, not on the number of cores.
/// Two staging areas alternate: the generator fills one while the other is compressed and
/// written in the background. All buffers are allocated once and reused.
final class OutputSink: @unchecked Sendable {  // the background batch and the generator touch disjoint state
    static let chunk = 4 * 1024 * 1024
    static let window = 32 * 1024
    let fd: Int32
    let gzip: Bool
    let slots: Int
    // gzip state
    /// Two areas, each [window of preceding text | slots × chunk of text].
    private var areas: [UnsafeMutablePointer<UInt8>] = []
    private var current = 0
    private var staged = 0  // bytes of text in the current area
    private var batches = 0
    private let queue = DispatchQueue(label: "settle-gen.gzip")
    private let group = DispatchGroup()
    private var streams: UnsafeMutablePointer<z_stream>
    private var outputs: [UnsafeMutablePointer<UInt8>] = []
    private var outputCounts: UnsafeMutablePointer<Int>
    private var crcs: UnsafeMutablePointer<UInt>
    private var outputCapacity = 0
    private var crc: UInt = 0
    private var length: UInt64 = 0
    private(set) var written: UInt64 = 0

    init(fd: Int32, gzipLevel: Int32?) {
        self.fd = fd
        gzip = gzipLevel != nil
        slots = gzipLevel == nil ? 1 : max(2, min(8, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
        streams = .allocate(capacity: slots)
        outputCounts = .allocate(capacity: slots)
        crcs = .allocate(capacity: slots)
        guard let level = gzipLevel else { return }
        for _ in 0..<2 { areas.append(.allocate(capacity: OutputSink.window + slots * OutputSink.chunk)) }
        for i in 0..<slots {
            (streams + i).initialize(to: z_stream())
            // Raw deflate: the gzip wrapper is written here.
            guard settle_deflate_init_raw(streams + i, level) == Z_OK else { fatal("deflateInit2 failed") }
        }
        outputCapacity = Int(deflateBound(streams, UInt(OutputSink.chunk))) + 64
        for _ in 0..<slots { outputs.append(.allocate(capacity: outputCapacity)) }
        // gzip header: magic, deflate, no flags, mtime 0 (reproducible), xfl 0, OS unix.
        var header: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]
        header.withUnsafeMutableBufferPointer { writeAll($0.baseAddress!, 10) }
        crc = crc32(0, nil, 0)
    }

    func consume(_ bytes: UnsafeMutablePointer<UInt8>, _ count: Int, finish: Bool) {
        guard gzip else {
            writeAll(bytes, count)
            return
        }
        let capacity = slots * OutputSink.chunk
        var offset = 0
        while offset < count {
            let n = min(count - offset, capacity - staged)
            (areas[current] + OutputSink.window + staged).update(from: bytes + offset, count: n)
            staged += n
            offset += n
            if staged == capacity && !(finish && offset == count) { submit(final: false) }
        }
        if finish {
            submit(final: true)
            group.wait()
            var trailer = [UInt8](repeating: 0, count: 8)
            for i in 0..<4 {
                trailer[i] = UInt8(truncatingIfNeeded: crc >> (8 * i))
                trailer[4 + i] = UInt8(truncatingIfNeeded: length >> (8 * UInt64(i)))
            }
            trailer.withUnsafeMutableBufferPointer { writeAll($0.baseAddress!, 8) }
            for i in 0..<slots { deflateEnd(streams + i) }
        }
    }

    /// Hands the current area to the background (after the previous batch is done) and
    /// switches to the other one, primed with this area's last 32 KiB.
    private func submit(final: Bool) {
        group.wait()  // the previous batch owns the other area and the streams until it is done
        let index = current, area = areas[current], count = staged, first = batches == 0
        let next = areas[1 - current]
        let keep = min(OutputSink.window, count)
        (next + OutputSink.window - keep).update(from: area + OutputSink.window + count - keep, count: keep)
        batches += 1
        current = 1 - current
        staged = 0
        queue.async(group: group) { self.compress(area: self.areas[index], count: count, first: first, final: final) }
    }

    /// Compresses one area's chunks in parallel and writes them in order.
    private func compress(area: UnsafeMutablePointer<UInt8>, count staged: Int, first: Bool, final: Bool) {
        let chunks = max(1, (staged + OutputSink.chunk - 1) / OutputSink.chunk)
        // Each iteration touches only its own slot (stream, output, count, crc) and reads text.
        struct Shared: @unchecked Sendable {
            let text: UnsafeMutablePointer<UInt8>, streams: UnsafeMutablePointer<z_stream>
            let outputCounts: UnsafeMutablePointer<Int>, crcs: UnsafeMutablePointer<UInt>
            let outputs: [UnsafeMutablePointer<UInt8>], capacity: Int
        }
        let shared = Shared(
            text: area + OutputSink.window, streams: streams, outputCounts: outputCounts, crcs: crcs,
            outputs: outputs, capacity: outputCapacity)
        DispatchQueue.concurrentPerform(iterations: chunks) { i in
            let start = shared.text + i * OutputSink.chunk
            let count = max(0, min(OutputSink.chunk, staged - i * OutputSink.chunk))
            let s = shared.streams + i
            deflateReset(s)
            if i > 0 || !first {
                // The 32 KiB before this chunk (for chunk 0: the previous area's tail, copied in).
                deflateSetDictionary(s, start - OutputSink.window, UInt32(OutputSink.window))
            }
            s.pointee.next_in = start
            s.pointee.avail_in = UInt32(count)
            s.pointee.next_out = shared.outputs[i]
            s.pointee.avail_out = UInt32(shared.capacity)
            let last = final && i == chunks - 1
            let rc = deflate(s, last ? Z_FINISH : Z_SYNC_FLUSH)
            guard rc == (last ? Z_STREAM_END : Z_OK), s.pointee.avail_in == 0 else { fatal("deflate failed (\(rc))") }
            shared.outputCounts[i] = shared.capacity - Int(s.pointee.avail_out)
            shared.crcs[i] = crc32(0, start, UInt32(count))
        }
        for i in 0..<chunks {
            writeAll(outputs[i], outputCounts[i])
            let count = max(0, min(OutputSink.chunk, staged - i * OutputSink.chunk))
            crc = crc32_combine(crc, crcs[i], off_t(count))
            length += UInt64(count)
        }
    }

    private func writeAll(_ bytes: UnsafeMutablePointer<UInt8>, _ count: Int) {
        var offset = 0
        while offset < count {
            let n = write(fd, bytes + offset, count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                fatal("write failed: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
        written += UInt64(count)
    }
}
