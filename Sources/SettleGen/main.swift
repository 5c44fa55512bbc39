// settle-gen: writes deterministic synthetic order exports (docs/RULES.md, Input) for
// benchmarks and load tests. See benchmarks/README.md.
//
//   settle-gen --orders N [--format csv|xml] [--gzip] [--level 1-9] [--shuffle] [--seed S] [--out FILE|-]
//
// Same flags and seed → byte-identical output. Every order is generated from its own
// random stream (seed, order index), so any order can be regenerated on its own: that is
// how --shuffle emits lines in a random permutation while holding only one 32-bit
// (order, line) handle per line in memory.
//
// The pieces: `Options` (flags), `OrderGenerator` (an order from its stream),
// `ExportWriter` (+CSV, +XML: the text), `OutputBuffer` (a reused byte buffer) and
// `OutputSink` (the file descriptor, raw or parallel gzip); `generate` ties them together.

generate(parseOptions())
