import CloudCore
import Hummingbird

extension Response {
    /// A response whose body is compact JSON built with `JSONText`.
    static func json(_ status: HTTPResponse.Status, _ pairs: KeyValuePairs<String, JSONText.Value>) -> Response {
        var buffer = ByteBuffer(string: JSONText.object(pairs))
        buffer.writeString("\n")
        return Response(
            status: status,
            headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: buffer))
    }

    static func error(_ status: HTTPResponse.Status, code: String, reason: String) -> Response {
        .json(status, ["error": .string(code), "reason": .string(reason)])
    }
}

extension HTTPFields {
    /// All values of the header called `name` (lower-case), in order.
    func values(named name: String) -> [String] {
        compactMap { $0.name.canonicalName == name ? $0.value : nil }
    }
}
