// llama-libtrie-lru.h - the integration's cache of compiled things (routed sets, tool lists, registries' argument
// grammars): no llama.h needed, so tests/c/test_lru.cpp checks it alone.
//
// Invariants: a key is built at most once at a time (one in-flight build per key: later callers of that key wait for
// it and take its result); a build runs outside the cache's lock, so requests for other keys (cached or being built)
// never wait for it (a first request naming a 100,000-tool registry builds for seconds while every other request
// goes on); a build that throws caches nothing, and the next caller of its key builds again; at most `capacity`
// entries (at least 1) are kept, the least recently used dropped first (a request holding one keeps it alive).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace llama_libtrie {

template <typename T> class lru {
  public:
    // The entry of `key`, built by `make()` (outside the lock) when absent. `*made`: whether this call built it.
    // Throws what `make` throws (nothing cached).
    template <typename F> std::shared_ptr<const T> get(const std::string & key, size_t capacity, F make, bool * made = nullptr) {
        if (made) *made = false;
        std::shared_ptr<build> mine;
        {
            std::unique_lock<std::mutex> lock(mu_);
            for (;;) {
                auto it = index_.find(key);
                if (it != index_.end()) {
                    order_.splice(order_.begin(), order_, it->second);
                    return it->second->second;
                }
                auto b = building_.find(key);
                if (b == building_.end()) {
                    mine = std::make_shared<build>();
                    building_.emplace(key, mine);
                    break;
                }
                std::shared_ptr<build> other = b->second;
                other->cv.wait(lock, [&] { return other->done; });
                if (other->value) {
                    return other->value;  // built by the other caller (even if evicted since)
                }
                // the other build threw: try again (this caller may build it)
            }
        }
        std::shared_ptr<const T> value;
        try {
            value = make();
        } catch (...) {
            finish(key, mine, nullptr, capacity);
            throw;
        }
        finish(key, mine, value, capacity);
        if (made) *made = true;
        return value;
    }

    // Entries cached now (for tests).
    size_t size() {
        std::lock_guard<std::mutex> lock(mu_);
        return order_.size();
    }

  private:
    struct build {
        std::condition_variable  cv;
        bool                     done = false;
        std::shared_ptr<const T> value;
    };

    void finish(const std::string & key, const std::shared_ptr<build> & b, std::shared_ptr<const T> value, size_t capacity) {
        {
            std::lock_guard<std::mutex> lock(mu_);
            building_.erase(key);
            if (value) {
                order_.emplace_front(key, value);
                index_[key] = order_.begin();
                while (order_.size() > (capacity ? capacity : 1)) {
                    index_.erase(order_.back().first);
                    order_.pop_back();
                }
            }
            b->value = std::move(value);
            b->done  = true;
        }
        b->cv.notify_all();
    }

    using entry = std::pair<std::string, std::shared_ptr<const T>>;
    std::mutex                                                            mu_;
    std::list<entry>                                                      order_;
    std::unordered_map<std::string, typename std::list<entry>::iterator> index_;
    std::unordered_map<std::string, std::shared_ptr<build>>              building_;
};

}  // namespace llama_libtrie
