import ArgumentParser
import CloudStore
import Foundation

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the stored events as JSON lines, ordered by gateway and sequence.",
        discussion: """
            Each line: {"id":..,"sequence":..,"type":..,"gateway_id":..,"device":..,"occurred_at":..,
            "received_at_ms":..,"verified":[..],"body":{the body exactly as received}}
            """)

    @Option(help: ArgumentHelp("The database `serve` uses: a SQLite file, or a postgres:// URL.", valueName: "path|url"))
    var db: String

    func run() async throws {
        if !db.contains("://"), !FileManager.default.fileExists(atPath: db) {
            throw CLIError("--db \(db): no such file (start `doorbell-cloud serve --db \(db)` first)")
        }
        let events: [StoredEvent]
        do {
            let store = try await CloudStore(url: db)
            events = try await store.allEvents()
            await store.close()
        } catch {
            throw CLIError("--db \(db): \(error)")
        }
        var out = ""
        for event in events {
            out += event.jsonLine + "\n"
        }
        try FileHandle.standardOutput.write(contentsOf: Data(out.utf8))
    }
}
