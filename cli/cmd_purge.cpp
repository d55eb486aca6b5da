// payrecon purge: delete expired idempotency records, never one whose payment is unfinished.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "cli/table.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "services/retention.hpp"

#include <iostream>

namespace payrecon::cli {

void setup_purge(CLI::App& app, AppState& state) {
    struct Options {
        std::string retention;
        bool dry_run = false;
        bool json = false;
    };
    auto opts = std::make_shared<Options>();
    CLI::App* p = app.add_subcommand(
        "purge", "delete expired idempotency records (never one whose payment is not terminal)");
    p->add_option(
        "--retention", opts->retention,
        "delete records created longer ago than this (30s, 15m, 36h, 7d) instead of those "
        "past their own expiry; refused under PAYRECON_MIN_IDEMPOTENCY_RETENTION (24h)");
    p->add_flag("--dry-run", opts->dry_run, "count what would be deleted, delete nothing");
    p->add_flag("--json", opts->json, "print JSON");
    p->callback([&state, opts] {
        std::optional<std::chrono::seconds> retention;
        if (!opts->retention.empty()) {
            retention = parse_duration(opts->retention, "--retention");
            if (const auto problem = idempotency_retention_problem(*retention)) {
                throw UsageError("--retention " + opts->retention + " " + *problem,
                                 "a key must be remembered longer than any client retries it; "
                                 "the minimum is PAYRECON_MIN_IDEMPOTENCY_RETENTION");
            }
        }
        const IdempotencyRetentionFloor floor = idempotency_retention_floor();
        const auto minimum = floor.minimum;
        const bool lowered = floor.lowered;
        const std::string actor = operator_name(state.global);
        if (lowered && !opts->dry_run) {
            std::cerr << "payrecon purge: the minimum retention is lowered to " << minimum.count()
                      << "s by PAYRECON_MIN_IDEMPOTENCY_RETENTION (default "
                      << floor.default_minimum.count()
                      << "s); this run records that in the audit log\n";
        }
        OpenDatabase opened = open_database(state.global);
        const auto result = purge_idempotency_records(*opened.db, retention, opts->dry_run, actor);
        if (opts->json) {
            print_json(
                {{"deleted", opts->dry_run ? 0 : result.deleted},
                 {"would_delete", opts->dry_run ? result.deleted : 0},
                 {"kept_unfinished", result.kept_unfinished},
                 {"tenants", result.tenants},
                 {"dry_run", opts->dry_run},
                 {"by", retention ? "age" : "expiry"},
                 {"retention_s", retention ? nlohmann::json(retention->count()) : nlohmann::json()},
                 {"minimum_retention_s", minimum.count()},
                 {"minimum_lowered", lowered},
                 {"operator", actor},
                 {"run_id", opts->dry_run ? nlohmann::json() : nlohmann::json(result.run_id)}});
            return;
        }
        std::cout << (opts->dry_run ? "would delete " : "deleted ") << result.deleted
                  << " idempotency record(s); kept " << result.kept_unfinished
                  << " expired one(s) whose payment is not finished\n";
        std::cout << (retention ? "retention " + std::to_string(retention->count()) + "s (by age)"
                                : std::string("each record's own expiry"))
                  << "; minimum " << minimum.count() << "s" << (lowered ? " (lowered)" : "")
                  << "; operator " << printable(actor) << "\n";
        if (!opts->dry_run) {
            std::cout << "recorded in the audit log as purge run " << result.run_id << " ("
                      << result.tenants << " tenant(s)): payrecon audit\n";
        }
    });
}

} // namespace payrecon::cli
