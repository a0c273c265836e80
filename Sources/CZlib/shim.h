// zlib, for WebSocket permessage-deflate (RFC 7692); only the Streams
// target imports this module.
#pragma once
#include <zlib.h>

// deflateInit2 and inflateInit2 are macros (they pass the version and the
// stream's size): as functions Swift can call.
static inline int czlib_deflate_init(z_streamp stream, int windowBits) {
    return deflateInit2(stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}
static inline int czlib_inflate_init(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}
