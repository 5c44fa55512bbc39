#ifndef SETTLE_CPREFETCH_SHIM_H
#define SETTLE_CPREFETCH_SHIM_H
/* A read prefetch, which Swift has no spelling for: the symbol table starts loading the
   slots of a line's fields together, so that their cache misses overlap instead of queueing
   one behind the other. A hint only: it never faults and changes no value. */
static inline void settle_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}
#endif
