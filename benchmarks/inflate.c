/* The floor for reading a gzipped export: zlib's own inflate into a reused 256 KiB
 * buffer, output discarded. Handles multi-member gzip. Build:
 *     cc -O2 -o inflate benchmarks/inflate.c -lz
 * Usage: inflate FILE   (prints the decompressed byte count) */
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#define CHUNK (256 * 1024)

int main(int argc, char **argv) {
    static unsigned char in[CHUNK], out[CHUNK];
    FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
    if (!f) { fprintf(stderr, "usage: inflate FILE.gz\n"); return 2; }
    z_stream s = {0};
    if (inflateInit2(&s, 15 + 16) != Z_OK) return 1;
    unsigned long long total = 0;
    int rc = Z_OK;
    for (;;) {
        if (s.avail_in == 0) {
            s.avail_in = (uInt)fread(in, 1, CHUNK, f);
            s.next_in = in;
            if (s.avail_in == 0) break;
        }
        s.next_out = out;
        s.avail_out = CHUNK;
        rc = inflate(&s, Z_NO_FLUSH);
        total += CHUNK - s.avail_out;
        if (rc == Z_STREAM_END) { inflateReset(&s); rc = Z_OK; continue; }  /* next member */
        if (rc != Z_OK && rc != Z_BUF_ERROR) { fprintf(stderr, "inflate: error %d\n", rc); return 1; }
    }
    inflateEnd(&s);
    fclose(f);
    printf("%llu\n", total);
    return 0;
}
