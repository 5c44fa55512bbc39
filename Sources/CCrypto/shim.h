#ifndef SETTLE_CCRYPTO_SHIM_H
#define SETTLE_CCRYPTO_SHIM_H
/* OpenSSL's libcrypto: only its SHA-256 (hardware-accelerated where the CPU has SHA-NI). */
#include <openssl/evp.h>
#endif
