import Dispatch
import Foundation
import XCTest

@testable import Trie

/// Real vocabularies: $TRIE_ASSETS/vocab/*.gguf, else <repo>/../shared/assets. Missing assets skip the tests
/// that need them, unless TRIE_REQUIRE_ASSETS=1.
func assetsDir() throws -> URL {
    let env = ProcessInfo.processInfo.environment
    let dir: URL
    if let a = env["TRIE_ASSETS"], !a.isEmpty {
        dir = URL(fileURLWithPath: a)
    } else {
        // <repo>/bindings/swift/Tests/TrieTests/TrieTests.swift -> <repo>/../shared/assets
        dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../../../shared/assets")
    }
    if !FileManager.default.fileExists(atPath: dir.appendingPathComponent("vocab").path) {
        if env["TRIE_REQUIRE_ASSETS"] == "1" {
            XCTFail("no vocabularies under \(dir.path) (set TRIE_ASSETS)")
        }
        throw XCTSkip("no vocabularies under \(dir.path) (set TRIE_ASSETS)")
    }
    return dir
}

func loadVocab(_ name: String) throws -> Vocab {
    try Vocab(gguf: try assetsDir().appendingPathComponent("vocab/\(name)").path)
}

/// The repository's tool names (service.verb_object).
func tools() throws -> [String] {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../../data/tools.txt")
    return try String(contentsOf: url, encoding: .utf8).split(separator: "\n").map(String.init).filter { !$0.isEmpty }
}

struct Table {
    var bytes: [[UInt8]]
    var eog: Set<Int32>
    init(_ v: Vocab) throws {
        bytes = try (0..<Int32(v.nTokens)).map { try v.token($0) }
        eog = Set(try v.eogIDs())
    }
}

struct Step: Equatable {
    var state: Automaton.State
    var allowed: [Int32]
    var mask: [UInt32]
    var token: Int32
}

/// Decodes `member` with the longest allowed token at each step, then an end-of-generation token; checks that
/// mask and allowed agree.
func walk(_ a: Automaton, _ t: Table, _ member: String) throws -> [Step] {
    let target = Array(member.utf8)
    var steps: [Step] = []
    var mask = a.makeMask()
    var s = a.start
    var pos = 0
    while s != Automaton.finished {
        let allowed = try a.allowed(s)
        try a.mask(s, into: &mask)
        XCTAssertEqual(mask.reduce(0) { $0 + $1.nonzeroBitCount }, allowed.count)
        var best: Int32 = -1
        var bestLen = -1
        for tok in allowed {
            XCTAssertEqual(mask[Int(tok) / 32] >> (UInt32(tok) % 32) & 1, 1)
            if t.eog.contains(tok) {
                if pos == target.count && a.isAccepting(s) && best < 0 { best = tok; bestLen = 0 }
                continue
            }
            let b = t.bytes[Int(tok)]
            if !b.isEmpty && b.count > bestLen && target[pos...].starts(with: b) { best = tok; bestLen = b.count }
        }
        guard best >= 0 else { throw TrieError.other(status: -1, message: "no token continues \(member) at \(pos)") }
        steps.append(Step(state: s, allowed: allowed, mask: mask, token: best))
        s = try a.advance(s, token: best)
        pos += bestLen
    }
    XCTAssertEqual(pos, target.count)
    return steps
}

final class TrieTests: XCTestCase {
    func testVersion() {
        XCTAssertEqual(trieVersion.split(separator: ".").count, 3)
    }

    func testLoadGGUF() throws {
        for name in ["ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf"] {
            let v = try loadVocab(name)
            XCTAssertGreaterThan(v.nTokens, 1000)
            XCTAssertFalse(try v.eogIDs().isEmpty)
            XCTAssertThrowsError(try v.token(Int32(v.nTokens))) { XCTAssertEqual(($0 as? TrieError)?.status, 2) }
        }
        XCTAssertThrowsError(try Vocab(gguf: "/nonexistent/missing.gguf")) { error in
            guard case .io(let message)? = error as? TrieError else { return XCTFail("\(error)") }
            XCTAssertFalse(message.isEmpty)
        }
    }

    func testWalkToMember() throws {
        let members = try tools()
        let v = try loadVocab("ggml-vocab-llama-bpe.gguf")
        let a = try v.compile(members)
        XCTAssertEqual(a.nMembers, members.count)
        XCTAssertEqual(a.maskWords, (v.nTokens + 31) / 32)
        let t = try Table(v)
        for m in [members[0], members[members.count / 2], "github.create_issue"] {
            let steps = try walk(a, t, m)
            XCTAssertTrue(a.isAccepting(steps.last!.state))
        }
        XCTAssertNil(try a.forced(a.start))
    }

