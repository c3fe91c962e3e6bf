import ArgumentParser

@main
struct DoorbellCloud: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doorbell-cloud",
        abstract: "Back end for doorbell-agent: receives signed events over HTTPS and pushes them to every phone via APNs.",
        subcommands: [Serve.self, Events.self, AccountCommand.self, GatewayCommand.self])
}
