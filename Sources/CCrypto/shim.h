#ifndef SETTLE_CCRYPTO_SHIM_H
#define SETTLE_CCRYPTO_SHIM_H
/* OpenSSL's libcrypto: only its SHA-256 (hardware-accelerated where the CPU has SHA-NI).
   The SHA256_* calls are deprecated in 3.0 in favour of EVP, but they run the same block
   code without EVP's per-digest fetch and context set-up (thousands of instructions for
   each short instruction id). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
#endif
