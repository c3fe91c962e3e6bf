import ArgumentParser
import CloudCore
import CloudStore
import Foundation

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the stored events as JSON lines, ordered by gateway and sequence.",
        discussion: """
            Each line: {"id":..,"sequence":..,"type":..,"gateway_id":..,"device":..,"occurred_at":..,
            "received_at_ms":..,"verified":[..],"body":{the body exactly as received}}, and for an event
            that rang phones "pushes":[{"token":first 8 hex digits,"state":..,"receipt":"displayed"|
            "not_displayed"|"none","press_to_accepted_ms":..,"press_to_displayed_ms":..,
            "accepted_to_displayed_ms":..,"displayed_on":..}]: press → APNs → on the phone, where a base
            station with the phone connected reported it (receipts).
            """)

    @Option(help: ArgumentHelp("The database `serve` uses: a SQLite file, or a postgres:// URL.", valueName: "path|url"))
    var db: String

    func run() async throws {
        if !db.contains("://"), !FileManager.default.fileExists(atPath: db) {
            throw CLIError("--db \(db): no such file (start `doorbell-cloud serve --db \(db)` first)")
        }
        let events: [StoredEvent]
        let pushes: [String: [Delivery]]
        do {
            let store = try await CloudStore(url: db)
            events = try await store.allEvents()
            pushes = try await store.deliveriesByEvent()
            await store.close()
        } catch {
            throw CLIError("--db \(db): \(error)")
        }
        var out = ""
        for event in events {
            guard let rows = pushes[event.id], !rows.isEmpty, event.jsonLine.hasSuffix("}") else {
                out += event.jsonLine + "\n"
                continue
            }
            let list = JSONText.Value.array(rows.map { d in
                .object([("token", .string(String(d.token.prefix(8)))), ("state", .string(d.state.rawValue))]
                        + d.receiptFields(pressedAt: event.occurredAt).filter { $0.0 != "accepted_at_ms" && $0.0 != "displayed_at_ms" })
            })
            out += event.jsonLine.dropLast() + ",\"pushes\":" + list.text + "}\n"
        }
        try FileHandle.standardOutput.write(contentsOf: Data(out.utf8))
    }
}
