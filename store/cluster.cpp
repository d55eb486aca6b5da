#include "store/cluster.hpp"

#include "core/encoding.hpp"
#include "core/errors.hpp"
#include "core/fingerprint.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace payrecon::store {
namespace {

constexpr std::size_t k_max_socket_path = 107; // sizeof(sockaddr_un::sun_path) - 1

struct ServerUser {
    bool switch_user = false; // true when we are root and the server must run as postgres
    uid_t uid = 0;
    gid_t gid = 0;
    std::string name;
};

ServerUser server_user() {
    ServerUser user;
    if (::geteuid() != 0) {
        user.uid = ::geteuid();
        user.gid = ::getegid();
        return user;
    }
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
        throw ConfigError(
            "running as root, payrecon starts its private PostgreSQL as the `postgres` "
            "system user, and there is none",
            "install PostgreSQL with scripts/bootstrap (apt-get install postgresql "
            "creates the user), or run payrecon as a normal user");
    }
    user.switch_user = true;
    user.uid = pw->pw_uid;
    user.gid = pw->pw_gid;
    user.name = pw->pw_name;
    return user;
}

std::optional<int> parse_major(const std::string& name) {
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit) || name.size() > 4) {
        return std::nullopt;
    }
    return std::stoi(name);
}

// Runs `argv` (argv[0] an absolute path) and waits. As root with user.switch_user, the child
// drops to the server user first. stdout and stderr go to `log` (appended); stdin is /dev/null;
// every other descriptor is closed so a server it starts inherits none of ours (lock files,
// sockets, pipes). Returns the exit status, or 128 + signal.
int run_program(const std::vector<std::string>& argv, const ServerUser& user, const fs::path& cwd,
                const fs::path& log) {
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        throw ConfigError("cannot write " + log.string() + ": " + std::strerror(errno));
    }
    if (user.switch_user) {
        (void)::fchown(log_fd, user.uid, user.gid);
    }
    std::vector<char*> args;
    for (const auto& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(log_fd);
        throw ConfigError(std::string("cannot start a process: ") + std::strerror(errno));
    }
    if (pid == 0) {
        const int devnull = ::open("/dev/null", O_RDONLY);
        if (devnull < 0 || ::dup2(devnull, 0) < 0 || ::dup2(log_fd, 1) < 0 ||
            ::dup2(log_fd, 2) < 0) {
            ::_exit(126);
        }
        ::close_range(3, UINT_MAX, 0);
        if (user.switch_user) {
            if (::setgroups(0, nullptr) != 0 || ::setgid(user.gid) != 0 ||
                ::setuid(user.uid) != 0) {
                ::_exit(126);
            }
        }
        if (::chdir(cwd.c_str()) != 0) {
            ::_exit(126);
        }
        ::setenv("LC_ALL", "C", 1);
        ::unsetenv("PGDATA");
        ::unsetenv("PGOPTIONS");
        ::execv(args[0], args.data());
        ::_exit(127);
    }
    ::close(log_fd);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            throw ConfigError(std::string("lost a child process: ") + std::strerror(errno));
        }
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    return 128 + WTERMSIG(status);
}

// True if the server user can search (traverse) `dir`; checked in a child that switches user.
bool server_user_can_search(const fs::path& dir, const ServerUser& user) {
    const pid_t pid = ::fork();
    if (pid < 0) {
        return false;
    }
    if (pid == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) {
            ::_exit(2);
        }
        ::_exit(::access(dir.c_str(), X_OK) == 0 ? 0 : 1);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// PostgreSQL's shared buffer cache: a quarter of the machine's memory (the usual advice), at least
// PostgreSQL's default of 128 MB, at most 1 GB. A statement diff reads a day of payments and a
// day of provider records; when they fit here they are not copied in from the OS page cache again.
long long shared_buffers_mb() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    const long long total_mb =
        pages > 0 && page_size > 0 ? static_cast<long long>(pages) * page_size / (1024 * 1024) : 0;
    return std::clamp(total_mb / 4, 128LL, 1024LL);
}

std::string tail_of(const fs::path& file, std::size_t lines) {
    std::ifstream in(file);
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) {
        all.push_back(line);
    }
    std::ostringstream out;
    for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
        out << "\n    " << all[i];
    }
    return out.str();
}

