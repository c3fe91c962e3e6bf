import NIOSSL

/// A certificate or key file that could not be used for TLS.
public struct TLSFileError: Error, CustomStringConvertible {
    public let description: String
}

extension TLSConfiguration {
    /// A TLS 1.2+ server configuration from PEM files: the certificate file may hold a chain
    /// (leaf first), the key file a PKCS#8, SEC1 or PKCS#1 private key.
    public static func server(certificatePEM: String, privateKeyPEM: String) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePEM)
        } catch {
            throw TLSFileError(description: "--tls-cert \(certificatePEM): not a readable PEM certificate file (\(error))")
        }
        guard !chain.isEmpty else {
            throw TLSFileError(description: "--tls-cert \(certificatePEM): no certificate in the file")
        }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: privateKeyPEM, format: .pem)
        } catch {
            throw TLSFileError(description: "--tls-key \(privateKeyPEM): not a readable PEM private key file (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFileError(description:
                "--tls-cert \(certificatePEM) / --tls-key \(privateKeyPEM): unusable together, is the key the certificate's? (\(error))")
        }
        return configuration
    }
}
