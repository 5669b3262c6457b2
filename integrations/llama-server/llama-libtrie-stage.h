// llama-libtrie-stage.h - libtrie's C API and its llama.cpp sampler stage (include/trie_llama.h), for the llama.cpp
// sources patched by patches/llama-server-libtrie.patch.
//
// By paths relative to this file on purpose: llama.cpp's common/ has a trie.h of its own (common_trie, a literal
// matcher), and a plain #include "trie.h" from common/sampling.cpp finds that one first.
#pragma once

#include "llama.h"

#include "../../include/trie.h"
#include "../../include/trie_llama.h"
