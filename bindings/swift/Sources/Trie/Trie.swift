// The Swift binding of libtrie: force a language model to output exactly one string of a large finite set.
//
// A set of strings is compiled against a tokenizer vocabulary into an immutable `Automaton`; decoding keeps a
// plain integer `Automaton.State` per sequence:
//
//     let vocab = try Vocab(gguf: "model.gguf")
//     let automaton = try vocab.compile(["github.create_issue", "slack.send_message"])
//     var mask = automaton.makeMask()
//     var state = automaton.start
//     while state != Automaton.finished {
//         try automaton.mask(state, into: &mask)     // apply to the logits, sample token t
//         state = try automaton.advance(state, token: t)   // TrieError.tokenRejected if t is not allowed
//     }
//
// `Vocab` and `Automaton` are immutable and may be used from any number of threads at once (they are
// `Sendable`); their C handles are freed in `deinit`. Failures throw `TrieError`, carrying libtrie's message.

import CTrie

/// A failed libtrie call: the status (`trie_status`) with the library's message.
public enum TrieError: Error, Equatable, CustomStringConvertible {
    // BEGIN GENERATED TrieError.cases (scripts/gen-status.py from include/trie.h; do not edit)
    case nullArgument(String)
    case invalidArgument(String)
    case io(String)
    case unsupportedVocabulary(String)
    case unreachableString(String)
    case bufferTooSmall(String)
    case tokenRejected(String)
    case panic(String)
    case malformedFile(String)
    case emptySet(String)
    case limitExceeded(String)
    case invalidState(String)
    case vocabMismatch(String)
    // END GENERATED TrieError.cases
    /// A status this binding does not know (a newer libtrie).
    case other(status: Int32, message: String)

    init(status: Int32, message: String) {
        switch status {
        // BEGIN GENERATED TrieError.init (scripts/gen-status.py from include/trie.h; do not edit)
        case 1: self = .nullArgument(message)
        case 2: self = .invalidArgument(message)
        case 3: self = .io(message)
        case 4: self = .unsupportedVocabulary(message)
        case 5: self = .unreachableString(message)
        case 6: self = .bufferTooSmall(message)
        case 7: self = .tokenRejected(message)
        case 8: self = .panic(message)
        case 9: self = .malformedFile(message)
        case 10: self = .emptySet(message)
        case 11: self = .limitExceeded(message)
        case 12: self = .invalidState(message)
        case 13: self = .vocabMismatch(message)
        // END GENERATED TrieError.init
        default: self = .other(status: status, message: message)
        }
    }

    /// The libtrie status number (`TRIE_ERR_*`).
    public var status: Int32 {
        switch self {
        // BEGIN GENERATED TrieError.status (scripts/gen-status.py from include/trie.h; do not edit)
        case .nullArgument: return 1
        case .invalidArgument: return 2
        case .io: return 3
        case .unsupportedVocabulary: return 4
        case .unreachableString: return 5
        case .bufferTooSmall: return 6
        case .tokenRejected: return 7
        case .panic: return 8
        case .malformedFile: return 9
        case .emptySet: return 10
        case .limitExceeded: return 11
        case .invalidState: return 12
        case .vocabMismatch: return 13
        // END GENERATED TrieError.status
        case .other(let status, _): return status
        }
    }

    /// libtrie's message for the failed call (`trie_last_error`).
    public var message: String {
        switch self {
        // BEGIN GENERATED TrieError.message (scripts/gen-status.py from include/trie.h; do not edit)
        case .nullArgument(let m), .invalidArgument(let m), .io(let m), .unsupportedVocabulary(let m),
             .unreachableString(let m), .bufferTooSmall(let m), .tokenRejected(let m), .panic(let m),
             .malformedFile(let m), .emptySet(let m), .limitExceeded(let m), .invalidState(let m),
             .vocabMismatch(let m):
        // END GENERATED TrieError.message
            return m
        case .other(_, let m): return m
        }
    }

    public var description: String {
        "trie: \(String(cString: trie_status_str(status))): \(message)"
    }
}

