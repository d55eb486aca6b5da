// The conformance suite (conformance.hpp) over every kind the registry lists: no kind has a test
// of its own here, and a new one is covered the moment it is registered. The last cases register
// a fourth provider from this test (tests/providers/fourth/) with one line and show the suite
// covers it, and that a kind lacking any of its files or its status table fails.
#include "core/errors.hpp"
#include "providers/registry.hpp"
#include "tests/providers/conformance.hpp"
#include "tests/providers/conformance_replay.hpp"
#include "tests/providers/fourth/fourth.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>

using namespace payrecon;
using namespace payrecon::providers;
using conformance::Files;
using conformance::Problems;

namespace {

using Check = std::function<Problems(const ProviderDescriptor&, const Files&)>;

// Runs `check` for every registered kind, with its files from `files_of`; returns the kinds it ran
// for. Every problem fails the test, one CHECK per kind.
std::vector<std::string>
for_every_kind(const Check& check,
               const std::function<Files(std::string_view)>& files_of = &Files::standard) {
    std::vector<std::string> kinds;
    for (const auto* d : registered()) {
        INFO("kind " << d->kind);
        const Problems problems = check(*d, files_of(d->kind));
        CHECK(problems == Problems{});
        kinds.emplace_back(d->kind);
    }
    CHECK_FALSE(kinds.empty());
    return kinds;
}

bool mentions(const Problems& problems, const std::string& what) {
    return std::any_of(problems.begin(), problems.end(),
                       [&](const std::string& p) { return p.find(what) != std::string::npos; });
}

Files fourth_or_standard(std::string_view kind) {
    return kind == "fourth" ? fourth::files() : Files::standard(kind);
}

} // namespace

TEST_CASE("conformance: every registered kind has its contract, fixtures, corpus and README",
          "[providers][conformance]") {
    for_every_kind(&conformance::check_files);
}

TEST_CASE("conformance: every registered kind's descriptor is whole and its settings parse",
          "[providers][conformance]") {
    for_every_kind([](const auto& d, const auto&) { return conformance::check_descriptor(d); });
}

TEST_CASE("conformance: every registered kind's requests are what its contract defines",
          "[providers][conformance][contract]") {
    for_every_kind(&conformance::check_requests);
}

TEST_CASE("conformance: every status word of every registered kind is mapped on purpose",
          "[providers][conformance][contract]") {
    for_every_kind(&conformance::check_statuses);
}

TEST_CASE("conformance: every registered kind's recorded fixtures parse to what expected.json "
          "says",
          "[providers][conformance]") {
    for_every_kind(&conformance::check_fixtures);
}

TEST_CASE("conformance: every registered kind passes transport failures through",
          "[providers][conformance]") {
    for_every_kind(
        [](const auto& d, const auto&) { return conformance::check_transport_failures(d); });
}

TEST_CASE("conformance: no registered kind lets a secret into its fixtures or its results",
          "[providers][conformance][secrets]") {
    for_every_kind(&conformance::check_secrets);
}

TEST_CASE("conformance: every registered kind keeps its invariants over its fuzz corpus",
          "[providers][conformance][fuzz]") {
    for_every_kind(&conformance::check_corpus);
}

TEST_CASE("conformance: a fourth provider registered with one line is covered by the whole suite",
          "[providers][conformance][fourth]") {
    const auto before = known_kinds();
    const std::string builtin_kinds = kinds_where();
    const std::string listing_kinds =
        kinds_where([](const ProviderDescriptor& d) { return d.api.list; });
    CHECK(builtin_kinds.rfind("stripe, adyen, square, checkout", 0) == 0);
    {
        // The one registry line (a real provider's is one line in providers/registry.cpp).
        const test_hook::ScopedRegistration registration(fourth::descriptor());

        CHECK(known_kinds().back() == "fourth");
        CHECK(kinds_where() == builtin_kinds + ", fourth");
        CHECK(kinds_where([](const ProviderDescriptor& d) { return d.api.list; }) ==
              listing_kinds + ", fourth");
        const auto kinds = for_every_kind(&conformance::check_all, &fourth_or_standard);
        CHECK(std::find(kinds.begin(), kinds.end(), "fourth") != kinds.end());

        // The configuration knows the kind, its setting and its credentials from the descriptor.
        const auto entry = conformance::config_entry(fourth::descriptor(), "https://api.test");
        CHECK(entry.at("credentials").at("type") == "oauth2_client_credentials");
        const ProviderConfig c = conformance::config(fourth::descriptor(), "https://api.test");
        CHECK(c.kind == "fourth");
        CHECK(dynamic_cast<const fourth::Settings*>(c.settings.get())->merchant_id == "MERCHANT42");
        CHECK(create_provider(c)->kind() == "fourth");
        CHECK(carry_limits_of("fourth").provider == "Fourth");
    }
    CHECK(known_kinds() == before);
    CHECK(find_descriptor("fourth") == nullptr);
}

