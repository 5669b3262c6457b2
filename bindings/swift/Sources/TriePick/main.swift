// trie-pick: chooses, for each line of input, one member of a set (a tool name such as github.create_issue) by
// decoding under libtrie's constraint with a toy scorer in place of a language model: at every step it takes
// the allowed token whose text best overlaps the words of the line, and once a single member is left it
// completes it with the forced tokens. Whatever the scorer does, the output is a member of the set.
//
//     swift run trie-pick VOCAB.gguf SET.txt [INPUT]      (INPUT: default standard input)
//
// An input line "question<TAB>expected" also checks the pick against the expected member.
// The same program in Go: bindings/go/examples/pick.

import Foundation
import Trie

let stopwords: Set<String> = ["which", "what", "tool", "the", "reply", "with", "name", "only", "service", "verb",
                              "object", "for", "and", "that", "from", "into", "all"]

/// The lower-case words of the question, of three letters or more, without the stop words.
func keywords(_ q: String) -> [[UInt8]] {
    q.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber })
        .map(String.init).filter { $0.utf8.count >= 3 && !stopwords.contains($0) }.map { Array($0.utf8) }
}

func lcp(_ a: ArraySlice<UInt8>, _ b: [UInt8]) -> Int {
    var i = 0
    while i < a.count && i < b.count && a[a.startIndex + i] == b[i] { i += 1 }
    return i
}

/// The toy scorer: the text is cut into segments at '.', '_', '-' and spaces; each segment earns the length of
/// its longest common prefix with a word of the question and loses half a point per other byte.
func score(_ text: [UInt8], _ words: [[UInt8]]) -> Double {
    let lower = text.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
    var total = 0.0
    for seg in lower.split(whereSeparator: { $0 == 46 || $0 == 95 || $0 == 45 || $0 == 32 }) {
        let best = words.map { lcp(seg, $0) }.max() ?? 0
        total += Double(best) - 0.5 * Double(seg.count - best)
    }
    return total
}

struct Picker {
    let automaton: Automaton
    let tokens: [[UInt8]]
    let eog: Set<Int32>

    init(vocab: Vocab, automaton: Automaton) throws {
        self.automaton = automaton
        tokens = try (0..<Int32(vocab.nTokens)).map { try vocab.token($0) }
        eog = Set(try vocab.eogIDs())
    }

    /// Decodes one member for the question; returns it with the number of tokens it took.
    func pick(_ question: String) throws -> (String, Int) {
        let words = keywords(question)
        var text: [UInt8] = []
        var n = 0
        var mask = automaton.makeMask()
        var state = automaton.start
        while state != Automaton.finished {
            try automaton.mask(state, into: &mask)  // an engine applies this to the logits
            if let forced = try automaton.forced(state), !forced.tokens.isEmpty {
                for t in forced.tokens {
                    state = try automaton.advance(state, token: t)
                    text += tokens[Int(t)]
                    n += 1
                }
                continue
            }
            var best: Int32 = -1
            var bestScore = 0.0
            for t in try automaton.allowed(state) {
                let s = eog.contains(t)
                    ? score(text, words) + 0.25
                    : score(text + tokens[Int(t)], words) + 0.01 * Double(tokens[Int(t)].count)
                if best < 0 || s > bestScore { best = t; bestScore = s }
            }
            state = try automaton.advance(state, token: best)
            if state != Automaton.finished {
                text += tokens[Int(best)]
                n += 1
            }
        }
        return (String(decoding: text, as: UTF8.self), n)
    }
}

func run() throws {
    let args = CommandLine.arguments
    guard args.count == 3 || args.count == 4 else {
        FileHandle.standardError.write("usage: trie-pick VOCAB.gguf SET.txt [INPUT]\n".data(using: .utf8)!)
        exit(2)
    }
    let members = try String(contentsOfFile: args[2], encoding: .utf8)
        .split(separator: "\n").map { String($0).trimmingCharacters(in: .newlines) }.filter { !$0.isEmpty }
    // docs:begin compile
    let vocab = try Vocab(gguf: args[1])
    let automaton = try vocab.compile(members, dropUnreachable: true)
    // docs:end compile
    print("libtrie \(trieVersion): \(automaton.nMembers) members, \(automaton.nStates) states, vocabulary of \(vocab.nTokens) tokens")
    let picker = try Picker(vocab: vocab, automaton: automaton)

    let input = try args.count == 4 ? String(contentsOfFile: args[3], encoding: .utf8)
                                    : String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
    var picks = 0, checked = 0, hits = 0
    for raw in input.split(separator: "\n") {
        let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        if line.isEmpty { continue }
        let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
        let (member, n) = try picker.pick(parts[0])
        picks += 1
        var verdict = ""
        if parts.count == 2 {
            checked += 1
            if member == parts[1] { hits += 1; verdict = "  (as expected)" } else { verdict = "  (expected \(parts[1]))" }
        }
        print("\(member)  <-  \(parts[0])  [\(n) tokens]\(verdict)")
    }
    if checked > 0 {
        print("\(hits)/\(checked) picks as expected (toy scorer); \(picks)/\(picks) picks are members of the set")
    }
}

do {
    try run()
} catch {
    FileHandle.standardError.write("trie-pick: \(error)\n".data(using: .utf8)!)
    exit(1)
}
