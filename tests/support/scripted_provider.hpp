#pragma once
// An in-process Provider for executor tests: answers each submit from a script of outcomes and
// counts calls per operation ID. (Behaviour tests over real HTTP use the fake provider server.)

#include "providers/provider.hpp"

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace payrecon::testing {

class ScriptedProvider : public providers::Provider {
public:
    explicit ScriptedProvider(std::string name) : m_name(std::move(name)) {
        m_caps.honours_idempotency_keys = true;
        m_caps.key_retention = std::chrono::hours(24);
        m_caps.max_key_length = 255;
    }

    // Outcomes for the next submits, in order; when the script runs out: `otherwise`.
    void script(std::deque<providers::Outcome> outcomes) {
        std::lock_guard lock(m_mutex);
        m_script = std::move(outcomes);
    }
    providers::Outcome otherwise = providers::Outcome::succeeded;
    // Runs at the start of every submit, outside the provider's lock (what happens "meanwhile").
    std::function<void(const providers::PaymentOrder&)> on_submit;
    providers::Capabilities& capabilities() { return m_caps; }
    // The deadline each submit was given, in order.
    std::vector<std::optional<std::chrono::steady_clock::time_point>> deadlines() const {
        std::lock_guard lock(m_mutex);
        return m_deadlines;
    }

    int submits(const std::string& operation_id) const {
        std::lock_guard lock(m_mutex);
        const auto it = m_submits.find(operation_id);
        return it == m_submits.end() ? 0 : it->second;
    }
    int total_submits() const {
        std::lock_guard lock(m_mutex);
        int n = 0;
        for (const auto& [op, count] : m_submits) {
            n += count;
        }
        return n;
    }

    const std::string& name() const override { return m_name; }
    std::string_view kind() const override { return "scripted"; }
    const providers::Capabilities& capabilities() const override { return m_caps; }

    providers::SubmitResult submit(const providers::PaymentOrder& order) override {
        if (on_submit) {
            on_submit(order);
        }
        std::lock_guard lock(m_mutex);
        ++m_submits[order.operation_id];
        m_deadlines.push_back(order.deadline);
        providers::SubmitResult r;
        r.outcome = otherwise;
        if (!m_script.empty()) {
            r.outcome = m_script.front();
            m_script.pop_front();
        }
        if (r.outcome == providers::Outcome::succeeded) {
            r.provider_reference = "ref_" + order.operation_id;
        }
        r.call.http_status = r.outcome == providers::Outcome::not_sent ? 0 : 200;
        r.call.error_class = r.outcome == providers::Outcome::not_sent ? "connect_refused" : "";
        r.call.detail = "scripted " + std::string(providers::to_string(r.outcome));
        return r;
    }
    providers::LookupResult lookup(const providers::PaymentOrder&) override { return {}; }
    providers::ListPage list(const providers::TimeWindow&,
                             const std::optional<std::string>&) override {
        return {};
    }

private:
    std::string m_name;
    providers::Capabilities m_caps;
    mutable std::mutex m_mutex;
    std::deque<providers::Outcome> m_script;
    std::map<std::string, int> m_submits;
    std::vector<std::optional<std::chrono::steady_clock::time_point>> m_deadlines;
};

} // namespace payrecon::testing

namespace payrecon::testing {

// A provider that passes every call to another one: a handle of its own on a shared provider, or
// the base of a test's wrapper that watches some of the calls.
class ForwardingProvider : public providers::Provider {
public:
    explicit ForwardingProvider(providers::Provider& inner) : m_inner(inner) {}
    const std::string& name() const override { return m_inner.name(); }
    std::string_view kind() const override { return m_inner.kind(); }
    const providers::Capabilities& capabilities() const override { return m_inner.capabilities(); }
    providers::SubmitResult submit(const providers::PaymentOrder& order) override {
        return m_inner.submit(order);
    }
    providers::LookupResult lookup(const providers::PaymentOrder& order) override {
        return m_inner.lookup(order);
    }
    providers::ListPage list(const providers::TimeWindow& w,
                             const std::optional<std::string>& c) override {
        return m_inner.list(w, c);
    }
    providers::SubmitResult refund(const providers::RefundOrder& order) override {
        return m_inner.refund(order);
    }
    providers::LookupResult lookup_refund(const providers::RefundOrder& order) override {
        return m_inner.lookup_refund(order);
    }
    providers::ListPage list_refunds(const providers::TimeWindow& w,
                                     const std::optional<std::string>& c) override {
        return m_inner.list_refunds(w, c);
    }

private:
    providers::Provider& m_inner;
};

// A per-thread handle on a shared ScriptedProvider (the worker makes one set per thread).
using SharedScriptedProvider = ForwardingProvider;

} // namespace payrecon::testing