    func testRejectedToken() throws {
        let v = try loadVocab("ggml-vocab-llama-bpe.gguf")
        let a = try v.compile(["github.create_issue", "slack.send_message"])
        let allowed = try a.allowed(a.start)
        var rejected: Int32 = 0
        while allowed.contains(rejected) { rejected += 1 }
        XCTAssertThrowsError(try a.advance(a.start, token: rejected)) { error in
            guard case .tokenRejected(let message)? = error as? TrieError else { return XCTFail("\(error)") }
            XCTAssertFalse(message.isEmpty)
        }
        XCTAssertThrowsError(try a.advance(a.start, token: -1)) { XCTAssertEqual(($0 as? TrieError)?.status, 2) }
        XCTAssertThrowsError(try a.advance(Automaton.State(a.nStates), token: allowed[0])) {
            XCTAssertEqual(($0 as? TrieError)?.status, 12)
        }
        XCTAssertEqual(try a.allowed(Automaton.finished), try v.eogIDs())
    }

    func testMaskTooShort() throws {
        let v = try loadVocab("ggml-vocab-llama-spm.gguf")
        let a = try v.compile(["github.create_issue", "slack.send_message"])
        var short = [UInt32](repeating: 0xdead_beef, count: a.maskWords - 1)
        XCTAssertThrowsError(try a.mask(a.start, into: &short)) { XCTAssertEqual(($0 as? TrieError)?.status, 6) }
        XCTAssertTrue(short.allSatisfy { $0 == 0xdead_beef })
        var empty: [UInt32] = []
        XCTAssertThrowsError(try a.mask(a.start, into: &empty)) { XCTAssertEqual(($0 as? TrieError)?.status, 6) }
        var rows = [UInt32](repeating: 0, count: 2 * a.maskWords)
        try a.maskBatch([a.start, Automaton.finished], into: &rows)
        var one = a.makeMask()
        try a.mask(Automaton.finished, into: &one)
        XCTAssertEqual(Array(rows[a.maskWords...]), one)
    }

    func testForced() throws {
        let v = try loadVocab("ggml-vocab-llama-bpe.gguf")
        let a = try v.compile(["github.create_issue", "github.close_issue", "slack.send_message"])
        let t = try Table(v)
        let steps = try walk(a, t, "slack.send_message")
        let f = try XCTUnwrap(try a.forced(steps[1].state))
        XCTAssertEqual(f.tokens.flatMap { t.bytes[Int($0)] }, f.bytes)
        let spelled = steps.dropLast().flatMap { t.bytes[Int($0.token)] }
        XCTAssertEqual(spelled, Array("slack.send_message".utf8))
        var s = steps[1].state
        for tok in f.tokens { s = try a.advance(s, token: tok) }
        XCTAssertTrue(a.isAccepting(s))
        XCTAssertEqual(try a.forced(s), Automaton.Forced(bytes: [], tokens: []))
    }

    func testCompileErrorsAndDropped() throws {
        let v = try Vocab(tokens: ["</s>", "a", "b", "ab"].map { Array($0.utf8) },
                          kinds: [.control, .normal, .normal, .normal], eogIDs: [0], nVocab: 40)
        XCTAssertEqual(v.nTokens, 40)
        XCTAssertThrowsError(try v.compile([])) { error in
            guard case .emptySet? = error as? TrieError else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try v.compile(["ab", "az"])) { XCTAssertEqual(($0 as? TrieError)?.status, 5) }
        let a = try v.compile(["ab", "az", "ba"], dropUnreachable: true)
        XCTAssertEqual(try a.dropped(), [1])
        XCTAssertEqual(try a.allowed(a.start), [1, 2, 3])
        XCTAssertEqual(a.vocab.nTokens, 40)
    }

    /// One automaton used from many threads at once gives the single-thread results, and every failure's
    /// message is its own.
    func testConcurrentUse() throws {
        let members = try tools()
        let v = try loadVocab("ggml-vocab-llama-bpe.gguf")
        let a = try v.compile(members)
        let t = try Table(v)
        let sample = stride(from: 0, to: members.count, by: members.count / 100).map { members[$0] }
        let want = try sample.map { try walk(a, t, $0) }
        let lock = NSLock()
        var failures: [String] = []
        DispatchQueue.concurrentPerform(iterations: 16) { worker in
            for i in sample.indices.shuffled() {
                do {
                    let steps = try walk(a, t, sample[i])
                    if steps != want[i] { throw TrieError.other(status: -1, message: "\(sample[i]): steps differ") }
                    do {
                        _ = try a.advance(steps[1].state, token: 0)
                    } catch TrieError.tokenRejected(let m) {
                        if !m.contains("state \(steps[1].state)") { throw TrieError.other(status: -1, message: m) }
                    }
                } catch {
                    lock.lock(); failures.append("worker \(worker): \(error)"); lock.unlock()
                }
            }
        }
        XCTAssertEqual(failures, [])
    }
}