/// Throws the `TrieError` of a failed status. The message is read right away, on the calling thread
/// (`trie_last_error` is per thread; a synchronous call cannot hop threads in between).
@inline(__always)
func check(_ status: trie_status) throws {
    let code = Int32(truncatingIfNeeded: status.rawValue)
    if code != 0 {
        throw TrieError(status: code, message: String(cString: trie_last_error()))
    }
}

/// The version of the linked libtrie, "MAJOR.MINOR.PATCH".
public var trieVersion: String { String(cString: trie_version()) }

/// The kind of a token for `Vocab(tokens:kinds:eogIDs:nVocab:)` (GGUF's `tokenizer.ggml.token_type`).
public enum TokenKind: UInt32, Sendable {
    case normal = 1, unknown = 2, control = 3, userDefined = 4, unused = 5, byte = 6
}

/// Calls `body` with C arrays of pointers and lengths over `items` (one contiguous copy of their bytes).
func withByteStrings<R>(
    _ items: [[UInt8]],
    _ body: (UnsafePointer<UnsafePointer<UInt8>?>?, UnsafePointer<Int>?, Int) throws -> R
) rethrows -> R {
    var all = [UInt8]()
    all.reserveCapacity(items.reduce(1) { $0 + $1.count })
    var offsets = [Int]()
    var lens = [Int]()
    offsets.reserveCapacity(items.count)
    lens.reserveCapacity(items.count)
    for item in items {
        offsets.append(all.count)
        lens.append(item.count)
        all.append(contentsOf: item)
    }
    all.append(0)  // never empty: a non-nil base address
    return try all.withUnsafeBufferPointer { buf in
        let ptrs: [UnsafePointer<UInt8>?] = offsets.map { buf.baseAddress! + $0 }
        return try ptrs.withUnsafeBufferPointer { p in
            try lens.withUnsafeBufferPointer { l in
                try body(items.isEmpty ? nil : p.baseAddress, items.isEmpty ? nil : l.baseAddress, items.count)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------

/// A tokenizer vocabulary. Immutable; safe to share between threads. Automata keep their own reference, so a
/// vocabulary may be released right after compiling.
public final class Vocab: @unchecked Sendable {
    let handle: OpaquePointer

    init(owning handle: OpaquePointer) { self.handle = handle }

    deinit { trie_vocab_free(handle) }

    /// Reads the tokenizer of a GGUF file (a model or a vocab-only file; only the metadata is read).
    public convenience init(gguf path: String) throws {
        var out: OpaquePointer?
        try check(trie_vocab_from_gguf(path, &out))
        self.init(owning: out!)
    }

    /// Reads a Hugging Face tokenizer.json. `eogIDs`: the end-of-generation ids (nil: inferred from the added
    /// tokens; []: none). `nVocab`: the model's padded vocabulary size (0: the largest id + 1).
    public convenience init(tokenizerJSON path: String, eogIDs: [Int32]? = nil, nVocab: Int = 0) throws {
        var out: OpaquePointer?
        if let eog = eogIDs {
            let ids = eog + [0]  // a non-nil pointer even for "none"
            try ids.withUnsafeBufferPointer {
                try check(trie_vocab_from_tokenizer_json_ex(path, $0.baseAddress, eog.count, nVocab, &out))
            }
        } else {
            try check(trie_vocab_from_tokenizer_json_ex(path, nil, 0, nVocab, &out))
        }
        self.init(owning: out!)
    }

    /// Builds a vocabulary from the bytes of every token id (copied). `kinds`: one per token, nil for all
    /// normal; `nVocab`: the mask width when larger than `tokens.count` (0: `tokens.count`).
    public convenience init(tokens: [[UInt8]], kinds: [TokenKind]? = nil, eogIDs: [Int32] = [], nVocab: Int = 0) throws {
        if let kinds = kinds, kinds.count != tokens.count {
            throw TrieError.invalidArgument("kinds.count = \(kinds.count), want tokens.count = \(tokens.count)")
        }
        let rawKinds = kinds?.map(\.rawValue)
        var out: OpaquePointer?
        try withByteStrings(tokens) { ptrs, lens, n in
            try eogIDs.withUnsafeBufferPointer { eog in
                if let rawKinds = rawKinds {
                    try rawKinds.withUnsafeBufferPointer { k in
                        try check(trie_vocab_new_ex(ptrs, lens, k.baseAddress, n, eog.baseAddress, eog.count, nVocab, &out))
                    }
                } else {
                    try check(trie_vocab_new_ex(ptrs, lens, nil, n, eog.baseAddress, eog.count, nVocab, &out))
                }
            }
        }
        self.init(owning: out!)
    }

    /// The number of token ids: the mask width in bits.
    public var nTokens: Int { trie_vocab_n_tokens(handle) }

    /// Heap bytes held by the vocabulary.
    public var memoryUsage: Int { trie_vocab_memory_usage(handle) }

    /// A copy of the bytes token `id` stands for (empty for padding and control tokens).
    public func token(_ id: Int32) throws -> [UInt8] {
        var bytes: UnsafePointer<UInt8>?
        var len = 0
        try check(trie_vocab_token(handle, id, &bytes, &len))
        return Array(UnsafeBufferPointer(start: bytes, count: len))
    }

    /// The end-of-generation token ids, ascending.
    public func eogIDs() throws -> [Int32] {
        var ids: UnsafePointer<Int32>?
        var n = 0
        try check(trie_vocab_eog_ids(handle, &ids, &n))
        return Array(UnsafeBufferPointer(start: ids, count: n))
    }

    /// Compiles a set of strings (UTF-8) against this vocabulary. See `Automaton.init(vocab:members:dropUnreachable:)`.
    public func compile(_ members: [String], dropUnreachable: Bool = false) throws -> Automaton {
        try Automaton(vocab: self, members: members.map { Array($0.utf8) }, dropUnreachable: dropUnreachable)
    }
}

// ---------------------------------------------------------------------------------------------------------------

/// A set of strings compiled against a vocabulary. Immutable; safe to use from any number of threads at once
/// (decoding state lives in the caller's `State` values).
public final class Automaton: @unchecked Sendable {
    /// A decoding state: a plain integer, one per sequence, meaningful only with the automaton that made it.
    public typealias State = UInt32

    /// The state after an end-of-generation token: the member is complete.
    public static let finished: State = .max

    let handle: OpaquePointer

    deinit { trie_automaton_free(handle) }

    /// Compiles `members` (arbitrary bytes; duplicates, prefixes and the empty string allowed) against `vocab`.
    /// `dropUnreachable`: drop the strings no token sequence can produce (see `dropped()`) instead of throwing
    /// `TrieError.unreachableString`. Throws `.emptySet`, `.unreachableString`, `.limitExceeded`.
    public init(vocab: Vocab, members: [[UInt8]], dropUnreachable: Bool = false) throws {
        var options = trie_options()
        trie_options_init(&options)
        options.drop_unreachable = dropUnreachable
        var out: OpaquePointer?
        try withByteStrings(members) { ptrs, lens, n in
            try check(trie_compile(vocab.handle, ptrs, lens, n, &options, &out))
        }
        handle = out!
    }

    /// A new reference to the automaton's vocabulary.
    public var vocab: Vocab { Vocab(owning: trie_automaton_vocab(handle)!) }

    /// The start state (0).
    public var start: State { trie_start(handle) }

    /// The number of token ids (the mask width in bits).
    public var nVocab: Int { trie_automaton_n_vocab(handle) }

    /// The number of 32-bit words of one bitmask: (nVocab + 31) / 32.
    public var maskWords: Int { trie_automaton_mask_words(handle) }

    /// The number of states (valid states are 0..<nStates and `Automaton.finished`).
    public var nStates: Int { trie_automaton_n_states(handle) }

    /// The number of distinct strings the automaton can produce.
    public var nMembers: Int { trie_automaton_n_members(handle) }

    /// Heap bytes held by the automaton, not counting its vocabulary.
    public var memoryUsage: Int { trie_automaton_memory_usage(handle) }

    /// The indices (into the members given to the initializer) of the strings dropped as unreachable.
    public func dropped() throws -> [Int] {
        var idx: UnsafePointer<Int>?
        var n = 0
        try check(trie_automaton_dropped(handle, &idx, &n))
        return Array(UnsafeBufferPointer(start: idx, count: n))
    }

    /// A bitmask buffer of `maskWords` words.
    public func makeMask() -> [UInt32] { [UInt32](repeating: 0, count: maskWords) }

    /// Writes the bitmask of `state` into `mask` (at least `maskWords` words, else `.bufferTooSmall` and nothing
    /// is written): token t is bit t % 32 of word t / 32, 1 = allowed.
    public func mask(_ state: State, into mask: inout [UInt32]) throws {
        try mask.withUnsafeMutableBufferPointer { try self.mask(state, into: $0) }
    }

    /// Writes the bitmask of `state` into memory the caller owns (for example an engine's bitmask tensor).
    public func mask(_ state: State, into buffer: UnsafeMutableBufferPointer<UInt32>) throws {
        if let base = buffer.baseAddress {
            try check(trie_mask(handle, state, base, buffer.count))
        } else {
            var dummy: UInt32 = 0  // an empty buffer is too small, not a NULL argument
            try check(trie_mask(handle, state, &dummy, 0))
        }
    }

    /// Fills one bitmask row per state: row i is `mask[i * rowWords ..< (i + 1) * rowWords]` (`rowWords` 0:
    /// `maskWords`). On any error nothing is written.
    public func maskBatch(_ states: [State], into mask: inout [UInt32], rowWords: Int = 0) throws {
        let row = rowWords == 0 ? maskWords : rowWords
        var dummy: UInt32 = 0
        try states.withUnsafeBufferPointer { s in
            try mask.withUnsafeMutableBufferPointer { m in
                if let base = m.baseAddress {
                    try check(trie_mask_batch(handle, s.baseAddress, s.count, base, m.count, row))
                } else {  // an empty buffer is too small, not a NULL argument
                    try check(trie_mask_batch(handle, s.baseAddress, s.count, &dummy, 0, row))
                }
            }
        }
    }

    /// The state after `token` (`Automaton.finished` after an end-of-generation token). Throws
    /// `.tokenRejected` for a token not allowed, `.invalidArgument` for an id outside the vocabulary,
    /// `.invalidState` for a bad state.
    public func advance(_ state: State, token: Int32) throws -> State {
        var next = state
        try check(trie_advance(handle, state, token, &next))
        return next
    }

    /// A copy of the tokens allowed in `state`, ascending (the end-of-generation ids in `Automaton.finished`).
    public func allowed(_ state: State) throws -> [Int32] {
        var n = 0
        let status = trie_allowed(handle, state, nil, 0, &n)  // the size query
        if status != TRIE_ERR_BUFFER_TOO_SMALL { try check(status) }
        var tokens = [Int32](repeating: 0, count: n)
        try tokens.withUnsafeMutableBufferPointer { buf in
            try check(trie_allowed(handle, state, buf.baseAddress, buf.count, &n))
        }
        return tokens
    }

    /// Whether a string of the set may end in `state`.
    public func isAccepting(_ state: State) -> Bool { trie_is_accepting(handle, state) }

    /// The rest of the only member left below a state.
    public struct Forced: Equatable, Sendable {
        /// The remaining bytes (empty when the member is complete).
        public var bytes: [UInt8]
        /// Tokens spelling `bytes`, longest first, without an end-of-generation token.
        public var tokens: [Int32]
    }

    /// The forced continuation when exactly one string of the set remains below `state`; nil otherwise.
    public func forced(_ state: State) throws -> Forced? {
        var nBytes = 0, nTokens = 0
        var isForced = false
        let status = trie_forced(handle, state, nil, 0, &nBytes, nil, 0, &nTokens, &isForced)
        if Int32(truncatingIfNeeded: status.rawValue) != 6 {  // TRIE_ERR_BUFFER_TOO_SMALL: sizes are set
            try check(status)
        }
        guard isForced else { return nil }
        var bytes = [UInt8](repeating: 0, count: nBytes)
        var tokens = [Int32](repeating: 0, count: nTokens)
        if nBytes > 0 || nTokens > 0 {
            try bytes.withUnsafeMutableBufferPointer { b in
                try tokens.withUnsafeMutableBufferPointer { t in
                    try check(trie_forced(handle, state, b.baseAddress, b.count, &nBytes, t.baseAddress, t.count,
                                          &nTokens, &isForced))
                }
            }
        }
        return Forced(bytes: Array(bytes.prefix(nBytes)), tokens: Array(tokens.prefix(nTokens)))
    }
}
