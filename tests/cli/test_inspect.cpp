// The read side of the operator CLI: payments list|show, review list|show, audit. Payments,
// attempts, lookups and audit rows are written with SQL, each test in a tenant of its own; every
// listing is narrowed to that tenant (or to the test's own payment), since other tests share the
// database.
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <cctype>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <sstream>

using namespace payrecon;
using namespace payrecon::testing;

namespace {

struct Inspected {
    std::unique_ptr<store::Db> db = connect();
    TestTenant tenant = make_tenant(*db, "inspect");
    TestPrincipal principal = make_principal(*db, tenant);
};

// What insert_payment() writes: a pending stripe payment of 49.99 EUR made just now, unless told.
struct NewPayment {
    std::string state = "pending";
    std::string provider = "stripe";
    long long amount = 4999;
    std::string currency = "EUR";
    long long age_s = 0;     // created and last updated this long ago
    std::string review_code; // with needs_review
    long long generation = 0;
    int attempt_count = 0;

    NewPayment& with_state(std::string v) {
        state = std::move(v);
        return *this;
    }
    NewPayment& with_provider(std::string v) {
        provider = std::move(v);
        return *this;
    }
    NewPayment& with_amount(long long v, std::string c) {
        amount = v;
        currency = std::move(c);
        return *this;
    }
    NewPayment& with_age_s(long long v) {
        age_s = v;
        return *this;
    }
    NewPayment& with_review_code(std::string v) {
        review_code = std::move(v);
        return *this;
    }
    NewPayment& with_generation(long long v) {
        generation = v;
        return *this;
    }
    NewPayment& with_attempt_count(int v) {
        attempt_count = v;
        return *this;
    }
};

struct Inserted {
    std::string payment_id;
    std::string operation_id;
};

Inserted insert_payment(const Inspected& t, const std::string& merchant_reference,
                        const NewPayment& p = {}) {
    pqxx::connection c(database_url());
    pqxx::work tx(c);
    const pqxx::row r = tx.exec_params1(
        R"sql(
INSERT INTO payments (tenant_id, payment_id, merchant_reference, amount_minor, currency, provider,
                      payment_method, customer, description, metadata, operation_id, state,
                      generation, attempt_count, review_code, review_reason, created_by,
                      created_at, updated_at)
VALUES ($1::uuid, gen_random_uuid(), $2, $3, $4, $5, 'pm_card_visa', 'cus_42', 'two tickets',
        '{"cart": "c-77"}', 'pr_' || md5(random()::text), $6, $7, $8, nullif($9, ''),
        CASE WHEN $9 <> '' THEN 'the reconciler says: ' || $9 END, $10::uuid,
        now() - $11::bigint * interval '1 second', now() - $11::bigint * interval '1 second')
RETURNING payment_id::text, operation_id)sql",
        t.tenant.tenant_id, merchant_reference, p.amount, p.currency, p.provider, p.state,
        p.generation, p.attempt_count, p.review_code, t.principal.principal.principal_id, p.age_s);
    tx.commit();
    return {r[0].as<std::string>(), r[1].as<std::string>()};
}

nlohmann::json json_of(std::vector<std::string> args) {
    args.push_back("--json");
    return nlohmann::json::parse(run_cli(std::move(args)));
}

std::vector<std::string> ids_of(const nlohmann::json& rows) {
    std::vector<std::string> out;
    for (const auto& r : rows) {
        out.push_back(r["payment_id"]);
    }
    return out;
}