void make_private_dir(const fs::path& dir, const ServerUser& user, bool owned_by_server) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        throw ConfigError("cannot create " + dir.string() + ": " + ec.message(),
                          "set PAYRECON_HOME to a directory you can write");
    }
    if (::chmod(dir.c_str(), 0700) != 0) {
        throw ConfigError("cannot set permissions on " + dir.string() + ": " +
                          std::strerror(errno));
    }
    if (owned_by_server && user.switch_user && ::chown(dir.c_str(), user.uid, user.gid) != 0) {
        throw ConfigError("cannot give " + dir.string() +
                          " to the postgres user: " + std::strerror(errno));
    }
}

void write_owned_file(const fs::path& file, const std::string& content, const ServerUser& user,
                      bool append) {
    std::ofstream out(file, append ? std::ios::app : std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
        throw ConfigError("cannot write " + file.string());
    }
    if (user.switch_user) {
        (void)::chown(file.c_str(), user.uid, user.gid);
    }
}

// Ping the server on `socket_dir`; true only if it accepts connections.
bool server_accepting(const fs::path& socket_dir) {
    if (!fs::exists(socket_dir / (".s.PGSQL." + std::to_string(LocalCluster::k_port)))) {
        return false;
    }
    const std::string conninfo =
        "host='" + socket_dir.string() + "' port=" + std::to_string(LocalCluster::k_port) +
        " dbname=postgres user=" + LocalCluster::k_user + " connect_timeout=5";
    return PQping(conninfo.c_str()) == PQPING_OK;
}

bool database_exists(const LocalCluster& cluster) {
    PGconn* conn = PQconnectdb(cluster.url().c_str());
    const bool ok = PQstatus(conn) == CONNECTION_OK;
    PQfinish(conn);
    return ok;
}

void create_database(const fs::path& socket_dir) {
    const std::string conninfo = "host='" + socket_dir.string() +
                                 "' port=" + std::to_string(LocalCluster::k_port) +
                                 " dbname=postgres user=" + LocalCluster::k_user;
    PGconn* conn = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn) != CONNECTION_OK) {
        const std::string msg = PQerrorMessage(conn);
        PQfinish(conn);
        throw DatabaseUnavailable("the private PostgreSQL runs but refuses connections: " + msg);
    }
    PGresult* res =
        PQexec(conn, (std::string("CREATE DATABASE ") + LocalCluster::k_database).c_str());
    const bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    const std::string msg = ok ? "" : PQresultErrorMessage(res);
    PQclear(res);
    PQfinish(conn);
    // Another process may have created it between our check and now: that is fine.
    if (!ok && msg.find("already exists") == std::string::npos) {
        throw DatabaseUnavailable("cannot create the payrecon database: " + msg);
    }
}

class LockFile {
public:
    explicit LockFile(const fs::path& path) {
        m_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (m_fd < 0) {
            throw ConfigError("cannot open the lock file " + path.string() + ": " +
                              std::strerror(errno));
        }
        while (::flock(m_fd, LOCK_EX) != 0) {
            if (errno != EINTR) {
                ::close(m_fd);
                throw ConfigError("cannot lock " + path.string() + ": " + std::strerror(errno));
            }
        }
    }
    ~LockFile() { ::close(m_fd); }
    LockFile(const LockFile&) = delete;
    LockFile& operator=(const LockFile&) = delete;

private:
    int m_fd = -1;
};

} // namespace

fs::path postgres_bindir() {
    if (const char* env = std::getenv("PAYRECON_PG_BINDIR"); env != nullptr && *env != '\0') {
        fs::path dir(env);
        if (!fs::exists(dir / "initdb") || !fs::exists(dir / "pg_ctl")) {
            throw ConfigError("PAYRECON_PG_BINDIR=" + dir.string() + " has no initdb and pg_ctl",
                              "point it at a PostgreSQL bin directory, or unset it");
        }
        return dir;
    }
    std::optional<std::pair<int, fs::path>> best;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
        const auto major = parse_major(entry.path().filename().string());
        const fs::path bin = entry.path() / "bin";
        if (major && fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl") &&
            (!best || *major > best->first)) {
            best = std::make_pair(*major, bin);
        }
    }
    if (best) {
        return best->second;
    }
    throw ConfigError(
        "the PostgreSQL server programs (initdb, pg_ctl) are not installed",
        "run scripts/bootstrap, or apt-get install postgresql, or set PAYRECON_PG_BINDIR; "
        "or use an existing PostgreSQL database instead of the private one");
}

