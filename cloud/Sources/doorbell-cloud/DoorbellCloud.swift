import ArgumentParser

@main
struct DoorbellCloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doorbell-cloud",
        abstract: "Reference receiver for doorbell-agent events (Standard Webhooks over HTTPS).",
        subcommands: [Serve.self, Events.self])
}