std::string database_env() {
    return "PAYRECON_DATABASE_URL='" + database_url() + "'";
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_CASE("inspect: payments list filters by state, provider and age, oldest first", "[cli][db]") {
    Inspected t;
    const auto review = insert_payment(t, "r-review",
                                       NewPayment()
                                           .with_state("needs_review")
                                           .with_provider("adyen")
                                           .with_age_s(2 * 86400)
                                           .with_review_code("no_lookup"));
    const auto done =
        insert_payment(t, "r-done", NewPayment().with_state("succeeded").with_age_s(3 * 3600));
    const auto yen = insert_payment(t, "r-yen",
                                    NewPayment()
                                        .with_state("failed")
                                        .with_provider("square")
                                        .with_amount(500, "JPY")
                                        .with_age_s(3600));
    const auto fresh = insert_payment(t, "r-fresh");
    const std::string& name = t.tenant.name;

    const auto all = json_of({"payments", "list", "--tenant", name});
    CHECK(ids_of(all) == std::vector<std::string>{review.payment_id, done.payment_id,
                                                  yen.payment_id, fresh.payment_id});
    const auto& first = all[0];
    CHECK(first["tenant"] == name);
    CHECK(first["tenant_id"] == t.tenant.tenant_id);
    CHECK(first["state"] == "needs_review");
    CHECK(first["amount"] == 4999);
    CHECK(first["currency"] == "EUR");
    CHECK(first["provider"] == "adyen");
    CHECK(first["merchant_reference"] == "r-review");
    CHECK(first["operation_id"] == review.operation_id);
    CHECK(first["review_code"] == "no_lookup");
    CHECK(first["provider_reference"].is_null());
    for (const char* key :
         {"review_reason", "attempt_count", "generation", "created_at", "updated_at"}) {
        CHECK(first.contains(key));
    }

    CHECK(ids_of(json_of({"payments", "list", "--tenant", name, "--state", "succeeded"})) ==
          std::vector<std::string>{done.payment_id});
    CHECK(ids_of(json_of({"payments", "list", "--tenant", name, "--provider", "square"})) ==
          std::vector<std::string>{yen.payment_id});
    CHECK(ids_of(json_of({"payments", "list", "--tenant", t.tenant.tenant_id, "--older-than",
                          "2h"})) == std::vector<std::string>{review.payment_id, done.payment_id});
    CHECK(json_of({"payments", "list", "--tenant", name, "--state", "needs_review", "--provider",
                   "stripe"})
              .empty());

    SECTION("the table shows amounts with their currency's exponent") {
        const std::string out = run_cli({"payments", "list", "--tenant", name});
        CHECK(contains(out, "PAYMENT ID"));
        CHECK(contains(out, "49.99 EUR"));
        CHECK(contains(out, "500 JPY"));
        CHECK(contains(out, fresh.payment_id));
        CHECK_FALSE(contains(out, "more match"));
    }
    SECTION("--limit cuts the list and says so") {
        CHECK(ids_of(json_of({"payments", "list", "--tenant", name, "--limit", "2"})) ==
              std::vector<std::string>{review.payment_id, done.payment_id});
        const std::string out = run_cli({"payments", "list", "--tenant", name, "--limit", "2"});
        CHECK(contains(out, "the first 2 shown"));
        CHECK_FALSE(contains(out, yen.payment_id));
    }
    SECTION("nothing matching is one line") {
        CHECK(run_cli({"payments", "list", "--tenant", name, "--state", "unknown"}) ==
              "no payments match\n");
    }
    SECTION("an unknown tenant is refused, not an empty list") {
        CHECK_THROWS_AS(run_cli({"payments", "list", "--tenant", unique_name("nobody")}), Refused);
    }
}

TEST_CASE("inspect: payments show prints the payment with every attempt, lookup and audit row",
          "[cli][db]") {
    Inspected t;
    const auto p = insert_payment(t, "r-show",
                                  NewPayment()
                                      .with_state("needs_review")
                                      .with_age_s(600)
                                      .with_review_code("lookup_failing")
                                      .with_generation(3)
                                      .with_attempt_count(2));
    const std::string& tid = t.tenant.tenant_id;
    exec_sql(R"sql(
INSERT INTO payment_attempts (tenant_id, payment_id, attempt_no, generation, worker, operation_id,
                              started_at, finished_at, outcome, http_status, error_class, detail)
VALUES (')sql" +
             tid + "', '" + p.payment_id + "', 1, 1, 'w-1', '" + p.operation_id + R"sql(',
        now() - interval '9 minutes', now() - interval '9 minutes', 'not_sent', NULL, 'connect',
        'connection refused'),
       (')sql" +
             tid + "', '" + p.payment_id + "', 2, 2, 'w-2', '" + p.operation_id + R"sql(',
        now() - interval '8 minutes', now() - interval '8 minutes', 'unknown', 502, 'http_5xx',
        E'bad gateway\n\x1b[31mred')
)sql");
    exec_sql(R"sql(
INSERT INTO payment_lookups (tenant_id, payment_id, operation_id, generation, actor, status,
                             http_status, error_class, decision, reason, applied)
VALUES (')sql" +
             tid + "', '" + p.payment_id + "', '" + p.operation_id +
             R"sql(', 3, 'reconciler', 'failed', 503, 'http_5xx', 'check_later',
        'lookup failed', true),
       (')sql" +
             tid + "', '" + p.payment_id + "', '" + p.operation_id +
             R"sql(', 3, 'reconciler', 'failed', NULL, 'timeout', 'review',
        'lookups kept failing', true)
)sql");
    exec_sql(R"sql(
INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id, detail)
VALUES (')sql" +
             tid + "', 'worker w-2', 'payment.unknown', 'payment', '" + p.payment_id + R"sql(',
        '{"from": "processing"}'),
       (')sql" +
             tid + "', 'reconciler', 'payment.needs_review', 'payment', '" + p.payment_id + R"sql(',
        '{"code": "lookup_failing"}')
)sql");

    SECTION("as JSON: every attempt, lookup and audit row, in order") {
        const auto j = json_of({"payments", "show", p.payment_id});
        const auto& pay = j["payment"];
        CHECK(pay["payment_id"] == p.payment_id);
        CHECK(pay["state"] == "needs_review");
        CHECK(pay["generation"] == 3);
        CHECK(pay["amount"] == 4999);
        CHECK(pay["currency"] == "EUR");
        CHECK(pay["review_code"] == "lookup_failing");
        CHECK(pay["metadata"] == nlohmann::json{{"cart", "c-77"}});
        CHECK(pay["payment_method"] == "pm_card_visa");
        CHECK(pay["lookup_count"] == 0);
        CHECK(pay.contains("lease_owner"));
        REQUIRE(j["attempts"].size() == 2);
        CHECK(j["attempts"][0]["attempt_no"] == 1);
        CHECK(j["attempts"][0]["outcome"] == "not_sent");
        CHECK(j["attempts"][1]["http_status"] == 502);
        CHECK(j["attempts"][1]["detail"] == "bad gateway\n\x1b[31mred");
        REQUIRE(j["lookups"].size() == 2);
        CHECK(j["lookups"][0]["decision"] == "check_later");
        CHECK(j["lookups"][1]["decision"] == "review");
        CHECK(j["lookups"][1]["http_status"].is_null());
        REQUIRE(j["audit"].size() == 2); // only the rows about this payment
        CHECK(j["audit"][0]["action"] == "payment.unknown");
        CHECK(j["audit"][1]["action"] == "payment.needs_review");
        CHECK(j["audit"][1]["detail"] == nlohmann::json{{"code", "lookup_failing"}});
    }
    SECTION("as text: sections with counts, and provider text that cannot drive the terminal") {
        const std::string out = run_cli({"payments", "show", p.payment_id});
        CHECK(contains(out, "Payment " + p.payment_id));
        CHECK(contains(out, "49.99 EUR"));
        CHECK(contains(out, "Attempts (2)"));
        CHECK(contains(out, "Lookups (2)"));
        CHECK(contains(out, "Audit trail (2)"));
        CHECK(contains(out, "lookups kept failing"));
        CHECK(contains(out, R"(bad gateway\n\x1b[31mred)"));
        CHECK_FALSE(contains(out, "\x1b"));
    }
}

