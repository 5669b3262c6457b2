//! Compiling a set inside a larger output ([`Automaton::compile_template`]): render every member's segment, build
//! the trie of the segments, align and freeze, then record member identity (see `automaton/segments.rs`).

use crate::automaton::{Automaton, CompileOptions, Segments};
use crate::compile::freeze::{align, check_values_len, first_copy_values, freeze};
use crate::compile::string_trie::{StringTrie, NONE};
use crate::error::{show_bytes, Error, Result};
#[cfg(doc)]
use crate::template::Render;
use crate::template::{End, Template};
use crate::util::budget::Budget;
use crate::vocab::Vocabulary;
use rayon::prelude::*;
use std::sync::Arc;

impl Automaton {
    /// Compiles a set written inside a larger output: the automaton's language is exactly the *segments*
    /// `{ template.prefix + render(m) + template.suffix }` of the members `m`, followed by an end-of-generation
    /// token ([`End::Eog`]) or handed over to what follows ([`End::Open`]: see [`Automaton::crossing`]). A state
    /// is still one `u32`; [`Automaton::member_at`] names the member (its index in `members`, the first copy of a
    /// duplicate) where a segment is complete.
    ///
    /// Errors: those of [`Automaton::compile`]; a member the rendering refuses (not UTF-8 for
    /// [`Render::JsonString`], not one JSON value for [`Render::JsonText`]); with [`End::Open`], a segment that is
    /// a proper prefix of another (the hand-over point would be ambiguous: render as JSON, or end the suffix with
    /// a delimiter no member contains); more than `u32::MAX - 1` members.
    pub fn compile_template<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        members: &[S],
        template: &Template,
        options: &CompileOptions,
    ) -> Result<Automaton> {
        Self::compile_template_valued(vocab, members, None, template, options)
    }

    /// [`Automaton::compile_template`] of a map: `values[i]` is the value of `members[i]`, and each member
    /// carries the value of its first copy (the copy [`Automaton::member_at`] names): see
    /// [`Automaton::member_value`], [`Automaton::possible_values`]. Errors: those of
    /// [`Automaton::compile_template`]; [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// `values` and `members` differ in length.
    pub fn compile_template_with_values<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        members: &[S],
        values: &[u64],
        template: &Template,
        options: &CompileOptions,
    ) -> Result<Automaton> {
        check_values_len(values.len(), members.len(), "members")?;
        Self::compile_template_valued(vocab, members, Some(values), template, options)
    }

    fn compile_template_valued<S: AsRef<[u8]> + Sync>(
        vocab: Arc<Vocabulary>,
        members: &[S],
        values: Option<&[u64]>,
        template: &Template,
        options: &CompileOptions,
    ) -> Result<Automaton> {
        if members.len() >= NONE as usize {
            return Err(Error::limit(format!("{} members: at most {} are supported", members.len(), NONE - 1)));
        }
        let budget = Budget::new(options.max_bytes);
        if template.is_bare() {
            let list: Vec<&[u8]> = members.iter().map(|m| m.as_ref()).collect();
            return Self::compile_segments(vocab, &list, values, template, options, &budget);
        }
        let (bytes, ends) = render_all(members, template, &budget)?;
        let segments: Vec<&[u8]> =
            ends.iter().scan(0, |start, &end| Some(&bytes[std::mem::replace(start, end)..end])).collect();
        Self::compile_segments(vocab, &segments, values, template, options, &budget)
    }

    /// [`Automaton::compile_template`] of members already rendered: `segments[i]` is member `i`'s segment (and
    /// `values[i]` its value, when given).
    pub(crate) fn compile_segments(
        vocab: Arc<Vocabulary>,
        segments: &[&[u8]],
        values: Option<&[u64]>,
        template: &Template,
        options: &CompileOptions,
        budget: &Budget,
    ) -> Result<Automaton> {
        if segments.len() >= NONE as usize {
            return Err(Error::limit(format!("{} members: at most {} are supported", segments.len(), NONE - 1)));
        }
        let trie = if template.is_bare() {
            StringTrie::build(segments, &vocab.index.single_byte, budget, options.max_states)?
        } else {
            let shared = template.prefix.len();
            StringTrie::build_sharing(segments, shared, &vocab.index.single_byte, budget, options.max_states)?
        };
        let open = template.end == End::Open;
        if open {
            check_prefix_free(&trie)?;
        }
        let n_members = trie.n_members();
        let mut member_input = trie.member_input.clone();
        let by_rank = values.map(|v| first_copy_values(&member_input, v));
        let edges = align(&trie, &vocab, options, budget, open)?;
        let mut a = freeze(vocab, trie, edges, options, budget, open)?;
        if !a.dropped.is_empty() {
            // Mark dropped members: their first input index is in `dropped`.
            for id in member_input.iter_mut() {
                if a.dropped.binary_search(&(*id as usize)).is_ok() {
                    *id = NONE;
                }
            }
        }
        debug_assert_eq!(member_input.len(), n_members);
        a.segments = Some(Segments::new(template.clone(), member_input));
        a.values = by_rank.map(Into::into);
        Ok(a)
    }
}

