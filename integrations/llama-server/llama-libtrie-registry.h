// llama-libtrie-registry.h - which trie_set_cache serves a model's vocabulary (llama-libtrie.cpp; no llama.h
// needed, so tests/c/test_registry.cpp checks it against libtrie alone).
//
// B2: a vocabulary's address is not its identity (a model freed and another loaded at the same address). A model
// is found by its address *and* a signature of its vocabulary's content; a new address or a changed signature
// builds the trie vocabulary again. Set caches are keyed by the trie vocabulary's fingerprint (two models with one
// tokenizer share one), held by the models that use them, and released with the last of them (a stale address's
// entry is replaced). Compiled sets keep their own references: nothing a running request holds is freed under it.
#pragma once

#include "../../include/trie.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace llama_libtrie {

// One trie_set_cache and its vocabulary (for compiles outside the cache: recognized shapes, tool names), freed
// with the last holder.
struct set_cache {
    trie_set_cache * cache = nullptr;
    trie_vocab *     vocab = nullptr;  // own reference
    set_cache() = default;
    set_cache(const set_cache &) = delete;
    set_cache & operator=(const set_cache &) = delete;
    ~set_cache() {
        trie_set_cache_free(cache);
        trie_vocab_free(vocab);
    }
};

class registry {
  public:
    // The set cache of the vocabulary at `key` whose content has signature `sig`, under `config`. `build` returns a
    // new trie_vocab (a reference this call frees) or throws; it is called only for a new key or a changed signature.
    // Throws std::invalid_argument when libtrie refuses the config. Thread-safe; one build at a time.
    std::shared_ptr<set_cache> get(const void * key, uint64_t sig, const trie_set_config & config,
                                   const std::function<trie_vocab *()> & build) {
        if (auto sets = lookup(key, sig)) {
            return sets;
        }
        std::lock_guard<std::mutex> one_build(build_mu_);
        if (auto sets = lookup(key, sig)) {  // built by another thread meanwhile
            return sets;
        }
        std::unique_ptr<trie_vocab, void (*)(trie_vocab *)> vocab(build(), trie_vocab_free);
        std::array<uint8_t, 16> fp{};
        if (trie_vocab_fingerprint(vocab.get(), fp.data()) != TRIE_OK) {
            throw std::invalid_argument(std::string("libtrie: ") + trie_last_error());
        }
        std::shared_ptr<set_cache> sets;
        {
            std::lock_guard<std::mutex> lock(mu_);
            auto it = by_fingerprint_.find(fp);
            if (it != by_fingerprint_.end()) {
                sets = it->second.lock();
            }
        }
        if (!sets) {
            sets = std::make_shared<set_cache>();
            if (trie_set_cache_new(vocab.get(), &config, &sets->cache) != TRIE_OK) {  // keeps its own reference
                throw std::invalid_argument(std::string("libtrie cannot serve sets: ") + trie_last_error());
            }
            sets->vocab = trie_vocab_retain(vocab.get());
        }
        std::lock_guard<std::mutex> lock(mu_);
        for (auto it = by_fingerprint_.begin(); it != by_fingerprint_.end();) {  // caches nobody holds any more
            it = it->second.expired() ? by_fingerprint_.erase(it) : std::next(it);
        }
        by_fingerprint_[fp] = sets;
        models_[key]        = model{ sig, sets };  // replaces the entry of a model freed at this address
        return sets;
    }

    // Calls f(cache) for every set cache alive.
    template <typename F> void each(F f) {
        std::map<std::array<uint8_t, 16>, std::shared_ptr<set_cache>> live;
        {
            std::lock_guard<std::mutex> lock(mu_);
            for (const auto & kv : by_fingerprint_) {
                if (auto p = kv.second.lock()) {
                    live[kv.first] = p;
                }
            }
        }
        for (const auto & kv : live) {
            f(kv.second->cache);
        }
    }

  private:
    struct model {
        uint64_t                   signature = 0;
        std::shared_ptr<set_cache> sets;
    };

    std::shared_ptr<set_cache> lookup(const void * key, uint64_t sig) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = models_.find(key);
        return it != models_.end() && it->second.signature == sig ? it->second.sets : nullptr;
    }

    std::mutex                                                    mu_;        // guards the two maps
    std::mutex                                                    build_mu_;  // one vocabulary built at a time
    std::map<const void *, model>                                 models_;
    std::map<std::array<uint8_t, 16>, std::weak_ptr<set_cache>>   by_fingerprint_;
};

}  // namespace llama_libtrie
