/// A start-up problem, printed as `Error: <message>` with exit status 1.
struct CLIError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
