#ifndef SETTLE_CLIBXML2_SHIM_H
#define SETTLE_CLIBXML2_SHIM_H
#include <libxml/xmlversion.h>
/* Debian's libxml2 pulls in ICU headers that clash with Foundation's copy in debug builds. */
#undef LIBXML_ICU_ENABLED
#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <libxml/xmlschemas.h>
#include <libxml/xmlerror.h>

/// xmlFree is a mutable C global; Swift 6 refuses to touch it directly.
static inline void settle_xml_free(void *pointer) { xmlFree(pointer); }

/// The line where the tag the parser just reported starts.
///
/// SAX start-element and DOCTYPE callbacks fire with the parser standing at the end of
/// the tag; a start tag may span lines, and the rules want the line where it begins. The
/// whole tag is still in the input buffer then, and `<` cannot occur inside it (not even
/// in an attribute value), so walk back to it counting line feeds.
static inline int settle_xml_tag_start_line(xmlParserCtxtPtr ctxt) {
    if (ctxt == NULL || ctxt->input == NULL) return 0;
    xmlParserInputPtr input = ctxt->input;
    int line = input->line;
    const xmlChar *cursor = input->cur;
    if (cursor == NULL || input->base == NULL) return line;
    while (cursor > input->base) {
        cursor--;
        if (*cursor == '<') break;
        if (*cursor == '\n') line--;
    }
    return line;
}

/// Plugs a schema validator into a parser's SAX event stream (libxml2 keeps the addresses
/// of the context's `sax` and `userData` fields to restore them when unplugging).
static inline xmlSchemaSAXPlugPtr settle_xml_plug_schema(xmlSchemaValidCtxtPtr validator,
                                                         xmlParserCtxtPtr ctxt) {
    return xmlSchemaSAXPlug(validator, &ctxt->sax, &ctxt->userData);
}

/// Routes the parser's own errors (well-formedness) to a structured handler. Set after
/// plugging the validator: the plug's SAX block does not copy `serror`.
static inline void settle_xml_set_parser_error_handler(xmlParserCtxtPtr ctxt,
                                                       xmlStructuredErrorFunc handler) {
    if (ctxt != NULL && ctxt->sax != NULL) ctxt->sax->serror = handler;
}

/// The parser's current line.
static inline int settle_xml_current_line(xmlParserCtxtPtr ctxt) {
    return (ctxt != NULL && ctxt->input != NULL) ? ctxt->input->line : 0;
}
/// The offset in the document's bytes of the parser's cursor: what it consumed and dropped
/// plus where it stands in its buffer. These are the input's own bytes only while no
/// encoding conversion runs (see `settle_xml_converts`).
static inline long settle_xml_offset(xmlParserCtxtPtr ctxt) {
    if (ctxt == NULL || ctxt->input == NULL || ctxt->input->cur == NULL || ctxt->input->base == NULL) return -1;
    return (long)ctxt->input->consumed + (long)(ctxt->input->cur - ctxt->input->base);
}

/// The offset of the `<` of the tag the parser just reported (as `settle_xml_tag_start_line`).
static inline long settle_xml_tag_start_offset(xmlParserCtxtPtr ctxt) {
    if (ctxt == NULL || ctxt->input == NULL || ctxt->input->cur == NULL || ctxt->input->base == NULL) return -1;
    xmlParserInputPtr input = ctxt->input;
    const xmlChar *cursor = input->cur;
    while (cursor > input->base) {
        cursor--;
        if (*cursor == '<') return (long)input->consumed + (long)(cursor - input->base);
    }
    return -1;
}

/// Whether the parser converts the input to UTF-8 (then its offsets are not the input's).
static inline int settle_xml_converts(xmlParserCtxtPtr ctxt) {
    if (ctxt == NULL || ctxt->input == NULL) return 1;
    if (ctxt->input->buf == NULL) return 0;
    return ctxt->input->buf->encoder != NULL;
}
#endif
