#pragma once
// What one holder -- a client address, an API key's principal -- may have in serve's hands at
// once: requests taken and not yet fully answered, and the bytes of answers written but not yet
// read by the client. A client that asks and never reads pins memory in both; past either bound
// its next request is refused (429 with Retry-After) before any work is done for it, so what one
// holder pins is bounded by max_requests x the largest answer + max_unsent_bytes, and what all of
// them pin together by max_total_unsent_bytes + the answers being written.
//
// A Hold is one request: taken by admit(), charged with its answer's size when the answer is
// written, and given back (request and bytes) when it is destroyed -- once the answer is sent or
// its connection is gone. Thread-safe; the Allowance must outlive its holds.

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace payrecon::api {

struct AllowanceLimits {
    std::size_t max_requests = 64;
    std::size_t max_unsent_bytes = 16u << 20u;
    std::size_t max_total_unsent_bytes = 0; // over every holder together; 0: no such bound
};

// What a holder has in hand (or all holders together), as admit() found it.
struct AllowanceUse {
    std::size_t requests = 0;
    std::size_t unsent_bytes = 0;
};

class Allowance {
public:
    class Hold {
    public:
        Hold(Allowance& owner, std::string holder) : m_owner(owner), m_holder(std::move(holder)) {}
        ~Hold();
        Hold(const Hold&) = delete;
        Hold& operator=(const Hold&) = delete;
        // Counts `bytes` more of this request's answer as unsent (until the hold ends).
        void charge(std::size_t bytes);

    private:
        Allowance& m_owner;
        std::string m_holder;
        std::size_t m_bytes = 0;
    };

    explicit Allowance(AllowanceLimits limits) : m_limits(limits) {}

    // A hold on one more request of `holder`, or nullptr if it already has max_requests in hand,
    // max_unsent_bytes unsent, or every holder together max_total_unsent_bytes. `use` receives
    // what the holder had (for the refusal's words).
    std::shared_ptr<Hold> admit(const std::string& holder, AllowanceUse* use = nullptr);

    AllowanceUse use(const std::string& holder) const;
    AllowanceUse total() const;
    const AllowanceLimits& limits() const { return m_limits; }

private:
    void release(const std::string& holder, std::size_t bytes);
    void add_bytes(const std::string& holder, std::size_t bytes);

    AllowanceLimits m_limits;
    mutable std::mutex m_mutex;
    std::map<std::string, AllowanceUse, std::less<>> m_holders; // only holders with something
    AllowanceUse m_total;
};

} // namespace payrecon::api