/// Every member's segment, rendered in parallel chunks into one buffer: `(bytes, ends)`, segment `i` being
/// `bytes[ends[i - 1]..ends[i]]`. A member the rendering refuses is an error naming its index.
pub(crate) fn render_all<S: AsRef<[u8]> + Sync>(
    members: &[S],
    t: &Template,
    budget: &Budget,
) -> Result<(Vec<u8>, Vec<usize>)> {
    const CHUNK: usize = 8192;
    let frame = t.prefix.len() + t.suffix.len() + 2;
    let total: usize = members.iter().map(|m| m.as_ref().len() + frame).sum();
    budget.charge(total + members.len() * 16, "the rendered segments")?;
    let chunks: Vec<(Vec<u8>, Vec<usize>)> = members
        .par_chunks(CHUNK)
        .enumerate()
        .map(|(c, chunk)| {
            let mut bytes = Vec::with_capacity(chunk.iter().map(|m| m.as_ref().len() + frame).sum());
            let mut lens = Vec::with_capacity(chunk.len());
            for (j, m) in chunk.iter().enumerate() {
                let start = bytes.len();
                bytes.extend_from_slice(&t.prefix);
                t.render_member(m.as_ref(), &mut bytes)
                    .map_err(|e| Error::new(e.kind(), format!("member {}: {e}", c * CHUNK + j)))?;
                bytes.extend_from_slice(&t.suffix);
                lens.push(bytes.len() - start);
            }
            Ok((bytes, lens))
        })
        .collect::<Result<_>>()?;
    let mut bytes = Vec::with_capacity(chunks.iter().map(|c| c.0.len()).sum());
    let mut ends = Vec::with_capacity(members.len());
    for (b, lens) in chunks {
        let base = bytes.len();
        bytes.extend_from_slice(&b);
        ends.extend(lens.iter().scan(base, |e, &l| {
            *e += l;
            Some(*e)
        }));
    }
    Ok((bytes, ends))
}

/// With an open end, no segment may be a proper prefix of another. Members are sorted, so a member that is a
/// prefix of any later one is a prefix of the next.
fn check_prefix_free(trie: &StringTrie) -> Result<()> {
    for i in 1..trie.n_members() {
        let prev = trie.member(i - 1);
        if trie.lcp[i] as usize == prev.len() {
            return Err(Error::invalid(format!(
                "with an open end, segment {} is a prefix of segment {}: where the first is complete the engine could \
                 not tell whether to hand over; render members as JSON or end the suffix with a delimiter",
                show_bytes(prev, 60),
                show_bytes(trie.member(i), 60)
            )));
        }
    }
    Ok(())
}
