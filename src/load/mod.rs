//! Reading tokenizer files into a [`Vocabulary`](crate::vocab::Vocabulary): the GGUF reader, the schemes that turn
//! token text into the bytes a model emits, and `tokenizer.json` (through the `tokenizers` crate or read directly).

pub mod gguf;
#[cfg(feature = "hf")]
pub mod hf;
pub(crate) mod text_schemes;
