#ifndef SETTLE_CZLIB_SHIM_H
#define SETTLE_CZLIB_SHIM_H
#include <zlib.h>

/// inflateInit2 is a macro; this gives Swift a function for gzip decoding (windowBits 15 + 16).
static inline int settle_inflate_init_gzip(z_stream *stream) {
    return inflateInit2(stream, MAX_WBITS + 16);
}

/// deflateInit2 is a macro too; this writes raw deflate (windowBits -15) at `level`, for a
/// writer that puts its own gzip header and trailer around chunks compressed in parallel.
static inline int settle_deflate_init_raw(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
}
#endif
