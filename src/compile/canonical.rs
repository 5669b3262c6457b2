//! Compiling token sequences instead of strings: the automaton allows exactly the given tokenizations (for
//! example the one the model's own tokenizer produces for each member, its *canonical* tokenization), not every
//! token path that spells a member.
//!
//! The states are the nodes of the trie of the sequences (token ids as symbols), numbered in preorder; a state
//! allows its children's tokens (ascending) and, where a sequence ends, the end-of-generation ids. Every state is
//! explicit. A member is the concatenation of its tokens' bytes; two sequences with the same bytes are one member
//! reached two ways.

use crate::automaton::{Automaton, Chains, CompileOptions, Derive, Explicit, State};
use crate::compile::string_trie::NONE;
use crate::error::{Error, ErrorKind, Result};
use crate::util::budget::Budget;
use crate::vocab::{TokenId, Vocabulary};
use std::sync::Arc;

impl Automaton {
    /// Compiles the token sequences `sequences` against `vocab`: the automaton allows exactly these token paths,
    /// each followed by an end-of-generation token. Use it to allow only a tokenizer's own (canonical)
    /// tokenization of each member: tokenize every member with the model's tokenizer and pass the ids.
    ///
    /// Every id must be a text token of the vocabulary (not a control, unknown, unused, padding or
    /// end-of-generation id): otherwise [`ErrorKind::InvalidArgument`] naming the sequence and position. The
    /// empty sequence is the empty member. Duplicates are merged. `options.max_states` and `max_bytes` bound the
    /// work as for [`Automaton::compile`]; `drop_unreachable` and `alignment` do not apply.
    pub fn compile_tokens<S: AsRef<[TokenId]>>(
        vocab: Arc<Vocabulary>,
        sequences: &[S],
        options: &CompileOptions,
    ) -> Result<Automaton> {
        if sequences.is_empty() {
            return Err(Error::new(ErrorKind::EmptySet, "the set of token sequences is empty: give at least one"));
        }
        if sequences.len() >= NONE as usize {
            return Err(Error::limit(format!("{} sequences exceed the limit of {}", sequences.len(), NONE - 1)));
        }
        let budget = Budget::new(options.max_bytes);
        for (i, seq) in sequences.iter().enumerate() {
            for (j, &t) in seq.as_ref().iter().enumerate() {
                if !vocab.is_text_token(t) {
                    return Err(Error::invalid(format!(
                        "token {j} of sequence {i} is id {t}, which is not a text token of the vocabulary (a \
                         control, unknown, unused, padding or end-of-generation id, or out of range): only text \
                         tokens can spell a member"
                    )));
                }
            }
        }
        let total: usize = sequences.iter().map(|s| s.as_ref().len()).sum();
        budget.charge(total.saturating_mul(4) + sequences.len() * 24, "sorting the sequences")?;
        let mut order: Vec<u32> = (0..sequences.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| sequences[a as usize].as_ref().cmp(sequences[b as usize].as_ref()));
        order.dedup_by(|b, a| sequences[*b as usize].as_ref() == sequences[*a as usize].as_ref());
        let seq = |i: usize| sequences[order[i] as usize].as_ref();
        // Nodes: one per distinct sequence prefix, in preorder (sorted sequences create them in order).
        let n_nodes = 1
            + (0..order.len())
                .map(|i| {
                    let lcp =
                        if i == 0 { 0 } else { seq(i - 1).iter().zip(seq(i)).take_while(|(a, b)| a == b).count() };
                    seq(i).len() - lcp
                })
                .sum::<usize>();
        if let Some(max) = options.max_states {
            if n_nodes > max {
                return Err(Error::limit(format!(
                    "the sequences need {n_nodes} states, over max_states = {max}; raise max_states or split the set"
                )));
            }
        }
        if n_nodes >= (NONE / 2) as usize {
            return Err(Error::limit(format!("the sequences need {n_nodes} states, over the limit of {}", NONE / 2)));
        }
        budget.charge(n_nodes.saturating_mul(40), "the automaton's states")?;
        let mut parent = Vec::with_capacity(n_nodes);
        let mut token = Vec::with_capacity(n_nodes);
        let mut depth = Vec::with_capacity(n_nodes);
        let mut ends = vec![NONE; n_nodes]; // the sequence (sorted index) ending at each node
        parent.push(NONE);
        token.push(0);
        depth.push(0u32);
        let mut path: Vec<u32> = vec![0];
        for i in 0..order.len() {
            let s = seq(i);
            let lcp = if i == 0 { 0 } else { seq(i - 1).iter().zip(s).take_while(|(a, b)| a == b).count() };
            path.truncate(lcp + 1);
            for &t in &s[lcp..] {
                let id = parent.len() as u32;
                let d = depth[*path.last().unwrap() as usize] as usize + vocab.token_bytes(t).len();
                parent.push(*path.last().unwrap());
                token.push(t);
                depth.push(u32::try_from(d).map_err(|_| Error::limit("a member is longer than 4 GiB"))?);
                path.push(id);
            }
            ends[*path.last().unwrap() as usize] = i as u32;
        }
        // Members: the distinct byte strings of the sequences, sorted; each sequence's member index.
        let bytes_of =
            |s: &[TokenId]| s.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect::<Vec<u8>>();
        let mut texts: Vec<(Vec<u8>, u32)> = (0..order.len()).map(|i| (bytes_of(seq(i)), i as u32)).collect();
        texts.sort_unstable();
        let mut member_of_seq = vec![0u32; order.len()];
        let mut member_offsets = vec![0u64];
        let mut member_bytes = Vec::new();
        for (k, (text, i)) in texts.iter().enumerate() {
            if k == 0 || texts[k - 1].0 != *text {
                member_bytes.extend_from_slice(text);
                member_offsets.push(member_bytes.len() as u64);
            }
            member_of_seq[*i as usize] = (member_offsets.len() - 2) as u32;
        }
        drop(texts);
        // Children in preorder come out ascending by token; CSR rows with the end-of-generation ids merged in.
        let eog = vocab.eog_ids();
        let mut children: Vec<Vec<(TokenId, u32)>> = vec![Vec::new(); n_nodes];
        for n in 1..n_nodes {
            children[parent[n] as usize].push((token[n], n as u32));
        }
        let mut offsets = Vec::with_capacity(n_nodes + 1);
        let mut tokens = Vec::new();
        let mut targets = Vec::new();
        let mut accepting = vec![0u64; n_nodes.div_ceil(64)];
        offsets.push(0u32);
        for n in 0..n_nodes {
            let mut row = std::mem::take(&mut children[n]);
            if ends[n] != NONE {
                accepting[n / 64] |= 1 << (n % 64);
                row.extend(eog.iter().map(|&e| (e, State::FINISHED.0)));
                row.sort_unstable();
            }
            tokens.extend(row.iter().map(|p| p.0));
            targets.extend(row.iter().map(|p| p.1));
            offsets.push(u32::try_from(tokens.len()).map_err(|_| Error::limit("over 2^32 transitions"))?);
        }
        // The single member below each node: count distinct members in each subtree (saturated at 2).
        let mut some = vec![NONE; n_nodes];
        let mut many = vec![false; n_nodes];
        for n in (0..n_nodes).rev() {
            if ends[n] != NONE {
                let m = member_of_seq[ends[n] as usize];
                if some[n] != NONE && some[n] != m {
                    many[n] = true;
                }
                some[n] = m;
            }
            let p = parent[n];
            if p != NONE && some[n] != NONE {
                let p = p as usize;
                if many[n] || (some[p] != NONE && some[p] != some[n]) {
                    many[p] = true;
                }
                some[p] = some[n];
            }
        }
        let single_member = (0..n_nodes).map(|n| if many[n] { NONE } else { some[n] }).collect();
        Ok(Automaton::assemble(
            vocab,
            Explicit { offsets, tokens, targets, accepting, depth, single_member },
            Chains { base: vec![0], member: Vec::new(), first_depth: Vec::new() },
            member_offsets,
            member_bytes,
            Vec::new(),
            0,
            Derive::ByRows(Some(false)),
            0,
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::automaton::{Automaton, CompileOptions, Step};
    use crate::vocab::{TokenKind, Vocabulary};
    use crate::ErrorKind;
    use std::sync::Arc;

    /// Tokens: a b c ab abc, EOG 5.
    fn toy() -> Arc<Vocabulary> {
        let toks: Vec<Vec<u8>> = ["a", "b", "c", "ab", "abc", "</s>"].iter().map(|s| s.as_bytes().to_vec()).collect();
        let mut kinds = vec![TokenKind::Normal; 6];
        kinds[5] = TokenKind::Control;
        Arc::new(Vocabulary::new(toks, kinds, &[5], None).unwrap())
    }

    #[test]
    fn only_the_given_tokenizations_are_allowed() {
        // "abc" only as [ab, c]; "ab" only as [ab]; "a" as [a].
        let a =
            Automaton::compile_tokens(toy(), &[vec![3, 2], vec![3], vec![0], vec![3]], &CompileOptions::new()).unwrap();
        assert_eq!(a.n_members(), 3);
        assert_eq!(a.allowed(a.start()), [0, 3]);
        let Step::Next(ab) = a.advance(a.start(), 3).unwrap() else { panic!() };
        assert!(a.is_accepting(ab));
        assert_eq!(a.allowed(ab), [2, 5]);
        assert_eq!(a.depth(ab), Some(2));
        assert_eq!(a.advance(a.start(), 4).unwrap_err().kind(), ErrorKind::TokenRejected, "[abc] is not given");
        let Step::Next(abc) = a.advance(ab, 2).unwrap() else { panic!() };
        assert_eq!(a.allowed(abc), [5]);
        assert_eq!(a.forced(ab), None);
        let f = a.forced(abc).unwrap();
        assert!(f.bytes.is_empty() && f.tokens.is_empty());
        let Step::Next(s_a) = a.advance(a.start(), 0).unwrap() else { panic!() };
        assert_eq!(a.forced(s_a).unwrap().bytes, b"");
    }

    #[test]
    fn two_tokenizations_of_one_member_are_one_member() {
        let a = Automaton::compile_tokens(toy(), &[vec![0, 1], vec![3]], &CompileOptions::new()).unwrap();
        assert_eq!(a.n_members(), 1);
        assert_eq!(a.forced(a.start()).unwrap().bytes, b"ab");
        // Saved and loaded like any automaton.
        let b = Automaton::from_bytes(toy(), &a.to_bytes()).unwrap();
        assert_eq!(b.allowed(b.start()), a.allowed(a.start()));
    }

    #[test]
    fn bad_sequences_are_errors() {
        let e = Automaton::compile_tokens(toy(), &[vec![0], vec![1, 5]], &CompileOptions::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("token 1 of sequence 1"), "{e}");
        let e = Automaton::compile_tokens(toy(), &[vec![99]], &CompileOptions::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = Automaton::compile_tokens::<Vec<u32>>(toy(), &[], &CompileOptions::new()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::EmptySet);
        let e = Automaton::compile_tokens(toy(), &[vec![0, 1, 2]], &CompileOptions::new().max_states(3)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LimitExceeded);
        // The empty sequence: EOG at once.
        let a = Automaton::compile_tokens(toy(), &[Vec::<u32>::new()], &CompileOptions::new()).unwrap();
        assert_eq!(a.allowed(a.start()), [5]);
    }
}