TEST_CASE("inspect: show finds a payment by its operation ID and by its ID in upper case",
          "[cli][db]") {
    Inspected t;
    const auto p = insert_payment(t, "r-op");
    CHECK(json_of({"payments", "show", p.operation_id})["payment"]["payment_id"] == p.payment_id);
    std::string upper = p.payment_id;
    for (auto& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    CHECK(json_of({"payments", "show", upper})["payment"]["payment_id"] == p.payment_id);
    CHECK(json_of({"review", "show", p.operation_id})["payment"]["payment_id"] == p.payment_id);
}

TEST_CASE("inspect: review list shows only needs_review payments with their code, longest waiting "
          "first",
          "[cli][db]") {
    Inspected t;
    const auto old_review = insert_payment(
        t, "r-old",
        NewPayment().with_state("needs_review").with_age_s(86400).with_review_code("no_lookup"));
    const auto new_review = insert_payment(t, "r-new",
                                           NewPayment()
                                               .with_state("needs_review")
                                               .with_provider("square")
                                               .with_age_s(3600)
                                               .with_review_code("lookup_failing"));
    // Of adyen, a payment not in review: the provider is known (a fresh database knows only
    // what its payments name), so the list below is empty rather than refused.
    const auto pending =
        insert_payment(t, "r-pending", NewPayment().with_provider("adyen").with_age_s(2 * 86400));
    const auto unknown =
        insert_payment(t, "r-unknown", NewPayment().with_state("unknown").with_age_s(2 * 86400));
    const std::string& name = t.tenant.name;

    const auto rows = json_of({"review", "list", "--tenant", name});
    REQUIRE(ids_of(rows) == std::vector<std::string>{old_review.payment_id, new_review.payment_id});
    CHECK(rows[0]["review_code"] == "no_lookup");
    CHECK(rows[0]["review_reason"] == "the reconciler says: no_lookup");
    CHECK(rows[1]["review_code"] == "lookup_failing");
    CHECK(ids_of(json_of({"review", "list", "--tenant", name, "--provider", "square"})) ==
          std::vector<std::string>{new_review.payment_id});
    CHECK(ids_of(json_of({"review", "list", "--tenant", name, "--older-than", "3h"})) ==
          std::vector<std::string>{old_review.payment_id});

    const std::string out = run_cli({"review", "list", "--tenant", name});
    CHECK(contains(out, "no_lookup"));
    CHECK(contains(out, "lookup_failing"));
    CHECK(contains(out, "49.99 EUR"));
    CHECK_FALSE(contains(out, pending.payment_id));
    CHECK_FALSE(contains(out, unknown.payment_id));
    CHECK(run_cli({"review", "list", "--tenant", name, "--provider", "adyen"}) ==
          "no payments, refunds, captures or voids in review\n");
}

TEST_CASE("inspect: review show ends with the generation and the commands that decide the payment",
          "[cli][db]") {
    Inspected t;
    const auto p = insert_payment(t, "r-decide",
                                  NewPayment()
                                      .with_state("needs_review")
                                      .with_review_code("outside_key_window")
                                      .with_generation(7));
    const std::string resolve = "payrecon review resolve " + p.payment_id + " --generation 7";
    const std::vector<std::string> expected{
        resolve + " --as succeeded --provider-reference REF --note \"...\"",
        resolve + " --as failed --note \"...\"",
        resolve + " --as retry --confirm-no-charge --note \"...\"",
        "payrecon review recheck " + p.payment_id};

    const std::string out = run_cli({"review", "show", p.payment_id});
    CHECK(
        contains(out, "Why it waits: outside_key_window: the reconciler says: outside_key_window"));
    CHECK(contains(out, "Generation: 7"));
    std::string tail;
    for (const auto& c : expected) {
        tail += "  " + c + "\n";
    }
    REQUIRE(out.size() > tail.size());
    CHECK(out.substr(out.size() - tail.size()) == tail);

    const auto j = json_of({"review", "show", p.payment_id});
    CHECK(j["in_review"] == true);
    CHECK(j["commands"] == nlohmann::json(expected));
    CHECK(j["payment"]["generation"] == 7);

    SECTION("a payment out of review shows no commands") {
        const auto done =
            insert_payment(t, "r-done", NewPayment().with_state("succeeded").with_generation(2));
        const std::string shown = run_cli({"review", "show", done.payment_id});
        CHECK(contains(shown, "Not in review: the payment is succeeded"));
        CHECK_FALSE(contains(shown, "review resolve"));
        CHECK(json_of({"review", "show", done.payment_id})["commands"].empty());
    }
}

TEST_CASE("inspect: review show gives each reason code its guidance and only the commands that "
          "can help, with the reference the lookup found filled in",
          "[cli][db][regression]") {
    // Every entry showed the same three decisions and recheck: recheck for no_lookup (the provider
    // cannot be asked), succeeded for request_rejected (nothing was executed), and a REF
    // placeholder where the lookup had found the reference.
    Inspected t;
    const auto commands = [&](const std::string& code, long long generation = 3) {
        const auto p = insert_payment(t, "r-" + code,
                                      NewPayment()
                                          .with_state("needs_review")
                                          .with_review_code(code)
                                          .with_generation(generation));
        return std::make_pair(p, json_of({"review", "show", p.payment_id}));
    };
    const auto has = [](const nlohmann::json& j, const std::string& part) {
        for (const auto& c : j["commands"]) {
            if (c.get<std::string>().find(part) != std::string::npos) {
                return true;
            }
        }
        return false;
    };
    {
        const auto [p, j] = commands("no_lookup");
        CHECK_FALSE(has(j, "review recheck"));
        CHECK(has(j, "--as succeeded"));
        CHECK(has(j, "--as retry"));
        CHECK(j["guidance"]["means"].get<std::string>().find("cannot be asked") !=
              std::string::npos);
        const std::string out = run_cli({"review", "show", p.payment_id});
        CHECK(contains(out, "What it means: the call's outcome is unknown"));
        CHECK(contains(out, "Runbook: docs/operations.md, no_lookup"));
        CHECK_FALSE(contains(out, "review recheck"));
    }
    {
        const auto [p, j] = commands("request_rejected");
        CHECK_FALSE(has(j, "--as succeeded"));
        CHECK_FALSE(has(j, "review recheck"));
        CHECK(has(j, "--as retry --confirm-no-charge"));
        CHECK(has(j, "--as failed"));
    }
    {
        const auto [p, j] = commands("remote_duplicate");
        CHECK_FALSE(has(j, "--as retry")); // there is a charge: sending again cannot help
        CHECK(has(j, "--provider-reference REF"));
        // The lookup found the provider's payment: its reference goes into the command.
        exec_sql("INSERT INTO payment_lookups (tenant_id, payment_id, operation_id, generation, "
                 "actor, status, remote_state, provider_reference, duplicates, decision, applied) "
                 "SELECT tenant_id, payment_id, operation_id, 3, 'test', 'found', 'succeeded', "
                 "'pi_found_1', 1, 'review', true FROM payments WHERE payment_id = '" +
                 p.payment_id + "'");
        const auto again = json_of({"review", "show", p.payment_id});
        CHECK(has(again, "--as succeeded --provider-reference pi_found_1 "));
        CHECK_FALSE(has(again, "REF"));
    }
}

TEST_CASE("inspect: audit shows a payment's trail oldest first, the newest N with --limit",
          "[cli][db]") {
    Inspected t;
    const auto p = insert_payment(t, "r-audit");
    const auto other = insert_payment(t, "r-other");
    for (const std::string action : {"payment.a1", "payment.a2", "payment.a3"}) {
        exec_sql(
            "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id) VALUES ('" +
            t.tenant.tenant_id + "', 'test', '" + action + "', 'payment', '" + p.payment_id + "')");
    }
    exec_sql(
        "INSERT INTO audit_log (tenant_id, actor, action, subject_type, subject_id) VALUES ('" +
        t.tenant.tenant_id + "', 'test', 'payment.other', 'payment', '" + other.payment_id + "')");

    const auto actions = [](const nlohmann::json& rows) {
        std::vector<std::string> out;
        for (const auto& r : rows) {
            out.push_back(r["action"]);
        }
        return out;
    };
    CHECK(actions(json_of({"audit", "--payment", p.payment_id})) ==
          std::vector<std::string>{"payment.a1", "payment.a2", "payment.a3"});
    CHECK(actions(json_of({"audit", "--payment", p.operation_id, "--limit", "2"})) ==
          std::vector<std::string>{"payment.a2", "payment.a3"});
    // The tenant's whole log: tenant.create, principal.create, then the four above.
    const auto all = json_of({"audit", "--tenant", t.tenant.name});
    CHECK(actions(all) == std::vector<std::string>{"tenant.create", "principal.create",
                                                   "payment.a1", "payment.a2", "payment.a3",
                                                   "payment.other"});
    CHECK(all[2]["subject_id"] == p.payment_id);
    CHECK(all[2]["subject_type"] == "payment");
    CHECK(all[2]["actor"] == "test");
    CHECK(all[2]["detail"] == nlohmann::json::object());

    const std::string out = run_cli({"audit", "--payment", p.payment_id});
    CHECK(contains(out, "ACTION"));
    CHECK(contains(out, "payment " + p.payment_id));
    CHECK(out.find("payment.a1") < out.find("payment.a3"));
}

TEST_CASE("inspect: the binary exits 7 for an unknown payment, 2 for bad arguments, 0 for an empty "
          "listing",
          "[cli][db]") {
    const std::string env = database_env();
    SECTION("an unknown or malformed ID: refused, 7, with where to find IDs") {
        for (const std::string args :
             {"payments show 00000000-0000-4000-8000-000000000000", "payments show pr_nosuchop",
              "payments show not-a-uuid", "review show 00000000-0000-4000-8000-000000000000",
              "audit --payment pr_nosuchop"}) {
            const auto r = run_binary(env, args);
            INFO(args << ": " << r.output);
            CHECK(r.exit_code == 7);
            CHECK(contains(r.output, "there is no payment"));
            CHECK(contains(r.output, "payrecon payments list"));
        }
    }
    SECTION("a bad --state: usage, 2, listing the states") {
        const auto r = run_binary(env, "payments list --state bogus");
        CHECK(r.exit_code == 2);
        CHECK(contains(r.output, "'bogus' is not a payment state"));
        CHECK(contains(r.output,
                       "pending, processing, succeeded, failed, retry_scheduled, unknown, "
                       "needs_review"));
    }
    SECTION("a bad --older-than or --limit: usage, 2") {
        CHECK(run_binary(env, "review list --older-than soon").exit_code == 2);
        CHECK(run_binary(env, "payments list --older-than 2w").exit_code == 2);
        CHECK(run_binary(env, "payments list --limit 0").exit_code == 2);
        CHECK(run_binary(env, "review").exit_code == 2); // a subcommand is required
    }
    SECTION("an empty listing: one line, 0") {
        auto db = connect();
        const TestTenant empty = make_tenant(*db, "inspect-empty");
        const auto list = run_binary(env, "payments list --tenant " + empty.name);
        CHECK(list.exit_code == 0);
        CHECK(list.output == "no payments match\n");
        const auto review = run_binary(env, "review list --tenant " + empty.name);
        CHECK(review.exit_code == 0);
        CHECK(review.output == "no payments, refunds, captures or voids in review\n");
        const auto json = run_binary(env, "review list --json --tenant " + empty.name);
        CHECK(json.exit_code == 0);
        CHECK(nlohmann::json::parse(json.output) == nlohmann::json::array());
    }
    SECTION("an unknown tenant: refused, 7") {
        CHECK(run_binary(env, "audit --tenant " + unique_name("nobody")).exit_code == 7);
    }
}

TEST_CASE("inspect: the table printer aligns columns by character and escapes control characters",
          "[cli]") {
    cli::Table t({"A", "NAME", "LAST"});
    t.add_row({"1", "Zoë", "x"});
    t.add_row({"22", "line\nbreak\x1b", "y"});
    std::ostringstream out;
    t.print(out);
    CHECK(out.str() == "A   NAME             LAST\n"
                       "1   Zoë              x\n"
                       "22  line\\nbreak\\x1b  y\n");
    CHECK_THROWS_AS(t.add_row({"too few"}), std::logic_error);

    std::ostringstream fields;
    cli::print_fields(fields, {{"state", "pending"}, {"amount", "49.99 EUR"}}, "  ");
    CHECK(fields.str() == "  state:  pending\n  amount: 49.99 EUR\n");
}
