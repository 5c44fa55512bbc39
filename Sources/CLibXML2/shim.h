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
#endif
