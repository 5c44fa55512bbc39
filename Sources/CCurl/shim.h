#ifndef SETTLE_CCURL_SHIM_H
#define SETTLE_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and friends are variadic: Swift needs typed entry points. */
static inline CURLcode settle_curl_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode settle_curl_easy_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode settle_curl_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode settle_curl_easy_setopt_write(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode settle_curl_easy_setopt_header(CURL *h, size_t (*f)(char *, size_t, size_t, void *)) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode settle_curl_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode settle_curl_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLMcode settle_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }

/* CURL_GLOBAL_ALL is a macro expression; call it through a function. */
static inline CURLcode settle_curl_global_init_all(void) { return curl_global_init(CURL_GLOBAL_ALL); }

/* CURLMsg keeps the result in a union; read it in C. */
static inline CURLcode settle_curl_msg_result(const CURLMsg *m) { return m->data.result; }
static inline int settle_curl_msg_is_done(const CURLMsg *m) { return m->msg == CURLMSG_DONE; }

/* CURL_ERROR_SIZE is a plain macro, exposed for buffer sizing. */
static inline int settle_curl_error_size(void) { return CURL_ERROR_SIZE; }
#endif