LocalCluster::LocalCluster(fs::path home, Notice notice)
    : m_notice(std::move(notice)), m_home(std::move(home)) {
    if (!m_home.is_absolute()) {
        throw ConfigError("PAYRECON_HOME must be an absolute path, not '" + m_home.string() + "'");
    }
    m_home = m_home.lexically_normal();
    if (m_home.has_filename() == false && m_home.has_parent_path() &&
        m_home != m_home.root_path()) {
        m_home = m_home.parent_path(); // drop a trailing slash
    }
}

fs::path LocalCluster::default_home() {
    if (const char* env = std::getenv("PAYRECON_HOME"); env != nullptr && *env != '\0') {
        return fs::absolute(env);
    }
    if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg == '/') {
        return fs::path(xdg) / "payrecon";
    }
    const char* home = std::getenv("HOME");
    std::string home_dir = home != nullptr ? home : "";
    if (home_dir.empty()) {
        if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_dir != nullptr) {
            home_dir = pw->pw_dir;
        }
    }
    if (home_dir.empty()) {
        throw ConfigError("cannot tell where to keep payrecon's data: HOME is not set",
                          "set PAYRECON_HOME, or give a database with PAYRECON_DATABASE_URL");
    }
    return fs::path(home_dir) / ".local" / "share" / "payrecon";
}

fs::path LocalCluster::socket_dir() const {
    fs::path dir = m_home / "postgres" / "run";
    const std::string socket_file = "/.s.PGSQL." + std::to_string(k_port);
    if (dir.string().size() + socket_file.size() <= k_max_socket_path) {
        return dir;
    }
    // Too long for a Unix socket address: a private directory in /tmp named after the home.
    return fs::path("/tmp") / ("payrecon-" + std::to_string(::geteuid()) + "-" +
                               sha256_hex(m_home.string()).substr(0, 16));
}

std::string LocalCluster::url() const {
    return std::string("postgresql:///") + k_database +
           "?host=" + percent_encode(socket_dir().string()) + "&port=" + std::to_string(k_port) +
           "&user=" + k_user;
}

ClusterStatus LocalCluster::status() const {
    ClusterStatus st;
    std::ifstream version(data_dir() / "PG_VERSION");
    if (version) {
        st.initialized = true;
        std::getline(version, st.server_version);
    }
    st.running = st.initialized && server_accepting(socket_dir());
    if (st.running) {
        std::ifstream pidfile(data_dir() / "postmaster.pid");
        long pid = 0;
        if (pidfile >> pid) {
            st.pid = pid;
        }
    }
    return st;
}

void LocalCluster::prepare_server_user_access() {
    const ServerUser user = server_user();
    if (!user.switch_user) {
        return;
    }
    // The home itself: searchable, not listable, by others (secrets inside are 0600).
    if (::chmod(m_home.c_str(), 0711) != 0) {
        throw ConfigError("cannot set permissions on " + m_home.string() + ": " +
                          std::strerror(errno));
    }
    std::vector<fs::path> ancestors;
    for (fs::path p = m_home; p != p.root_path(); p = p.parent_path()) {
        ancestors.push_back(p);
    }
    ancestors.push_back(m_home.root_path());
    std::reverse(ancestors.begin(), ancestors.end());
    for (const fs::path& dir : ancestors) {
        if (server_user_can_search(dir, user)) {
            continue;
        }
        const bool granted =
            fs::exists("/usr/bin/setfacl") &&
            run_program({"/usr/bin/setfacl", "-m", "u:" + user.name + ":x", dir.string()},
                        ServerUser{}, "/", "/dev/null") == 0 &&
            server_user_can_search(dir, user);
        if (!granted) {
            throw ConfigError(
                "the private PostgreSQL runs as the postgres user, which cannot reach " +
                    m_home.string() + " (it may not enter " + dir.string() + ")",
                "set PAYRECON_HOME below a directory the postgres user can enter (for example "
                "/var/lib/payrecon), or allow it: setfacl -m u:postgres:x " +
                    dir.string());
        }
        if (m_notice) {
            m_notice("allowed the postgres user to pass through " + dir.string() +
                     " (setfacl u:postgres:x) so the private PostgreSQL can reach " +
                     m_home.string());
        }
    }
}

