// payrecon purge: delete expired idempotency records, never one whose payment is unfinished.
#include "cli/app.hpp"
#include "cli/context.hpp"
#include "core/errors.hpp"
#include "core/settings.hpp"
#include "core/store/intake_store.hpp"

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
    p->add_option("--retention", opts->retention,
                  "delete records created longer ago than this (30s, 15m, 36h, 7d) instead of those "
                  "past their own expiry; refused under PAYRECON_MIN_IDEMPOTENCY_RETENTION (24h)");
    p->add_flag("--dry-run", opts->dry_run, "count what would be deleted, delete nothing");
    p->add_flag("--json", opts->json, "print JSON");
    p->callback([&state, opts] {
        std::optional<std::chrono::seconds> retention;
        if (!opts->retention.empty()) {
            retention = parse_duration(opts->retention, "--retention");
            const auto minimum = minimum_idempotency_retention();
            if (*retention < minimum) {
                throw UsageError("--retention " + opts->retention + " is shorter than the minimum of " +
                                     std::to_string(minimum.count() / 3600) + "h",
                                 "a key must be remembered longer than any client retries it; "
                                 "the minimum is PAYRECON_MIN_IDEMPOTENCY_RETENTION");
            }
        }
        OpenDatabase opened = open_database(state.global);
        const auto result =
            store::purge_idempotency_records(*opened.db, retention, opts->dry_run);
        if (opts->json) {
            print_json({{"deleted", opts->dry_run ? 0 : result.deleted},
                        {"would_delete", opts->dry_run ? result.deleted : 0},
                        {"kept_unfinished", result.kept_unfinished},
                        {"dry_run", opts->dry_run}});
            return;
        }
        std::cout << (opts->dry_run ? "would delete " : "deleted ") << result.deleted
                  << " idempotency record(s); kept " << result.kept_unfinished
                  << " expired one(s) whose payment is not finished\n";
    });
}

} // namespace payrecon::cli
