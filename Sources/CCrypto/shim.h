#ifndef DOORBELL_CCRYPTO_SHIM_H
#define DOORBELL_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, which libcurl already loads for TLS: the agent's few primitives (SHA-256,
// HMAC-SHA256, Ed25519, AES-CCM, random bytes) come from it instead of a second copy of a
// crypto library linked into the binary.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/err.h>

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
#endif
