// Typed wrappers for libcurl's variadic calls, which Swift cannot call.
// Each wrapper passes exactly the argument type the option documents.
#ifndef URLLOADING_CCURL_SHIM_H
#define URLLOADING_CCURL_SHIM_H

#include <curl/curl.h>

static inline CURLcode urlloading_easy_setopt_long(CURL *h, CURLoption o, long v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_off_t(CURL *h, CURLoption o, curl_off_t v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_string(CURL *h, CURLoption o, const char *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_pointer(CURL *h, CURLoption o, void *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_write_callback(CURL *h, CURLoption o, curl_write_callback v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_read_callback(CURL *h, CURLoption o, curl_read_callback v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_xferinfo_callback(CURL *h, CURLoption o, curl_xferinfo_callback v) {
    return curl_easy_setopt(h, o, v);
}
static inline CURLcode urlloading_easy_setopt_seek_callback(CURL *h, CURLoption o, curl_seek_callback v) {
    return curl_easy_setopt(h, o, v);
}

static inline CURLcode urlloading_easy_getinfo_long(CURL *h, CURLINFO i, long *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode urlloading_easy_getinfo_off_t(CURL *h, CURLINFO i, curl_off_t *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode urlloading_easy_getinfo_double(CURL *h, CURLINFO i, double *v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode urlloading_easy_getinfo_string(CURL *h, CURLINFO i, char **v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode urlloading_easy_getinfo_pointer(CURL *h, CURLINFO i, void **v) {
    return curl_easy_getinfo(h, i, v);
}
static inline CURLcode urlloading_easy_getinfo_certinfo(CURL *h, struct curl_certinfo **v) {
    return curl_easy_getinfo(h, CURLINFO_CERTINFO, v);
}

// CURLAUTH_* are macros with casts, which Swift does not import.
static const unsigned long urlloading_auth_ntlm = CURLAUTH_NTLM;
static const unsigned long urlloading_auth_negotiate = CURLAUTH_NEGOTIATE;

// CURLVERSION_NOW is a macro naming the header's own version of the struct.
static inline curl_version_info_data *urlloading_version_info(void) {
    return curl_version_info(CURLVERSION_NOW);
}

// A spin-wait's hint to the CPU (x86 PAUSE, Arm YIELD): the loop's short
// spin before sleeping leaves the core's other hardware thread its share.
static inline void urlloading_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// A share object's options (CURLSHOPT_*), variadic too.
static inline CURLSHcode urlloading_share_setopt_long(CURLSH *s, CURLSHoption o, long v) {
    return curl_share_setopt(s, o, v);
}
static inline CURLSHcode urlloading_share_setopt_pointer(CURLSH *s, CURLSHoption o, void *v) {
    return curl_share_setopt(s, o, v);
}
static inline CURLSHcode urlloading_share_setopt_lock(CURLSH *s, curl_lock_function f) {
    return curl_share_setopt(s, CURLSHOPT_LOCKFUNC, f);
}
static inline CURLSHcode urlloading_share_setopt_unlock(CURLSH *s, curl_unlock_function f) {
    return curl_share_setopt(s, CURLSHOPT_UNLOCKFUNC, f);
}

static inline CURLMcode urlloading_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    return curl_multi_setopt(m, o, v);
}

// The TLS version and cipher suite of a transfer's connection ("TLSv1.3",
// "TLS_AES_256_GCM_SHA384"), or NULL when it has none or the TLS library is
// not OpenSSL. OpenSSL's functions are looked up in the process (libcurl
// brought libssl in), so nothing links against it. Call while the
// connection is alive (libcurl may free the SSL object once it closes).
#include <dlfcn.h>
static inline const char *urlloading_tls_detail(CURL *h, int cipher) {
    struct curl_tlssessioninfo *info = NULL;
    if (curl_easy_getinfo(h, CURLINFO_TLS_SSL_PTR, &info) != CURLE_OK || info == NULL) return NULL;
    if (info->backend != CURLSSLBACKEND_OPENSSL || info->internals == NULL) return NULL;
    if (!cipher) {
        const char *(*get_version)(const void *) = (const char *(*)(const void *))dlsym(RTLD_DEFAULT, "SSL_get_version");
        return get_version ? get_version(info->internals) : NULL;
    }
    const void *(*get_cipher)(const void *) = (const void *(*)(const void *))dlsym(RTLD_DEFAULT, "SSL_get_current_cipher");
    const char *(*cipher_name)(const void *) = (const char *(*)(const void *))dlsym(RTLD_DEFAULT, "SSL_CIPHER_get_name");
    if (!get_cipher || !cipher_name) return NULL;
    const void *current = get_cipher(info->internals);
    return current ? cipher_name(current) : NULL;
}

#endif
