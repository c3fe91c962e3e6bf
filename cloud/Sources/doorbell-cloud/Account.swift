import ArgumentParser
import CloudCore
import CloudStore
import Foundation

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account",
        abstract: "Manage accounts directly in the database (for operators without an admin token).",
        subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an account and print {\"id\":…,\"name\":…,\"token\":…}; the token is shown only once.")

        @Option(help: ArgumentHelp("The database `serve` uses: a SQLite file, or a postgres:// URL.", valueName: "path|url"))
        var db: String

        @Option(help: "A name for the account (shown to the owners who share with it).")
        var name: String

        func run() async throws {
            let store = try await openStore(db)
            let now = Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
            let (account, token) = try await store.createAccount(name: name, now: now)
            await store.close()
            print(JSONText.object(["id": .string(account.id), "name": .string(account.name), "token": .string(token)]))
        }
    }
}

struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gateway",
        abstract: "Manage gateways directly in the database (operators).",
        subcommands: [Remove.self])

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a gateway whose owner cannot do it (sold, replaced), with its doorbells, shares, events and pushes, so another account can enroll it.")

        @Option(help: ArgumentHelp("The database `serve` uses: a SQLite file, or a postgres:// URL.", valueName: "path|url"))
        var db: String

        @Option(help: "The gateway's id (the agent's gateway_id).")
        var id: String

        func run() async throws {
            let store = try await openStore(db)
            var failure: (any Error)?
            do {
                try await store.removeGateway(id: id, accountID: nil)
            } catch {
                failure = error
            }
            await store.close()
            if let failure { throw CLIError("\(failure)") }
            print(JSONText.object(["id": .string(id), "status": .string("removed")]))
        }
    }
}

/// The store behind `--db`, or an error naming the option.
func openStore(_ db: String) async throws -> CloudStore {
    do {
        return try await CloudStore(url: db)
    } catch {
        throw CLIError("--db \(db): \(error)")
    }
}
