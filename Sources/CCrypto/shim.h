#ifndef DOORBELL_CCRYPTO_SHIM_H
#define DOORBELL_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, which libcurl already loads for TLS: the agent's few primitives (SHA-256,
// HMAC-SHA256, Ed25519, AES-CCM, random bytes) come from it instead of a second copy of a
// crypto library linked into the binary. (AES-CMAC and P-256 ECDH for BLE pairing, below.)
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/ec.h>
#include <string.h>

// EVP_CIPHER_CTX_ctrl's CCM commands are macros and the sequence is easy to get wrong; one call
// per direction. `cipher` is a fetched AES-{128,192,256}-CCM. Returns 1 on success; on decrypt,
// 0 also when the tag does not match.
static inline int doorbell_aes_ccm(int encrypt, const EVP_CIPHER *cipher,
                                   const unsigned char *key, const unsigned char *nonce, int nonce_len,
                                   const unsigned char *aad, int aad_len,
                                   const unsigned char *in, int in_len,
                                   unsigned char *tag, int tag_len, unsigned char *out) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) return 0;
    int ok = 0, n = 0;
    if (EVP_CipherInit_ex(ctx, cipher, NULL, NULL, NULL, encrypt) != 1) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, nonce_len, NULL) != 1) goto done;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, tag_len, encrypt ? NULL : tag) != 1) goto done;
    if (EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, encrypt) != 1) goto done;
    // CCM needs the total length first (it is part of B0).
    if (EVP_CipherUpdate(ctx, NULL, &n, NULL, in_len) != 1) goto done;
    if (aad_len > 0 && EVP_CipherUpdate(ctx, NULL, &n, aad, aad_len) != 1) goto done;
    if (EVP_CipherUpdate(ctx, out, &n, in, in_len) != 1) goto done;
    if (encrypt) {
        if (EVP_CipherFinal_ex(ctx, out + n, &n) != 1) goto done;
        if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, tag_len, tag) != 1) goto done;
    }
    ok = 1;
done:
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) ERR_clear_error();
    return ok;
}
// HMAC-SHA256 keyed once (the webhook secret): the MAC is fetched and the key set up at start,
// and each message only resets the context (HMAC() fetches and keys it on every call: 4x slower).
static inline EVP_MAC_CTX *doorbell_hmac_sha256_new(const unsigned char *key, size_t key_len) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    EVP_MAC_free(mac); // the context keeps its own reference
    char digest[] = "SHA256";
    OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end() };
    if (ctx == NULL || EVP_MAC_init(ctx, key, key_len, params) != 1) {
        EVP_MAC_CTX_free(ctx);
        ERR_clear_error();
        return NULL;
    }
    return ctx;
}

// The MAC of a || b (a prefix and a body, so nothing is concatenated); `out` holds 32 bytes.
static inline int doorbell_hmac_sha256(EVP_MAC_CTX *ctx, const unsigned char *a, size_t a_len,
                                       const unsigned char *b, size_t b_len, unsigned char *out) {
    size_t n = 0;
    int ok = EVP_MAC_init(ctx, NULL, 0, NULL) == 1 && EVP_MAC_update(ctx, a, a_len) == 1
        && EVP_MAC_update(ctx, b, b_len) == 1 && EVP_MAC_final(ctx, out, &n, 32) == 1 && n == 32;
    if (!ok) ERR_clear_error();
    return ok;
}
// Bluetooth LE Secure Connections pairing (BLE/SMP/SMPCrypto.swift). Byte strings are most
// significant octet first, as libcrypto and the Core specification's tables write them.

// AES-CMAC (RFC 4493) with a 128-bit key: the MAC behind f4, f5, f6 and g2.
static inline int doorbell_aes_cmac(const unsigned char *key, const unsigned char *msg, size_t len, unsigned char *out) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    char cipher[] = "AES-128-CBC";
    OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cipher, 0), OSSL_PARAM_construct_end() };
    size_t n = 0;
    int ok = ctx && EVP_MAC_init(ctx, key, 16, params) == 1 && EVP_MAC_update(ctx, msg, len) == 1
        && EVP_MAC_final(ctx, out, &n, 16) == 1 && n == 16;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    if (!ok) ERR_clear_error();
    return ok;
}

// The specification's security function e: AES-128 of one block (ah, for private addresses).
static inline int doorbell_aes128_block(const unsigned char *key, const unsigned char *in, unsigned char *out) {
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0;
    int ok = ctx && EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), NULL, key, NULL) == 1
        && EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 && EVP_EncryptUpdate(ctx, out, &n, in, 16) == 1 && n == 16;
    EVP_CIPHER_CTX_free(ctx);
    if (!ok) ERR_clear_error();
    return ok;
}

// A fresh P-256 key pair; its public point as X || Y (32 octets each). NULL on failure.
static inline EVP_PKEY *doorbell_p256_generate(unsigned char *public_xy) {
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    unsigned char point[65];
    size_t n = 0;
    if (pkey == NULL || EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point, &n) != 1
        || n != 65 || point[0] != 0x04) {
        EVP_PKEY_free(pkey);
        ERR_clear_error();
        return NULL;
    }
    memcpy(public_xy, point + 1, 64);
    return pkey;
}

// ECDH with the peer's X || Y. 1 and the shared X coordinate when the peer's point is a valid
// point on P-256 (libcrypto checks it on import and again explicitly); 0 otherwise.
static inline int doorbell_p256_derive(EVP_PKEY *own, const unsigned char *peer_xy, unsigned char *secret) {
    unsigned char point[65];
    point[0] = 0x04;
    memcpy(point + 1, peer_xy, 64);
    char group[] = "P-256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
        OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point),
        OSSL_PARAM_construct_end(),
    };
    EVP_PKEY *peer = NULL;
    EVP_PKEY_CTX *import = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL), *check = NULL, *derive = NULL;
    size_t n = 32;
    int ok = import && EVP_PKEY_fromdata_init(import) == 1 && EVP_PKEY_fromdata(import, &peer, EVP_PKEY_PUBLIC_KEY, params) == 1
        && (check = EVP_PKEY_CTX_new_from_pkey(NULL, peer, NULL)) != NULL && EVP_PKEY_public_check(check) == 1
        && (derive = EVP_PKEY_CTX_new_from_pkey(NULL, own, NULL)) != NULL && EVP_PKEY_derive_init(derive) == 1
        && EVP_PKEY_derive_set_peer(derive, peer) == 1 && EVP_PKEY_derive(derive, secret, &n) == 1 && n == 32;
    EVP_PKEY_CTX_free(derive);
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_CTX_free(import);
    EVP_PKEY_free(peer);
    if (!ok) ERR_clear_error();
    return ok;
}
#endif
