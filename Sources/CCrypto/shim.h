// OpenSSL's libcrypto, for sealing the secrets transferd's journal keeps
// (AES-256-GCM and the system's random numbers). libcurl here links the
// same library; only TransferDaemon imports this module.
#pragma once
#include <openssl/evp.h>
#include <openssl/rand.h>

// EVP_CTRL_GCM_* are plain macros, but give them names Swift can see in
// any OpenSSL version.
static inline int ccrypto_gcm_get_tag(EVP_CIPHER_CTX *context, int length, void *tag) {
    return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, length, tag);
}
static inline int ccrypto_gcm_set_tag(EVP_CIPHER_CTX *context, int length, void *tag) {
    return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, length, tag);
}
