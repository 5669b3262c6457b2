// llama-server's cache of compiled things (integrations/llama-server/llama-libtrie-lru.h), without llama.cpp
// (issue 36, defect 9: a first request naming a 100,000-tool registry built its argument grammars under the cache's
// one mutex while every other tool-call request waited). Checked: a build of one key does not hold up another key
// (cached or built), concurrent callers of one key build it once and share it, a build that throws caches nothing
// and the next caller builds again, the capacity bound.
#include "../../integrations/llama-server/llama-libtrie-lru.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static int passed, failed;
#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (cond) {                                                                              \
            passed++;                                                                            \
        } else {                                                                                 \
            failed++;                                                                            \
            std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);        \
        }                                                                                        \
    } while (0)

// A gate a build waits on until the test opens it.
struct gate {
    std::mutex              mu;
    std::condition_variable cv;
    bool                    open = false;
    bool                    entered = false;
    void wait() {
        std::unique_lock<std::mutex> lock(mu);
        entered = true;
        cv.notify_all();
        cv.wait(lock, [&] { return open; });
    }
    void wait_entered() {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return entered; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(mu);
        open = true;
        cv.notify_all();
    }
};

int main() {
    using llama_libtrie::lru;

    {  // another key is served while one key's build is held
        lru<std::string>  cache;
        gate              g;
        std::atomic<int>  builds_a{0};
        cache.get("warm", 8, [] { return std::make_shared<const std::string>("warm"); });
        std::thread slow([&] {
            auto v = cache.get("a", 8, [&] {
                builds_a++;
                g.wait();
                return std::make_shared<const std::string>("A");
            });
            CHECK(*v == "A");
        });
        g.wait_entered();  // "a" is being built now
        // Other keys answer while it builds (waited for up to 10 s: a cache that built under its lock would hang
        // here until the gate opens, and fails the check instead).
        std::mutex              mu;
        std::condition_variable cv;
        bool                    others_done = false;
        std::thread             other([&] {
            bool made_b = false;
            auto b      = cache.get("b", 8, [] { return std::make_shared<const std::string>("B"); }, &made_b);
            CHECK(made_b && *b == "B");
            auto w = cache.get("warm", 8, [] { return std::make_shared<const std::string>("rebuilt"); });
            CHECK(*w == "warm");
            std::lock_guard<std::mutex> lock(mu);
            others_done = true;
            cv.notify_all();
        });
        {
            std::unique_lock<std::mutex> lock(mu);
            CHECK(cv.wait_for(lock, std::chrono::seconds(10), [&] { return others_done; }));
        }
        // Two more callers of "a" wait for the one build and share its result.
        std::vector<std::thread> waiters;
        std::atomic<int>         same{0};
        for (int i = 0; i < 2; ++i) {
            waiters.emplace_back([&] {
                bool made = true;
                auto v    = cache.get("a", 8, [&] { builds_a++; return std::make_shared<const std::string>("A2"); }, &made);
                if (!made && *v == "A") same++;
            });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        CHECK(builds_a == 1);
        g.release();
        slow.join();
        other.join();
        for (auto & t : waiters) t.join();
        CHECK(builds_a == 1);
        CHECK(same == 2);
        CHECK(cache.size() == 3);
    }
    {  // a build that throws caches nothing; the next caller builds again; waiters of a failed build retry
        lru<int> cache;
        bool     threw = false;
        try {
            cache.get("x", 4, []() -> std::shared_ptr<const int> { throw std::invalid_argument("bad set"); });
        } catch (const std::invalid_argument & e) {
            threw = std::string(e.what()) == "bad set";
        }
        CHECK(threw);
        CHECK(cache.size() == 0);
        bool made = false;
        auto v    = cache.get("x", 4, [] { return std::make_shared<const int>(7); }, &made);
        CHECK(made && *v == 7);

        gate        g;
        std::thread failing([&] {
            try {
                cache.get("y", 4, [&]() -> std::shared_ptr<const int> {
                    g.wait();
                    throw std::runtime_error("compile failed");
                });
            } catch (const std::runtime_error &) {
            }
        });
        g.wait_entered();
        std::thread retry([&] {
            auto r = cache.get("y", 4, [] { return std::make_shared<const int>(9); });
            CHECK(*r == 9);
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        g.release();
        failing.join();
        retry.join();
        CHECK(*cache.get("y", 4, [] { return std::make_shared<const int>(0); }) == 9);
    }
    {  // capacity: the least recently used goes first
        lru<int> cache;
        for (int i = 0; i < 5; ++i) {
            cache.get(std::to_string(i), 3, [i] { return std::make_shared<const int>(i); });
        }
        CHECK(cache.size() == 3);
        bool made = false;
        cache.get("0", 3, [] { return std::make_shared<const int>(100); }, &made);
        CHECK(made);  // evicted, built again
        made = true;
        cache.get("4", 3, [] { return std::make_shared<const int>(100); }, &made);
        CHECK(!made);
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
