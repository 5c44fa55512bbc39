import CLibXML2

/// A compiled XML Schema, reusable by any number of reads (also concurrently: libxml2 only
/// reads a compiled schema while validating).
public final class XMLSchema: @unchecked Sendable {
    let pointer: xmlSchemaPtr

    /// Compiles a schema from the text of an XSD document.
    ///
    /// Parsed from memory on purpose: the deny-all entity loader would refuse a path, and
    /// nothing is fetched for `xs:import` or `xs:include` either.
    public init(xsd: UnsafeRawBufferPointer) throws(XMLSchemaError) {
        pointer = try Self.compile(xsd)
    }

    /// Compiles a schema from the bytes of an XSD document.
    public init(xsd: [UInt8]) throws(XMLSchemaError) {
        var result: Result<xmlSchemaPtr, XMLSchemaError> = .failure(XMLSchemaError(message: "not compiled"))
        xsd.withUnsafeBytes { bytes in
            do throws(XMLSchemaError) {
                result = .success(try Self.compile(bytes))
            } catch {
                result = .failure(error)
            }
        }
        pointer = try result.get()
    }

    private static func compile(_ xsd: UnsafeRawBufferPointer) throws(XMLSchemaError) -> xmlSchemaPtr {
        LibXML.start()
        guard let base = xsd.baseAddress, xsd.count > 0, xsd.count <= Int(Int32.max),
            let parser = xmlSchemaNewMemParserCtxt(base.assumingMemoryBound(to: CChar.self), Int32(xsd.count))
        else {
            throw XMLSchemaError(message: "the schema is empty or too large")
        }
        defer { xmlSchemaFreeParserCtxt(parser) }
        let collector = ErrorCollector()
        let unmanaged = Unmanaged.passRetained(collector)
        defer { unmanaged.release() }
        xmlSchemaSetParserStructuredErrors(
            parser,
            { context, error in
                guard let context, let error else { return }
                let collector = Unmanaged<ErrorCollector>.fromOpaque(context).takeUnretainedValue()
                collector.messages.append(LibXMLError.message(of: error.pointee))
            }, unmanaged.toOpaque())
        let schema = xmlSchemaParse(parser)
        guard let schema, collector.messages.isEmpty else {
            if let schema { xmlSchemaFree(schema) }
            let detail = collector.messages.first ?? "unknown error"
            throw XMLSchemaError(message: "the schema does not compile: \(detail)")
        }
        return schema
    }

    /// The order export schema (`schemas/order-export.xsd`, built into the binary).
    public static let orderExport: XMLSchema = {
        do throws(XMLSchemaError) {
            return try XMLSchema(xsd: Array(OrderExportSchema.text.utf8))
        } catch {
            // The text is a constant and a test compiles it: this cannot fail in a build
            // that passed its tests.
            fatalError("the built-in order export schema does not compile: \(error.message)")
        }
    }()

    deinit { xmlSchemaFree(pointer) }

    private final class ErrorCollector {
        var messages: [String] = []
    }
}

/// A schema that cannot be compiled.
public struct XMLSchemaError: Error, Sendable {
    public let message: String
}

enum LibXMLError {
    /// A libxml2 error message as one readable line: trailing newline dropped, and the
    /// export's namespace left out of element names (`{urn:settle:order-export:1}line`).
    static func message(of error: xmlError) -> String {
        guard let raw = error.message else { return "unknown error" }
        var text = String(cString: raw)
        while let last = text.last, last == "\n" || last == " " { text.removeLast() }
        return text.replacing("{\(OrderExportSchema.namespace)}", with: "")
    }
}
