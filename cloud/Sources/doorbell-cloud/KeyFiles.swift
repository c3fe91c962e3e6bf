import CloudCore
import Foundation

/// Reads the gateway key files named on the command line.
enum KeyFiles {
    static func gatewayKeys(secretFile: String?, publicKeyFile: String?) throws -> GatewayKeys {
        let secret = try secretFile.map { path in
            try parse(path, option: "--gateway-secret") { text throws(KeyError) in try WebhookSecret(parsing: text) }
        }
        let publicKey = try publicKeyFile.map { path in
            try parse(path, option: "--gateway-public-key") { text throws(KeyError) in
                try GatewayPublicKey(parsing: text)
            }
        }
        do {
            return try GatewayKeys(secret: secret, publicKey: publicKey)
        } catch {
            throw CLIError("\(error) (use --gateway-secret FILE and/or --gateway-public-key FILE)")
        }
    }

    private static func parse<Key>(
        _ path: String, option: String, _ parse: (String) throws(KeyError) -> Key
    ) throws -> Key {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError("\(option) \(path): cannot read the file (\(error.localizedDescription))")
        }
        do {
            return try parse(text)
        } catch {
            throw CLIError("\(option) \(path): \(error)")
        }
    }

    /// A small secret file's text, whitespace trimmed.
    static func text(_ path: String, option: String) throws -> String {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError("\(option) \(path): cannot read the file (\(error.localizedDescription))")
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw CLIError("\(option) \(path): the file is empty") }
        return trimmed
    }
}
