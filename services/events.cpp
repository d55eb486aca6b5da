#include "services/events.hpp"

#include "store/delivery_store.hpp"

#include <charconv>

namespace payrecon {

namespace {

std::optional<long long> number(std::string_view text, long long max) {
    long long n = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (text.empty() || text.size() > 19 || ec != std::errc() || ptr != text.data() + text.size() ||
        n < 0 || n > max) {
        return std::nullopt;
    }
    return n;
}

} // namespace

tl::expected<std::string, EventsPageProblem>
events_page(store::Db& db, const std::string& tenant_id, std::string_view query) {
    const auto invalid = [](std::string detail) {
        return tl::unexpected(EventsPageProblem{400, "invalid_query", std::move(detail)});
    };
    long long after = 0;
    int limit = k_events_default_limit;
    bool seen_after = false;
    bool seen_limit = false;
    while (!query.empty()) {
        const std::size_t amp = query.find('&');
        const std::string_view item = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        if (item.empty()) {
            continue;
        }
        const std::size_t eq = item.find('=');
        const std::string_view name = item.substr(0, eq);
        const std::string_view value =
            eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
        if (name == "after" && !seen_after) {
            const auto n = number(value, 9223372036854775806LL);
            if (!n) {
                return invalid(
                    "after must be a cursor as next_cursor gave it (or 0 for the start)");
            }
            after = *n;
            seen_after = true;
        } else if (name == "limit" && !seen_limit) {
            const auto n = number(value, k_events_max_limit);
            if (!n || *n < 1) {
                return invalid("limit must be 1.." + std::to_string(k_events_max_limit));
            }
            limit = static_cast<int>(*n);
            seen_limit = true;
        } else {
            return invalid("the query takes after=CURSOR and limit=N, each once, and nothing else");
        }
    }
    // Retention purged events after this cursor that it never read: say so, never skip them.
    const long long purged = store::purged_through(db, tenant_id);
    if (after < purged) {
        return tl::unexpected(EventsPageProblem{
            410, "cursor_purged",
            "events after cursor " + std::to_string(after) + " through " + std::to_string(purged) +
                " were purged (delivered and older than the retention, PAYRECON_EVENT_RETENTION) "
                "before this cursor read them; the kept events start after=" +
                std::to_string(purged) + ": reconcile what you missed from GET /v1/payments/{id}"});
    }
    // One more than asked: says whether there is more without a second query.
    auto rows = store::events_after(db, tenant_id, after, limit + 1);
    const bool more = rows.size() > static_cast<std::size_t>(limit);
    if (more) {
        rows.pop_back();
    }
    std::string out = "{\"data\":[";
    long long cursor = after;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        out += i == 0 ? "" : ",";
        out += rows[i].second; // the event's JSON, byte for byte as the relay sends it
        cursor = rows[i].first;
    }
    out += "],\"next_cursor\":\"" + std::to_string(cursor) + "\",\"has_more\":";
    out += more ? "true}" : "false}";
    return out;
}

EventDeliveryHealth event_delivery_health(store::Db& db) {
    return {store::endpoint_delivery_stats(db), store::unpublished_lag_seconds(db)};
}

} // namespace payrecon
