// Advertising data (Bluetooth Core Spec Vol 3 Part C §11): length-prefixed AD structures,
// `len type data[len-1]`. Total on any bytes: a zero length ends the data (the rest is padding),
// a structure running past the end is reported as truncated and dropped.

public struct ADStructure: Sendable, Equatable {
    public var type: UInt8
    /// A view into the report's bytes (no copy); index from `data.startIndex`.
    public var data: ArraySlice<UInt8>

    public static let flags: UInt8 = 0x01
    public static let completeLocalName: UInt8 = 0x09
    public static let serviceData16: UInt8 = 0x16
    public static let manufacturerData: UInt8 = 0xFF
}

public enum ADWalker {
    public static func walk(_ bytes: [UInt8]) -> (structures: [ADStructure], truncated: Bool) { walk(bytes[...]) }

    /// The same on a view (a report's data in its event): the structures are views into it.
    public static func walk(_ bytes: ArraySlice<UInt8>) -> (structures: [ADStructure], truncated: Bool) {
        var out: [ADStructure] = []
        out.reserveCapacity(4)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let length = Int(bytes[i])
            if length == 0 { break }
            guard i + 1 + length <= bytes.endIndex else { return (out, true) }
            out.append(ADStructure(type: bytes[i + 1], data: bytes[(i + 2)..<(i + 1 + length)]))
            i += 1 + length
        }
        return (out, false)
    }

    /// The service data for a 16-bit UUID (little-endian on the air), without the UUID.
    public static func serviceData(_ structures: [ADStructure], uuid16: UInt16) -> [UInt8]? {
        serviceDataView(structures, uuid16: uuid16).map { Array($0) }
    }

    /// The same as a view into the report's bytes (no copy).
    public static func serviceDataView(_ structures: [ADStructure], uuid16: UInt16) -> ArraySlice<UInt8>? {
        for s in structures where s.type == ADStructure.serviceData16 && s.data.count >= 2 {
            let b = s.data.startIndex
            if UInt16(s.data[b]) | UInt16(s.data[b + 1]) << 8 == uuid16 { return s.data.dropFirst(2) }
        }
        return nil
    }
}
