// OpenSSL's libssl, for TLS on a connection the stream tasks already own
// (STARTTLS: libcurl's connect-only mode cannot upgrade an open
// connection). libcurl here links the same library; only the Streams
// target imports this module.
#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/sha.h>
#include <openssl/rand.h>

// Macros in OpenSSL's headers, as functions Swift can call.
static inline long ctls_set_server_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline long ctls_set_mode_partial_writes(SSL *ssl) {
    return SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
static inline int ctls_set_min_version(SSL_CTX *context, int version) {
    return (int)SSL_CTX_set_min_proto_version(context, version);
}
static inline int ctls_set_max_version(SSL_CTX *context, int version) {
    return (int)SSL_CTX_set_max_proto_version(context, version);
}
