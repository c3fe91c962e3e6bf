import CloudCore
import Hummingbird
import NIOCore

/// How large a request body may be, and the one answer to a larger one: 413 with JSON that
/// says the limit, whether the body declared its length or came chunked.
public enum BodyLimits {
    /// `POST /events`: an event with its data.
    public static let events = 256 * 1024
    /// `POST /heartbeat`: a few short fields.
    public static let heartbeat = 4 * 1024
    /// The app API: accounts, names, messages.
    public static let api = 64 * 1024
    /// Above this a declared content-length is refused before routing (`ConnectionGuard`).
    public static let any = events

    /// The 413's JSON: what happened and the limit in bytes.
    static func tooLargeJSON(limit: Int, what: String) -> String {
        JSONText.object([
            "error": .string("payload_too_large"),
            "reason": .string("\(what) is larger than this server accepts: at most \(limit) bytes (\(limit / 1024) KiB)"),
            "limit_bytes": .int(Int64(limit)),
        ]) + "\n"
    }

    static func tooLarge(limit: Int) -> Response {
        Response(status: .contentTooLarge, headers: [.contentType: "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: tooLargeJSON(limit: limit, what: "the request body"))))
    }

    /// The whole body, or `BodyTooLarge` once more than `limit` bytes came (chunked or not).
    static func collect(_ request: Request, limit: Int) async throws -> ByteBuffer {
        do {
            return try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw BodyTooLarge(limit: limit)
        }
    }
}

struct BodyTooLarge: Error {
    let limit: Int
}
