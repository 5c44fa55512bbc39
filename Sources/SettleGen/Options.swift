import Glibc

/// settle-gen's flags; see `usage()`.
struct Options {
    var orders = -1
    var xml = false
    var gzip = false
    var level: Int32 = 6
    var shuffle = false
    var seed: UInt64 = 1
    var out = "-"
}

/// Prints the usage text and exits with 64.
func usage() -> Never {
    printError(
        """
        usage: settle-gen --orders N [--format csv|xml] [--gzip] [--level 1-9] [--shuffle] [--seed S] [--out FILE|-]
          --orders N     number of orders (1-4 lines each, 2.5 on average); 2700000 ≈ 6.75 M lines ≈ 1 GB CSV
          --format       csv (default) or xml (docs/RULES.md, Input)
          --gzip         compress with zlib's deflate (gzip wrapper), level 6 unless --level
          --shuffle      CSV: emit lines in a random permutation so groups are not contiguous;
                         XML: permute the orders
          --seed S       random seed (default 1); same flags and seed give byte-identical output
          --out FILE|-   output file (default standard output)

        """)
    exit(64)
}

/// Reads the command line; a bad flag or value exits with 64.
func parseOptions() -> Options {
    var options = Options()
    var args = CommandLine.arguments.dropFirst()
    func value(_ name: String) -> String {
        guard let v = args.popFirst() else { fatal("\(name) needs a value") }
        return v
    }
    while let argument = args.popFirst() {
        switch argument {
        case "--orders":
            guard let n = Int(value(argument).replacingUnderscores()), n >= 0, n < 1 << 29 else {
                fatal("--orders: 0 ..< 536870912")
            }
            options.orders = n
        case "--format":
            switch value(argument) {
            case "csv": options.xml = false
            case "xml": options.xml = true
            default: fatal("--format: csv or xml")
            }
        case "--gzip": options.gzip = true
        case "--level":
            guard let level = Int32(value(argument)), (1...9).contains(level) else { fatal("--level: 1 ... 9") }
            options.level = level
        case "--shuffle": options.shuffle = true
        case "--seed":
            guard let seed = UInt64(value(argument)) else { fatal("--seed: a non-negative integer") }
            options.seed = seed
        case "--out": options.out = value(argument)
        case "-h", "--help": usage()
        default: fatal("unknown argument \(argument) (see --help)")
        }
    }
    if options.orders < 0 { usage() }
    return options
}

extension String {
    func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}