void LocalCluster::initialize() {
    const ServerUser user = server_user();
    const fs::path bindir = postgres_bindir();
    const fs::path pg_dir = m_home / "postgres";
    make_private_dir(m_home, user, false);
    make_private_dir(pg_dir, user, true);
    prepare_server_user_access();
    std::error_code ec;
    if (fs::exists(data_dir()) && !fs::exists(data_dir() / "PG_VERSION")) {
        fs::remove_all(data_dir(), ec); // an initdb that was interrupted: start over
    }
    const fs::path log = pg_dir / "initdb.log";
    const int rc =
        run_program({(bindir / "initdb").string(), "-D", data_dir().string(), "-U", k_user, "-E",
                     "UTF8", "--locale=C", "-A", "trust", "--no-instructions"},
                    user, pg_dir, log);
    if (rc != 0) {
        throw DatabaseUnavailable("initdb failed (exit " + std::to_string(rc) +
                                      "):" + tail_of(log, 15),
                                  "see " + log.string());
    }
    // Settings per DESIGN section 4; the socket directory is private to this home.
    std::ostringstream conf;
    conf << "# Written by payrecon when it created this cluster.\n"
         << "listen_addresses = ''\n"
         << "unix_socket_directories = '" << socket_dir().string() << "'\n"
         << "unix_socket_permissions = 0700\n"
         << "port = " << k_port << "\n"
         << "max_connections = 300\n"
         << "shared_buffers = '" << shared_buffers_mb() << "MB'\n"
         << "fsync = on\n"
         << "synchronous_commit = on\n"
         << "full_page_writes = on\n"
         << "client_connection_check_interval = '1s'\n"
         << "idle_in_transaction_session_timeout = '5min'\n"
         << "timezone = 'UTC'\n"
         << "log_timezone = 'UTC'\n"
         << "log_line_prefix = '%m [%p] %q%u@%d '\n";
    write_owned_file(data_dir() / "payrecon.conf", conf.str(), user, false);
    write_owned_file(data_dir() / "postgresql.conf", "\ninclude 'payrecon.conf'\n", user, true);
}

void LocalCluster::start() {
    const ServerUser user = server_user();
    const fs::path bindir = postgres_bindir();
    make_private_dir(socket_dir(), user, true);
    const fs::path pg_dir = m_home / "postgres";
    const int rc = run_program({(bindir / "pg_ctl").string(), "-D", data_dir().string(), "-l",
                                log_file().string(), "-w", "-t", "120", "-s", "start"},
                               user, pg_dir, pg_dir / "pg_ctl.log");
    if (rc != 0 || !server_accepting(socket_dir())) {
        throw DatabaseUnavailable(
            "the private PostgreSQL in " + data_dir().string() +
                " did not start; the end of its log:" + tail_of(log_file(), 20),
            "read " + log_file().string() + " and " + (pg_dir / "pg_ctl.log").string());
    }
}

void LocalCluster::ensure_started() {
    if (status().running && database_exists(*this)) {
        return;
    }
    const ServerUser user = server_user();
    make_private_dir(m_home, user, false);
    if (user.switch_user) {
        prepare_server_user_access();
    }
    LockFile lock(m_home / "postgres.lock");
    const ClusterStatus st = status();
    if (!st.initialized) {
        initialize();
    }
    if (!status().running) {
        start();
    }
    if (!database_exists(*this)) {
        create_database(socket_dir());
    }
}

bool LocalCluster::stop(StopMode mode) {
    if (!status().running) {
        return false;
    }
    const ServerUser user = server_user();
    const fs::path pg_dir = m_home / "postgres";
    LockFile lock(m_home / "postgres.lock");
    const int rc = run_program({(postgres_bindir() / "pg_ctl").string(), "-D", data_dir().string(),
                                "-m", mode == StopMode::immediate ? "immediate" : "fast", "-w",
                                "-t", "120", "-s", "stop"},
                               user, pg_dir, pg_dir / "pg_ctl.log");
    if (rc != 0) {
        throw DatabaseUnavailable("the private PostgreSQL did not stop:" +
                                  tail_of(pg_dir / "pg_ctl.log", 10));
    }
    return true;
}

} // namespace payrecon::store
