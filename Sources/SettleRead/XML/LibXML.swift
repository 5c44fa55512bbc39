import CLibXML2
import Synchronization

/// Process-wide libxml2 set-up, done once before the first parse.
///
/// libxml2 must never fetch anything: not a DTD, not an external entity, not a schema by
/// path. The parser options already leave entity substitution and DTD loading off
/// (`XML_PARSE_NONET` only, never `NOENT`, `DTDLOAD`, `DTDATTR`, `DTDVALID`, `XINCLUDE`);
/// the loader installed here refuses every request on top of that, so a mistake in the
/// options could still not read `file:///etc/passwd` (STYLE.md, C interop note 6).
enum LibXML {
    /// How many times libxml2 asked the loader for an external resource (all refused).
    static let refusedLoads = Atomic<Int>(0)

    private static let started: Void = {
        xmlInitParser()
        xmlSetExternalEntityLoader { _, _, _ in
            LibXML.refusedLoads.add(1, ordering: .relaxed)
            return nil
        }
    }()

    /// Runs the set-up on first use; cheap afterwards.
    static func start() { _ = started }
}
