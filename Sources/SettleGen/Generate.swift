import Glibc

/// Writes the export the options ask for: to standard output, or to `FILE.tmp` renamed to
/// `FILE` once it is complete and synced.
func generate(_ options: Options) {
    let fd: Int32
    let tmpPath = options.out + ".tmp"
    if options.out == "-" {
        fd = 1
    } else {
        fd = open(tmpPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { fatal("cannot write \(tmpPath): \(String(cString: strerror(errno)))") }
    }
    let sink = OutputSink(fd: fd, gzipLevel: options.gzip ? options.level : nil)
    let out = OutputBuffer(sink: sink)
    let writer = ExportWriter(out: out, seed: options.seed)
    let handles = options.shuffle ? shuffledHandles(options) : []
    let lines =
        options.xml
        ? writeXML(options, handles: handles, writer: writer) : writeCSV(options, handles: handles, writer: writer)
    out.finish()
    if options.out != "-" {
        guard fsync(fd) == 0 || errno == EINVAL, close(fd) == 0 else { fatal("cannot write \(options.out)") }
        guard rename(tmpPath, options.out) == 0 else { fatal("cannot rename to \(options.out)") }
    }
    printError(
        "settle-gen: \(options.orders) orders, \(lines) lines, \(out.total) bytes\(options.gzip ? " → \(sink.written) bytes gzip level \(options.level)" : "")\n"
    )
}

/// The order of emission for --shuffle: a Fisher–Yates permutation drawn from the seed.
/// CSV shuffles line handles (order << 2 | line); XML shuffles orders.
private func shuffledHandles(_ options: Options) -> [UInt32] {
    let n = options.orders
    var handles: [UInt32] = []
    if options.xml {
        handles = (0..<n).map { UInt32($0) }
    } else {
        handles.reserveCapacity(n * 5 / 2 + 16)
        for i in 0..<n {
            var rng = orderStream(seed: options.seed, index: i)
            let count = lineCount(&rng)
            for k in 0..<count { handles.append(UInt32(i) << 2 | UInt32(k)) }
        }
    }
    var rng = SplitMix64(SplitMix64.mix(options.seed ^ 0x5348_5546_464C_4521))
    handles.withUnsafeMutableBufferPointer { h in
        var i = h.count - 1
        while i > 0 {
            let j = Int(rng.next() % UInt64(i + 1))
            h.swapAt(i, j)
            i -= 1
        }
    }
    return handles
}

/// The XML export (orders in `handles`' order when shuffled); returns the number of lines.
private func writeXML(_ options: Options, handles: [UInt32], writer: ExportWriter) -> Int {
    let out = writer.out
    var order = SyntheticOrder()
    var lines = 0
    out.ascii("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<orderExport xmlns=\"urn:settle:order-export:1\">\n")
    for i in 0..<options.orders {
        makeOrder(seed: options.seed, index: options.shuffle ? Int(handles[i]) : i, into: &order)
        writer.xmlOrder(order)
        lines += order.lineCount
    }
    out.reserve()
    out.ascii("</orderExport>\n")
    return lines
}

/// The CSV export (lines in `handles`' order when shuffled); returns the number of lines.
private func writeCSV(_ options: Options, handles: [UInt32], writer: ExportWriter) -> Int {
    var order = SyntheticOrder()
    writer.out.ascii(ExportWriter.header)
    guard options.shuffle else {
        var lines = 0
        for i in 0..<options.orders {
            makeOrder(seed: options.seed, index: i, into: &order)
            for k in 0..<order.lineCount { writer.csvLine(order, lineIndex: k) }
            lines += order.lineCount
        }
        return lines
    }
    // Consecutive handles of one order regenerate it only once.
    var current = -1
    for handle in handles {
        let i = Int(handle >> 2)
        if i != current {
            makeOrder(seed: options.seed, index: i, into: &order)
            current = i
        }
        writer.csvLine(order, lineIndex: Int(handle & 3))
    }
    return handles.count
}
