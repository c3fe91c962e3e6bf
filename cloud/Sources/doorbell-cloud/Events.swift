import ArgumentParser
import CloudStore
import Foundation

struct Events: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the stored events as JSON lines, ordered by gateway and sequence.",
        discussion: """
            Each line: {"id":..,"sequence":..,"type":..,"gateway_id":..,"device":..,"occurred_at":..,
            "received_at_ms":..,"verified":[..],"body":{the body exactly as received}}
            """)

    @Option(help: ArgumentHelp("SQLite database file written by `serve`.", valueName: "path"))
    var db: String

    func run() throws {
        guard FileManager.default.fileExists(atPath: db) else {
            throw CLIError("--db \(db): no such file (start `doorbell-cloud serve --db \(db)` first)")
        }
        let events: [StoredEvent]
        do {
            events = try EventStore(path: db).allEvents()
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
