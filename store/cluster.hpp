#pragma once
// The private PostgreSQL cluster payrecon uses when no database URL is given: created with initdb
// under $PAYRECON_HOME on first use, listening only on a Unix socket in its own directory (no TCP),
// started on demand. Two homes never collide: each has its own data directory and socket directory.
// As root, the server runs as the `postgres` system user (PostgreSQL refuses to run as root).

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace payrecon::store {

struct ClusterStatus {
    bool initialized = false;
    bool running = false;
    std::optional<long> pid;
    std::string server_version; // from PG_VERSION, when initialized
};

class LocalCluster {
public:
    // What the cluster did on the operator's behalf that they should know of (a permission it
    // granted), one sentence each; the store writes no log of its own.
    using Notice = std::function<void(const std::string&)>;

    // Throws ConfigError if `home` is not an absolute path. `notice` may be empty (no notices).
    explicit LocalCluster(std::filesystem::path home, Notice notice = {});

    // $PAYRECON_HOME, else $XDG_DATA_HOME/payrecon, else ~/.local/share/payrecon.
    // Throws ConfigError if none can be determined.
    static std::filesystem::path default_home();

    const std::filesystem::path& home() const noexcept { return m_home; }
    std::filesystem::path data_dir() const { return m_home / "postgres" / "data"; }
    std::filesystem::path log_file() const { return m_home / "postgres" / "server.log"; }
    std::filesystem::path socket_dir() const;
    static constexpr int k_port = 5432; // names the socket file; no TCP port is opened
    static constexpr const char* k_database = "payrecon";
    static constexpr const char* k_user = "payrecon";

    // The libpq URL of this cluster's payrecon database (Unix socket, no password).
    std::string url() const;

    ClusterStatus status() const;

    // Creates the cluster if needed, starts it if it is not running, and waits until it accepts
    // connections. Safe to call from many processes at once (serialised by a lock file).
    // Throws ConfigError if the PostgreSQL server binaries are missing or the home is unusable,
    // DatabaseUnavailable (with the tail of the server log) if the server does not start.
    void ensure_started();

    // How stop() ends the server. fast: open transactions roll back and a checkpoint is written.
    // immediate: every server process quits at once without a checkpoint, and the next start runs
    // crash recovery from the WAL, as after a power loss (for crash drills; committed transactions
    // survive, since synchronous_commit is on).
    enum class StopMode { fast, immediate };

    // Stops the server (pg_ctl -m fast or -m immediate). Returns false if it was not running.
    // Throws DatabaseUnavailable if it does not stop.
    bool stop(StopMode mode = StopMode::fast);

private:
    void initialize();
    Notice m_notice;
    void start();
    void prepare_server_user_access();

    std::filesystem::path m_home;
};

// The PostgreSQL server programs' directory: PAYRECON_PG_BINDIR, else the newest
// /usr/lib/postgresql/<major>/bin with initdb and pg_ctl. Throws ConfigError if there is none.
std::filesystem::path postgres_bindir();

} // namespace payrecon::store