TEST_CASE("conformance: a kind that lacks a contract, fixtures, corpus, README or status table "
          "fails the suite",
          "[providers][conformance][fourth]") {
    ProviderDescriptor fifth = fourth::descriptor();
    fifth.kind = "fifth";
    const Files nowhere{"/nonexistent/contract.json", "/nonexistent/fixtures",
                        "/nonexistent/corpus", "/nonexistent/README.md"};
    const Problems problems = conformance::check_all(fifth, nowhere);
    CHECK(mentions(problems, "fifth: no contract"));
    CHECK(mentions(problems, "fifth: no fixtures directory"));
    CHECK(mentions(problems, "fifth: no fuzz corpus"));
    CHECK(mentions(problems, "fifth: no README"));

    fifth.statuses.rules.clear();
    CHECK(mentions(conformance::check_descriptor(fifth), "fifth: no status table"));
    CHECK(mentions(conformance::check_statuses(fifth, fourth::files()), "fifth: no status table"));
}

TEST_CASE("conformance: each check fails a kind that breaks it",
          "[providers][conformance][fourth]") {
    const test_hook::ScopedRegistration registration(fourth::descriptor());
    const ProviderDescriptor& good = fourth::descriptor();
    REQUIRE(conformance::check_all(good, fourth::files()) == Problems{});

    SECTION("a status the contract lists that the table lacks, and a table that lies") {
        ProviderDescriptor d = good;
        d.statuses.rules.pop_back(); // REVERSED
        d.statuses.rules.front().outcome = Outcome::pending;
        const Problems p = conformance::check_statuses(d, fourth::files());
        CHECK(mentions(p, "the contract's status 'REVERSED' is not in the status table"));
        CHECK(mentions(p, "status 'CAPTURED' maps to succeeded, the table says pending"));
    }
    SECTION("an unknown without a reason") {
        ProviderDescriptor d = good;
        d.statuses.rules.back().why = "";
        CHECK(mentions(conformance::check_statuses(d, fourth::files()),
                       "status 'REVERSED' is unknown without saying why"));
    }
    SECTION("a contract that lacks the request's fields or path") {
        conformance::Files f = fourth::files();
        f.contract = std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/contracts/stripe.json";
        const Problems p = conformance::check_requests(good, f);
        CHECK(mentions(p, "the contract has no such operation"));
    }
    SECTION("a fixture expected.json does not list, and one it lists wrongly") {
        conformance::Files f = fourth::files();
        f.fixtures = std::string(PAYRECON_SOURCE_DIR) + "/tests/providers/fixtures/stripe";
        const Problems p = conformance::check_fixtures(good, f);
        CHECK_FALSE(p.empty()); // Stripe's recordings are not Fourth's answers
    }
    SECTION("a corpus that breaks an invariant") {
        // An adapter that calls a 500 a success.
        ProviderDescriptor d = good;
        d.create = [](const ProviderConfig& c, SendFunction send) -> std::unique_ptr<Provider> {
            struct Liar : Provider {
                std::unique_ptr<Provider> inner;
                const std::string& name() const override { return inner->name(); }
                std::string_view kind() const override { return inner->kind(); }
                const Capabilities& capabilities() const override { return inner->capabilities(); }
                SubmitResult submit(const PaymentOrder& o) override {
                    SubmitResult r = inner->submit(o);
                    r.outcome = Outcome::succeeded;
                    r.provider_reference = "made_up";
                    return r;
                }
                LookupResult lookup(const PaymentOrder& o) override { return inner->lookup(o); }
                ListPage list(const TimeWindow& w, const std::optional<std::string>& c) override {
                    return inner->list(w, c);
                }
            };
            auto liar = std::make_unique<Liar>();
            liar->inner = fourth::descriptor().create(c, std::move(send));
            return liar;
        };
        CHECK(mentions(conformance::check_corpus(d, fourth::files()),
                       "fourth at HTTP 500: submit: succeeded without a 2xx"));
    }
}

TEST_CASE("conformance: messages and configuration errors name the kinds the registry lists",
          "[providers][conformance][config]") {
    const auto error_of = [](const std::string& text) -> std::string {
        try {
            parse_config(text, "p.json", &conformance::environment);
        } catch (const ConfigError& e) {
            return std::string(e.what()) + " | " + e.hint();
        }
        return "(no error)";
    };
    const std::string unknown_kind =
        R"({"providers": {"s": {"kind": "paypal2", "base_url": "https://x", "api_key_env": "CONFORMANCE_API_KEY"}}})";
    CHECK(
        error_of(unknown_kind).find("use a kind this build has: stripe, adyen, square, checkout") !=
        std::string::npos);
    const std::string unknown_field =
        R"({"providers": {"s": {"kind": "stripe", "base_url": "https://x", "api_key_env": "CONFORMANCE_API_KEY", "merchant_idd": 1}}})";
    CHECK(error_of(unknown_field).find("merchant_account and return_url (adyen)") !=
          std::string::npos);
    const test_hook::ScopedRegistration registration(fourth::descriptor());
    CHECK(error_of(unknown_kind).find("use a kind this build has: " + kinds_where()) !=
          std::string::npos);
    CHECK(kinds_where().ends_with(", fourth"));
    CHECK(error_of(unknown_field).find("merchant_id (fourth)") != std::string::npos);
    CHECK(
        error_of(
            R"({"providers": {"s": {"kind": "stripe", "base_url": "https://x", "api_key_env": "CONFORMANCE_API_KEY", "merchant_id": "MERCHANT42"}}})")
            .find("providers.s.merchant_id: is only used by kind fourth") != std::string::npos);
}
