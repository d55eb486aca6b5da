#include "core/errors.hpp"
#include "store/cluster.hpp"
#include "store/db.hpp"
#include "store/migrations.hpp"
#include "tests/support/test_db.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <pqxx/pqxx>

using namespace payrecon;
namespace fs = std::filesystem;

namespace {
struct TempHome {
    fs::path path;
    TempHome() {
        std::string tmpl = (fs::temp_directory_path() / "payrecon-cluster-test.XXXXXX").string();
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TempHome() {
        try {
            store::LocalCluster(path).stop();
        } catch (...) {
        }
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};
} // namespace

TEST_CASE("cluster: two payrecon homes run two private servers that never collide",
          "[store][cluster]") {
    TempHome home_a;
    TempHome home_b;
    store::LocalCluster a(home_a.path);
    store::LocalCluster b(home_b.path);
    CHECK_FALSE(a.status().initialized);
    a.ensure_started();
    b.ensure_started();
    CHECK(a.socket_dir() != b.socket_dir());
    CHECK(a.url() != b.url());
    CHECK(a.status().running);
    CHECK(b.status().running);
    CHECK(*a.status().pid != *b.status().pid);
    {
        store::Db db_a(a.url());
        store::migrate(db_a);
        store::Db db_b(b.url());
        CHECK(store::schema_version(db_a) == store::latest_known_version());
        CHECK(store::schema_version(db_b) == 0); // b is another database entirely
        // Only a Unix socket: no TCP listener, and the server settings of DESIGN section 4.
        pqxx::connection c(a.url());
        pqxx::read_transaction tx(c);
        CHECK(tx.exec1("SHOW listen_addresses")[0].as<std::string>().empty());
        CHECK(tx.exec1("SHOW synchronous_commit")[0].as<std::string>() == "on");
        CHECK(tx.exec1("SHOW client_connection_check_interval")[0].as<std::string>() == "1s");
    }
    // Starting again is a no-op; stopping one leaves the other running.
    a.ensure_started();
    CHECK(a.stop());
    CHECK_FALSE(a.status().running);
    CHECK(b.status().running);
    CHECK_FALSE(a.stop());
    // Started on demand again, with its data intact.
    a.ensure_started();
    store::Db again(a.url());
    CHECK(store::schema_version(again) == store::latest_known_version());
}

TEST_CASE("cluster: a relative home is refused with a clear error", "[store][cluster]") {
    CHECK_THROWS_AS(store::LocalCluster("relative/home"), ConfigError);
}

TEST_CASE("cluster: a home too long for a Unix socket path still gets a private socket directory",
          "[store][cluster]") {
    store::LocalCluster deep(fs::path("/tmp") / std::string(120, 'd'));
    CHECK(deep.socket_dir().string().size() + 15 <= 107);
    CHECK(deep.socket_dir().string().find("/tmp/payrecon-") == 0);
    store::LocalCluster other(fs::path("/tmp") / std::string(121, 'd'));
    CHECK(deep.socket_dir() != other.socket_dir());
}
